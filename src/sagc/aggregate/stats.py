"""Per-cell training statistics and their mean and std over seeds (docs/aggregation.md, "Per-cell statistics")."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sagc import metrics

NEEDED_METRICS = (
    metrics.STRAGGLER,
    metrics.DECODE_STEPS,
    metrics.CPU_TOTAL_SECONDS,
    metrics.WALLCLOCK_SECONDS,
    metrics.ROLLOUT_SECONDS,
    metrics.STEP_SECONDS,
    metrics.REWARD_MEAN,
    metrics.GROUP_SIZE,
    metrics.LENGTH_MEAN,
    metrics.PADDING_EFFICIENCY,
)


def _col(history: pd.DataFrame, name: str) -> pd.Series:
    return pd.to_numeric(history[name], errors="coerce")


def missing_metrics(history: pd.DataFrame) -> list[str]:
    """The needed metrics a history lacks (absent or never a number)."""
    return [m for m in NEEDED_METRICS if m not in history.columns or _col(history, m).notna().sum() == 0]


def cell_stats(history: pd.DataFrame, last_k: int) -> dict[str, float]:
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
