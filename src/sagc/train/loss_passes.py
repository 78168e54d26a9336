"""A micro-batch's loss in passes of a fixed number of rows (``train.micro_batch_rows``).

TRL splits a step into a fixed number of micro-batches, so a micro-batch grows with G. The
trainer runs one larger than ``micro_batch_rows`` as passes of that many rows, so every step
trains in passes of one size, the size the memory plan was made for. Each pass's loss is
weighted as its share of the micro-batch's loss and back-propagated in turn, so the
accumulated gradient is the whole micro-batch's; the cross-rank reduction waits for the last
pass (``held_gradient_sync``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch

#: TRL's loss types by how a micro-batch's loss is normalised: a mean over its rows, a mean
#: over its completion tokens, or a sum over a normaliser of the whole generation batch.
ROW_MEAN_LOSSES = ("grpo", "sapo", "dr_grpo", "luspo")
TOKEN_MEAN_LOSSES = ("bnpo",)
GLOBAL_LOSSES = ("dapo", "cispo", "vespo")


def pass_slices(rows: int, cap: int) -> list[slice]:
    """The passes of a micro-batch of ``rows`` rows: consecutive slices of at most ``cap``."""
    return [slice(i, min(i + cap, rows)) for i in range(0, rows, cap)]


def pass_weights(loss_type: str, inputs: dict, passes: list[slice]) -> list[float]:
    """Each pass's share of its micro-batch's loss, so that the passes' losses sum to it."""
    if loss_type in GLOBAL_LOSSES:
        return [1.0] * len(passes)
    if loss_type in ROW_MEAN_LOSSES:
        rows = sum(p.stop - p.start for p in passes)
        return [(p.stop - p.start) / rows for p in passes]
    if loss_type in TOKEN_MEAN_LOSSES:
        mask = inputs["completion_mask"]
        if "tool_mask" in inputs:
            mask = mask * inputs["tool_mask"]
        tokens = [float(mask[p].sum()) for p in passes]
        return [t / max(sum(tokens), 1.0) for t in tokens]
    raise ValueError(f"train.micro_batch_rows does not support loss_type {loss_type!r}")


def pass_inputs(inputs: dict, part: slice, rows: int) -> dict:
    """The rows ``part`` of every per-row tensor of ``inputs``; other values as they are."""
    return {key: v[part] if _per_row(v, rows) else v for key, v in inputs.items()}


@contextlib.contextmanager
def held_gradient_sync(accelerator, model):
    """Hold back the cross-rank gradient reduction of a loss pass that is not its micro-step's
    last. On a micro-step that does not end an accumulation (``sync_gradients`` false) the
    Trainer already holds it with its own ``no_sync``, and nesting another would undo that:
    accelerate's ``no_sync`` under FSDP2 sets gradient sync back to on at exit instead of
    restoring it, so the micro-step's last pass would reduce. Only on the micro-step that
    ends the accumulation (the Trainer's context is then empty) is ``no_sync`` entered here."""
    if not accelerator.sync_gradients:
        yield
        return
    with accelerator.no_sync(model):
        yield


def loss_in_passes(
    inputs: dict, cap: int, loss_type: str, loss_of: Callable[[dict], torch.Tensor], accelerator: Any, model: Any
) -> torch.Tensor:
    """The micro-batch's loss from passes of at most ``cap`` rows (``loss_of`` one pass's):
    every pass but the last is weighted and back-propagated here, sync held; the last one's
    weighted loss is returned, plus the earlier ones' values (detached), for the caller to
    back-propagate as it would the whole micro-batch's."""
    rows = int(inputs["completion_ids"].shape[0])
    passes = pass_slices(rows, cap)
    weights = pass_weights(loss_type, inputs, passes)
    earlier = None
    for k, part in enumerate(passes):
        chunk = pass_inputs(inputs, part, rows)
        if k == len(passes) - 1:
            loss = loss_of(chunk) * weights[k]
            return loss if earlier is None else loss + earlier
        with held_gradient_sync(accelerator, model):
            loss = loss_of(chunk) * weights[k]
            accelerator.backward(loss)
        earlier = loss.detach() if earlier is None else earlier + loss.detach()
    raise ValueError("a micro-batch with no rows has no loss passes")


def _per_row(value, rows: int) -> bool:
    return isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape[0] == rows
