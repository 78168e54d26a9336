"""Seed-level intervals: a training run is the unit of every interval in the tables.

One paired number per seed, Student's t over seeds or pooled over strata; a tie on every
seed is *untestable*. Why seeds, why paired, the formulas: docs/aggregation.md, "Seed-level
intervals".
"""

from __future__ import annotations

import glob
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy import stats

from sagc import metrics
from sagc.aggregate.power import detectable_distance
from sagc.evaluate.scoring import METRIC
from sagc.io import read_jsonl

#: Confidence level of every interval; a two-sided test at 1 - LEVEL matches it.
LEVEL = 0.95
#: Power at which the minimal detectable effect is stated.
POWER = 0.8


@dataclass(frozen=True)
class Interval:
    """A point estimate with its ``LEVEL`` interval over ``n`` seeds (in ``strata`` strata),
    the two-sided ``p`` against ``null`` (NaN: untestable), the seeds' ``sd``, ``se`` and
    ``df``. ``log``: computed on the log scale and shown exponentiated (speed-ups); ``sd`` and
    ``se`` stay on the log scale."""

    estimate: float
    low: float
    high: float
    n: int
    null: float = 0.0
    p: float = math.nan
    sd: float = math.nan
    log: bool = False
    se: float = math.nan
    df: float = math.nan
    strata: int = 1

    @property
    def testable(self) -> bool:
        return math.isfinite(self.p)

    def clipped(self, low: float, high: float) -> Interval:
        """The interval cut to a parameter's range (a rate's interval ends inside [0, 1])."""
        return replace(self, low=max(self.low, low), high=min(self.high, high))

    def text(self, fmt: str = ".3f", scale: float = 1.0, suffix: str = "") -> str:
        if math.isnan(self.estimate):
            return "n/a"
        f = lambda v: "n/a" if math.isnan(v) else format(v * scale, fmt)  # noqa: E731
        return f"{f(self.estimate)}{suffix} [{f(self.low)}, {f(self.high)}]"

    def mde(self, alpha: float = 1 - LEVEL, power: float = POWER) -> float:
        """The smallest true effect (distance from ``null``, in the shown units; for a
        log-scale interval, the speed-up factor) that a two-sided t test at ``alpha`` with
        this interval's standard error and degrees of freedom detects with ``power``."""
        effect = detectable_distance(self.se, self.df, alpha, power)
        return math.exp(effect) if self.log and math.isfinite(effect) else effect


def _clean(values: Sequence[float]) -> np.ndarray:
    return np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)


def _tied(sd: float, mean: float) -> bool:
    """Equal up to rounding: a t statistic over such a spread would be noise."""
    return sd <= 1e-12 * max(1.0, abs(mean))


def seed_interval(values: Sequence[float], null: float = 0.0) -> Interval:
    """Mean of per-seed ``values`` with its t interval (S - 1 degrees of freedom) and the
    two-sided p-value against ``null``. NaN values (a seed without the statistic) drop out.
    Every seed equal: a point interval, p NaN (untestable)."""
    x = _clean(values)
    n = int(x.size)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, 0, null)
    mean = float(x.mean())
    if n == 1:
        return Interval(mean, math.nan, math.nan, 1, null)
    sd = float(x.std(ddof=1))
    if _tied(sd, mean):
        return Interval(mean, mean, mean, n, null, math.nan, 0.0, se=0.0, df=n - 1)
    res = stats.ttest_1samp(x, popmean=null)
    ci = res.confidence_interval(LEVEL)
    return Interval(mean, float(ci.low), float(ci.high), n, null, float(res.pvalue), sd,
                    se=sd / math.sqrt(n), df=n - 1)  # fmt: skip


