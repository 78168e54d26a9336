"""A micro-batch's loss in passes of a fixed number of rows (``train.micro_batch_rows``).

Why: docs/trainer.md, "Inside the trainer" (loss passes of a fixed size).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch

#: TRL's loss types by normalisation: over the micro-batch's rows, its tokens, or the whole batch.
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
    """Hold back the gradient reduction of a pass that is not its micro-step's last. Only when
    the Trainer does not hold it already: a nested ``no_sync`` under FSDP2 turns sync back on
    at exit instead of restoring it."""
    if not accelerator.sync_gradients:
        yield
        return
    with accelerator.no_sync(model):
        yield


def loss_in_passes(
    inputs: dict, cap: int, loss_type: str, loss_of: Callable[[dict], torch.Tensor], accelerator: Any, model: Any
) -> torch.Tensor:
    """The micro-batch's loss from passes of at most ``cap`` rows: every pass but the last is
    weighted and back-propagated here; the last one's weighted loss is returned, plus the
    earlier ones' values (detached)."""
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
