"""Seed-level intervals and the power of their t tests: a training run is the unit of every interval
(docs/aggregation.md, "Seed-level intervals", "Power")."""

from __future__ import annotations

import glob
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy import optimize, stats

from sagc import metrics
from sagc.evaluate.scoring import METRIC
from sagc.io import read_jsonl

#: Confidence level of every interval; a two-sided test at 1 - LEVEL matches it.
LEVEL = 0.95
#: Power at which the minimal detectable effect is stated.
POWER = 0.8


@dataclass(frozen=True)
class Interval:
    """An estimate with its ``LEVEL`` interval over ``n`` seeds and two-sided ``p`` against ``null`` (NaN:
    untestable). ``log``: shown exponentiated (speed-ups), ``sd`` and ``se`` stay on the log scale."""

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
        """The interval cut to a parameter's range."""
        return replace(self, low=max(self.low, low), high=min(self.high, high))

    def text(self, fmt: str = ".3f", scale: float = 1.0, suffix: str = "") -> str:
        if math.isnan(self.estimate):
            return "n/a"
        f = lambda v: "n/a" if math.isnan(v) else format(v * scale, fmt)  # noqa: E731
        return f"{f(self.estimate)}{suffix} [{f(self.low)}, {f(self.high)}]"

    def mde(self, alpha: float = 1 - LEVEL, power: float = POWER) -> float:
        """The smallest true distance from ``null`` (shown units) a t test at ``alpha`` detects with ``power``."""
        effect = detectable_distance(self.se, self.df, alpha, power)
        return math.exp(effect) if self.log and math.isfinite(effect) else effect


def _clean(values: Sequence[float]) -> np.ndarray:
    return np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)


def _tied(sd: float, mean: float) -> bool:
    """Equal up to rounding: a t statistic over such a spread would be noise."""
    return sd <= 1e-12 * max(1.0, abs(mean))


def seed_interval(values: Sequence[float], null: float = 0.0) -> Interval:
    """Mean of per-seed ``values`` (NaN drops out) with its t interval and p against ``null``; every
    seed equal: a point interval, p NaN (untestable)."""
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
    """One estimate over strata of per-seed values, a stratified paired t (docs/aggregation.md)."""
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
    """The speed-up ``ref / ctrl`` from per-seed summed costs ``(ref, ctrl)``, on the log scale."""
    return as_ratio(seed_interval([math.log(r / c) for r, c in pairs if r > 0 and c > 0]))


def design(seeds_per_stratum: Sequence[int]) -> tuple[float, int]:
    """``(se / sd, df)`` of the pooled estimate over strata with these seed counts."""
    ns = [int(n) for n in seeds_per_stratum if n > 0]
    if not ns:
        return math.nan, 0
    return math.sqrt(sum(1 / n for n in ns)) / len(ns), sum(n - 1 for n in ns)


def power_at(distance: float, se: float, df: float, alpha: float) -> float:
    """Power of the two-sided t test to hold when the truth lies ``distance`` from the null on the
    claimed side (negative: on the other side)."""
    if not (math.isfinite(distance) and math.isfinite(se) and se > 0 and df >= 1):
        return math.nan
    crit = stats.t.ppf(1 - alpha / 2, df)
    return float(stats.nct.sf(crit, df, distance / se))


def detectable_distance(se: float, df: float, alpha: float, power: float) -> float:
    """The smallest distance from the null the test detects with ``power`` (NaN without se or df)."""
    if not (math.isfinite(se) and se > 0 and math.isfinite(df) and df >= 1):
        return math.nan
    crit = stats.t.ppf(1 - alpha / 2, df)
    ncp = optimize.brentq(lambda d: stats.nct.sf(crit, df, d) - power, 0.0, 100.0)
    return float(ncp * se)


def planned_power(distance: float, sd: float, seeds_per_stratum: Sequence[int], alpha: float) -> float:
    """Power of a pooled claim at ``distance`` for a per-seed spread ``sd`` and a design."""
    factor, df = design(seeds_per_stratum)
    return power_at(distance, sd * factor, df, alpha)


def paired_steps(ref_history, ctrl_history, column: str) -> tuple[np.ndarray, np.ndarray]:
    """The ``column`` of two histories on the steps both logged, in step order."""
    a = ref_history[[metrics.STEP, column]].dropna().drop_duplicates(metrics.STEP, keep="last")
    b = ctrl_history[[metrics.STEP, column]].dropna().drop_duplicates(metrics.STEP, keep="last")
    both = a.merge(b, on=metrics.STEP, suffixes=("_ref", "_ctrl")).sort_values(metrics.STEP)
    return both[f"{column}_ref"].to_numpy(float), both[f"{column}_ctrl"].to_numpy(float)


def doc_scores(eval_dir: str, task: str) -> dict[int, float]:
    """Per-problem score (avg@k) from the newest lm-eval samples file of ``task`` under ``eval_dir``."""
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