def pooled_interval(strata: Sequence[Sequence[float]], null: float = 0.0) -> Interval:
    """One estimate over K strata (model x algorithm pairs) of per-seed paired values: a
    stratified paired t, each stratum weighing the same, with the pooled within-stratum spread
    (formula: docs/aggregation.md, "Seed-level intervals"). No df or no spread: p NaN."""
    xs = [x for x in map(_clean, strata) if x.size]
    if not xs:
        return Interval(math.nan, math.nan, math.nan, 0, null, strata=0)
    k = len(xs)
    ns = np.array([x.size for x in xs], dtype=float)
    estimate = float(np.mean([x.mean() for x in xs]))
    n, df = int(ns.sum()), int((ns - 1).sum())
    if df == 0:
        return Interval(estimate, math.nan, math.nan, n, null, strata=k)
    sd = math.sqrt(sum(float(((x - x.mean()) ** 2).sum()) for x in xs) / df)
    if _tied(sd, estimate):
        return Interval(estimate, estimate, estimate, n, null, math.nan, 0.0, se=0.0, df=df, strata=k)
    se = sd * math.sqrt(float((1 / ns).sum())) / k
    t = (estimate - null) / se
    half = float(stats.t.ppf(0.5 + LEVEL / 2, df)) * se
    return Interval(estimate, estimate - half, estimate + half, n, null, float(2 * stats.t.sf(abs(t), df)),
                    sd, se=se, df=df, strata=k)  # fmt: skip


def as_ratio(iv: Interval) -> Interval:
    """A log-scale interval shown as a ratio (``exp``; null 1x); sd and se stay on the log scale."""
    e = lambda v: math.exp(v) if math.isfinite(v) else math.nan  # noqa: E731
    return replace(iv, estimate=e(iv.estimate), low=e(iv.low), high=e(iv.high), null=e(iv.null), log=True)


def ratio_interval(pairs: Sequence[tuple[float, float]]) -> Interval:
    """The speed-up ``ref / ctrl`` from per-seed summed costs ``(ref, ctrl)``: the t interval of
    log(ref / ctrl) over seeds, exponentiated; pairs with a non-positive side drop out."""
    return as_ratio(seed_interval([math.log(r / c) for r, c in pairs if r > 0 and c > 0]))


# --------------------------------------------------------------------------- pairing


def paired_steps(ref_history, ctrl_history, column: str) -> tuple[np.ndarray, np.ndarray]:
    """The ``column`` of two histories (pandas frames with a ``step`` column), on the steps
    both logged, in step order."""
    a = ref_history[[metrics.STEP, column]].dropna().drop_duplicates(metrics.STEP, keep="last")
    b = ctrl_history[[metrics.STEP, column]].dropna().drop_duplicates(metrics.STEP, keep="last")
    both = a.merge(b, on=metrics.STEP, suffixes=("_ref", "_ctrl")).sort_values(metrics.STEP)
    return both[f"{column}_ref"].to_numpy(float), both[f"{column}_ctrl"].to_numpy(float)


def doc_scores(eval_dir: str, task: str) -> dict[int, float]:
    """Per-problem score (avg@k) of one evaluation from lm-eval's samples file
    (``samples_<task>_<timestamp>.jsonl`` under ``eval_dir``; the newest if several)."""
    files = sorted(glob.glob(os.path.join(glob.escape(eval_dir), "**", f"samples_{task}_*.jsonl"), recursive=True))
    if not files:
        raise FileNotFoundError(f"no lm-eval samples file for task {task!r} under {eval_dir}")
    scores = {}
    for n, rec in read_jsonl(files[-1]):
        try:
            scores[int(rec["doc_id"])] = float(rec[METRIC])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{files[-1]}:{n}: not an lm-eval sample with doc_id and {METRIC}: {exc}") from exc
    return scores


def paired_docs(ref: dict[int, float], ctrl: dict[int, float]) -> tuple[np.ndarray, np.ndarray]:
    """Scores of the problems both evaluations hold, in doc-id order."""
    ids = sorted(set(ref) & set(ctrl))
    return np.array([ref[i] for i in ids], dtype=float), np.array([ctrl[i] for i in ids], dtype=float)
