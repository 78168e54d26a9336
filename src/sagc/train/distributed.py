"""One synchronous step across several processes; with one process every function returns its input.

Each agreement and why it is needed: docs/cluster.md, "One step across several processes".
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import torch

from sagc.train.dynamic_sampling import PER_ROW_KEYS, is_left_padded, pad_value


def world() -> tuple[int, int]:
    """``(rank, number of processes)`` of this run (``(0, 1)`` outside torch.distributed)."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


def shard(rows: Sequence, rank: int, size: int) -> list:
    """Rank ``rank``'s contiguous share of ``rows`` (their number must divide by ``size``)."""
    if len(rows) % size:
        raise RuntimeError(f"{len(rows)} rows cannot be shared equally by {size} processes")
    n = len(rows) // size
    return list(rows[rank * n : (rank + 1) * n])


def refill_unit(group_size: int, size: int) -> int:
    """The fewest prompts whose G rows each split evenly over ``size`` processes."""
    return size // math.gcd(group_size, size)


def gather_rows(items: list) -> list:
    """Every rank's ``items`` concatenated in rank order (the rows' global order)."""
    if world()[1] == 1:
        return list(items)
    out: list = [None] * world()[1]
    torch.distributed.all_gather_object(out, list(items))
    return [x for part in out for x in part]


def agree(value: Any, what: str) -> Any:
    """``value``, checked to be the same on every rank; ``RuntimeError`` naming ``what`` if not."""
    if world()[1] == 1:
        return value
    seen: list = [None] * world()[1]
    torch.distributed.all_gather_object(seen, value)
    if any(v != seen[0] for v in seen):
        raise RuntimeError(
            f"the processes disagree on {what}: {seen} (rank order); the group sizers must be identical on every rank"
        )
    return value


def _reduce(values: tuple[float, ...], op: str) -> list[float]:
    if world()[1] == 1:
        return list(values)
    t = torch.tensor(values, dtype=torch.float64, device=_device())
    torch.distributed.all_reduce(t, op=getattr(torch.distributed.ReduceOp, op))
    return t.tolist()


def slowest(*values: float) -> list[float]:
    """Each value's maximum over the ranks (a synchronous step waits for the slowest)."""
    return _reduce(values, "MAX")


def total(*values: float) -> list[float]:
    """Each value's sum over the ranks."""
    return _reduce(values, "SUM")


def wait_for_all() -> float:
    """Seconds this rank waits until every rank reaches this point (0.0 on one process)."""
    if world()[1] == 1:
        return 0.0
    t0 = time.perf_counter()
    t = torch.zeros(1, device=_device())
    torch.distributed.all_reduce(t)
    t.item()  # under NCCL the reduction is queued on the GPU: wait for it
    return time.perf_counter() - t0


def any_rank(flag: bool) -> bool:
    """True on every rank when ``flag`` is true on any one (e.g. a stop signal one rank got)."""
    return bool(slowest(float(flag))[0])


def _device() -> torch.device:
    """The device collectives run on: the rank's GPU under NCCL, the CPU under gloo."""
    if torch.distributed.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def gather_scored(scored: dict, pad_token_id: int) -> dict:
    """Every rank's scored rows in one batch, in rank order, padded to the widest rank as TRL pads."""
    if world()[1] == 1:
        return scored
    from accelerate.utils import gather, pad_across_processes

    out = {}
    for key, value in scored.items():
        if key not in PER_ROW_KEYS or value is None:
            out[key] = value
            continue
        if value.dim() > 1:
            value = pad_across_processes(
                value, dim=1, pad_index=pad_value(key, pad_token_id), pad_first=is_left_padded(key)
            )
        out[key] = gather(value.contiguous())
    return out


def shard_scored(scored: dict) -> dict:
    """This rank's share of a whole-step scored batch (see ``shard``)."""
    rank, size = world()
    if size == 1:
        return scored
    n_rows = int(scored["advantages"].shape[0])
    if n_rows % size:
        raise RuntimeError(f"{n_rows} scored rows cannot be shared equally by {size} processes")
    n = n_rows // size
    return {k: (v[rank * n : (rank + 1) * n] if k in PER_ROW_KEYS and v is not None else v) for k, v in scored.items()}
