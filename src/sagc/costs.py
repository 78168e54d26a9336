"""The machine-independent cost of a synchronous RL step: the decode steps of its longest
rollout plus its weighted trained tokens (docs/controller.md, "Costs, the ceiling and the
oracle mix").
"""

from __future__ import annotations

#: Decode steps one trained (padded) token costs. A 3B model's decode step is memory-bound
#: (~12 ms on a GPU); a trained token is ~8 N FLOPs (~4.4e-5 s at ~400 TFLOP/s): ~1/270.
TRAIN_TOKEN_WEIGHT = 1.0 / 256


def step_cost(decode_steps, train_tokens, weight: float = TRAIN_TOKEN_WEIGHT):
    """A step's cost in decode steps, ``decode_steps + weight * train_tokens`` (numbers or arrays)."""
    if not weight >= 0:
        raise ValueError(f"train-token weight must be >= 0, got {weight!r}")
    return decode_steps + weight * train_tokens
