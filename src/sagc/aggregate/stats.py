"""Per-cell training statistics and their aggregation over seeds.

One training cell is one W&B history, one row per step; each statistic is a mean or last
value of a ``sagc.metrics`` column, and over seeds the mean and sample standard deviation
(NaN with one seed). Speed-ups are paired per seed in ``sagc.aggregate.paired``.

The definition of every statistic: docs/aggregation.md, "Per-cell statistics".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sagc import metrics
from sagc.controller import fixed_group_size

#: The per-cell statistics: name -> (history metrics it needs).
CELL_STATS = {
    "straggler_rate": (metrics.STRAGGLER,),
    "straggler_rate_second_half": (metrics.STRAGGLER,),
    "decode_steps": (metrics.DECODE_STEPS,),
    "cpu_s": (metrics.CPU_TOTAL_SECONDS,),
    "wallclock_s": (metrics.WALLCLOCK_SECONDS,),
    "rollout_share": (metrics.ROLLOUT_SECONDS, metrics.STEP_SECONDS),
    "final_reward": (metrics.REWARD_MEAN,),
    "mean_group_size": (metrics.GROUP_SIZE,),
    "mean_length": (metrics.LENGTH_MEAN,),
    "padding_efficiency": (metrics.PADDING_EFFICIENCY,),
}

#: Every history metric the training-efficiency table needs.
NEEDED_METRICS = tuple(dict.fromkeys(m for ms in CELL_STATS.values() for m in ms))


def reference_sizing(sizings) -> str | None:
    """The largest fixed G among ``sizings`` (the speed-up reference), None if none."""
    fixed = [(fixed_group_size(s), s) for s in sizings if fixed_group_size(s) is not None]
    return max(fixed)[1] if fixed else None


def missing_metrics(history: pd.DataFrame) -> list[str]:
    """The needed metrics a history lacks (absent or never a number)."""
    out = []
    for m in NEEDED_METRICS:
        if m not in history.columns or pd.to_numeric(history[m], errors="coerce").notna().sum() == 0:
            out.append(m)
    return out


def _col(history: pd.DataFrame, name: str) -> pd.Series:
    return pd.to_numeric(history[name], errors="coerce")


def cell_stats(history: pd.DataFrame, last_k: int) -> dict[str, float]:
    """The statistics of one cell's history (see the module docstring)."""
    if last_k < 1:
        raise ValueError(f"last_k must be >= 1, got {last_k}")
    lacking = missing_metrics(history)
    if lacking:
        raise ValueError(f"history lacks metric(s) {lacking}")
    h = history.sort_values(metrics.STEP)
    wall = _col(h, metrics.WALLCLOCK_SECONDS).dropna()
    step_s = _col(h, metrics.STEP_SECONDS).sum()
    reward = _col(h, metrics.REWARD_MEAN).dropna()
    steps = _col(h, metrics.STEP)
    second_half = h[metrics.in_second_half(steps, steps.max())]
    return {
        "steps": int(len(h)),
        "straggler_rate": float(_col(h, metrics.STRAGGLER).mean()),
        "straggler_rate_second_half": float(_col(second_half, metrics.STRAGGLER).mean()),
        "decode_steps": float(_col(h, metrics.DECODE_STEPS).mean()),
        "cpu_s": float(_col(h, metrics.CPU_TOTAL_SECONDS).dropna().iloc[-1]),
        "wallclock_s": float(wall.iloc[-1]),
        "rollout_share": float(_col(h, metrics.ROLLOUT_SECONDS).sum() / step_s) if step_s > 0 else math.nan,
        "final_reward": float(reward.iloc[-last_k:].mean()),
        "mean_group_size": float(_col(h, metrics.GROUP_SIZE).mean()),
        "mean_length": float(_col(h, metrics.LENGTH_MEAN).mean()),
        "padding_efficiency": float(_col(h, metrics.PADDING_EFFICIENCY).mean()),
    }


@dataclass(frozen=True)
class MeanStd:
    """Mean and sample std (ddof=1) over ``n`` seeds; NaN std for fewer than 2."""

    mean: float
    std: float
    n: int

    @classmethod
    def of(cls, values) -> MeanStd:
        arr = np.asarray([v for v in values if v is not None and not math.isnan(v)], dtype=float)
        if arr.size == 0:
            return cls(math.nan, math.nan, 0)
        std = float(arr.std(ddof=1)) if arr.size > 1 else math.nan
        return cls(float(arr.mean()), std, int(arr.size))
