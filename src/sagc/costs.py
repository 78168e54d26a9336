"""The machine-independent cost of a synchronous RL step: decoding plus training.

A synchronous step waits for its longest rollout (``decode_steps``: one batched forward per
generated position, whatever the batch holds), then scores and trains on every rollout
(``train_tokens``: the padded tokens of the loss and scoring passes). The paper's 1.84× is
wall-clock, so a fair cost counts both; decode steps alone cap what a smaller G can save.

``TRAIN_TOKEN_WEIGHT`` is what one trained token costs in decode steps. On a GPU, a decode
step of a 3B model is memory-bound (~12 ms: the weights are read once, batch up to a few
hundred rows), while a trained token costs ~6 N FLOPs forward and backward plus ~2 N per
scoring pass (~4.4e-5 s at ~400 TFLOP/s for N = 3e9): ~1/270 of a decode step. We use
1/256. The tiny world's CPU times check the shape, not this value (docs/controller.md).
"""

from __future__ import annotations

#: Decode steps one trained (padded) token costs: see the module docstring.
TRAIN_TOKEN_WEIGHT = 1.0 / 256


def step_cost(decode_steps, train_tokens, weight: float = TRAIN_TOKEN_WEIGHT):
    """Cost of a step in decode-step units: ``decode_steps + weight * train_tokens``.

    Takes numbers or arrays (numpy, pandas) alike."""
    if not weight >= 0:
        raise ValueError(f"train-token weight must be >= 0, got {weight!r}")
    return decode_steps + weight * train_tokens
