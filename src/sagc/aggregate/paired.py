"""Paired comparisons of a controller against the reference fixed G, with 95 % intervals.

Why paired: the cells of one seed share their prompt stream (``Cell.train_seed`` ignores
the sizing), so with a fixed number of prompts per step, step t of ``sagc`` and step t of
``g16`` train on the same prompts, and both final models are evaluated on the same
problems. Differences are taken inside a pair — the prompt's difficulty cancels — and
only then averaged.

Units and intervals (*batch means*, the standard interval for autocorrelated series):

* **per step** (straggler flag, decode steps, CPU seconds, reward): the paired series of
  every seed. Steps of one run are not independent (G and the policy carry over), so each
  seed's series is cut into ``BATCHES`` consecutive batches (8 steps each in a 32-step
  run); the batch means are close to independent, and the interval is Student's t over
  all seeds' batch means (``seeds x BATCHES - 1`` degrees of freedom). Speed-ups are
  ratios of summed costs: the same batches, with the ratio's linearised standard error.
  Checked by simulation (``tests/aggregate/test_paired.py``): paired AR(1) differences
  with lag-1 correlation 0.5, 2 seeds x 32 steps, cover the true mean in ~95 % of runs
  (a moving-block bootstrap gave ~82 %). With DAPO the prompt streams drift apart after
  the first refill round (refills draw extra prompts), so DAPO pairs are looser than
  GRPO pairs; the interval stays valid, only wider.
* **per problem** (evaluation accuracy): the paired per-problem scores (avg@k) of the two
  models; problems are independent draws, so each problem is its own batch.

A claim's verdict at 95 % (``verdict_difference`` / ``verdict_not_worse``):

* a *difference* claim ("fewer stragglers", "cheaper") **holds** when the whole interval
  lies on the claimed side of no-difference, **fails** when it lies wholly on the other
  side, and is **inconclusive** otherwise;
* a *not worse* claim (reward, accuracy) is a non-inferiority test at a stated margin
  m: it **holds** when the lower end exceeds -m, **fails** when the upper end is below 0
  (significantly worse), and is **inconclusive** otherwise.
"""

from __future__ import annotations

import glob
import json
import math
import os
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats

#: Batches per seed for per-step series.
BATCHES = 4
#: Confidence level of every interval.
LEVEL = 0.95
#: Non-inferiority margins of the "not worse" claims (absolute: reward units, accuracy).
REWARD_MARGIN = 0.05
ACCURACY_MARGIN = 0.05

HOLDS, FAILS, INCONCLUSIVE = "holds", "fails", "inconclusive"


@dataclass(frozen=True)
class Interval:
    """A point estimate with its ``LEVEL`` interval over ``n`` (paired) units."""

    estimate: float
    low: float
    high: float
    n: int

    def clipped(self, low: float, high: float) -> "Interval":
        """The interval cut to a parameter's range (a rate's interval ends inside [0, 1])."""
        return Interval(self.estimate, max(self.low, low), min(self.high, high), self.n)

    def text(self, fmt: str = ".3f", scale: float = 1.0, suffix: str = "") -> str:
        if math.isnan(self.estimate):
            return "n/a"
        f = lambda v: format(v * scale, fmt)  # noqa: E731
        return f"{f(self.estimate)}{suffix} [{f(self.low)}, {f(self.high)}]"


def _batches(series: np.ndarray, batches: int | None) -> list[np.ndarray]:
    """``series`` cut into ``batches`` consecutive parts (None: one unit per part)."""
    n = series.size
    if n == 0:
        return []
    k = n if batches is None else max(1, min(batches, n))
    return [part for part in np.array_split(series, k) if part.size]


def _interval(estimate: float, se: float, dof: int, n: int) -> Interval:
    if dof < 1 or not math.isfinite(se):
        return Interval(estimate, math.nan, math.nan, n)
    half = float(stats.t.ppf(1 - (1 - LEVEL) / 2, dof)) * se
    return Interval(estimate, estimate - half, estimate + half, n)


def mean_interval(strata: Sequence[np.ndarray], batches: int | None = BATCHES) -> Interval:
    """Mean of the pooled units of ``strata`` (one array per seed) with its t interval over
    the strata's batch means (``batches`` per stratum; None: every unit its own batch)."""
    strata = [np.asarray(x, dtype=float) for x in strata]
    units = np.concatenate(strata) if strata else np.array([])
    if units.size == 0:
        return Interval(math.nan, math.nan, math.nan, 0)
    means = np.array([b.mean() for x in strata for b in _batches(x, batches)])
    sizes = np.array([b.size for x in strata for b in _batches(x, batches)], dtype=float)
    estimate = float(units.mean())
    # Batches may differ in size by one step: weight them by size.
    w = sizes / sizes.sum()
    k = means.size
    se = math.sqrt(float(np.sum(w**2 * (means - estimate) ** 2)) * k / (k - 1)) if k > 1 else math.nan
    return _interval(estimate, se, k - 1, int(units.size))


def difference_interval(strata: Sequence[tuple[np.ndarray, np.ndarray]], batches: int | None = BATCHES) -> Interval:
    """mean(ctrl - ref) over paired ``(ref, ctrl)`` series, one pair per seed."""
    diffs = []
    for ref, ctrl in strata:
        ref, ctrl = _paired(ref, ctrl)
        diffs.append(ctrl - ref)
    return mean_interval(diffs, batches)


def ratio_interval(strata: Sequence[tuple[np.ndarray, np.ndarray]], batches: int | None = BATCHES) -> Interval:
    """sum(ref) / sum(ctrl) over paired cost series (the speed-up of ctrl), with the ratio
    estimator's linearised standard error over batch sums."""
    pairs = [_paired(r, c) for r, c in strata]
    ref_b = np.array([b.sum() for r, _ in pairs for b in _batches(r, batches)])
    ctrl_b = np.array([b.sum() for _, c in pairs for b in _batches(c, batches)])
    n = int(sum(r.size for r, _ in pairs))
    if ctrl_b.size == 0 or ctrl_b.sum() <= 0:
        return Interval(math.nan, math.nan, math.nan, n)
    ratio = float(ref_b.sum() / ctrl_b.sum())
    k = ref_b.size
    if k < 2:
        return Interval(ratio, math.nan, math.nan, n)
    z = ref_b - ratio * ctrl_b
    se = float(z.std(ddof=1)) / math.sqrt(k) / float(ctrl_b.mean())
    return _interval(ratio, se, k - 1, n)


def _paired(ref, ctrl) -> tuple[np.ndarray, np.ndarray]:
    ref, ctrl = np.asarray(ref, dtype=float), np.asarray(ctrl, dtype=float)
    if ref.shape != ctrl.shape:
        raise ValueError(f"paired series differ in length: {ref.size} vs {ctrl.size}")
    return ref, ctrl


def verdict_difference(iv: Interval, claimed_side: str, null: float = 0.0) -> str:
    """``claimed_side`` "below" (e.g. fewer stragglers: ctrl - ref < 0) or "above"
    (e.g. speed-up > 1) of ``null``."""
    if claimed_side not in ("below", "above"):
        raise ValueError(f"claimed_side must be 'below' or 'above', got {claimed_side!r}")
    if math.isnan(iv.low):
        return INCONCLUSIVE
    below, above = iv.high < null, iv.low > null
    if claimed_side == "below":
        return HOLDS if below else FAILS if above else INCONCLUSIVE
    return HOLDS if above else FAILS if below else INCONCLUSIVE


def verdict_not_worse(iv: Interval, margin: float) -> str:
    """Non-inferiority of ctrl - ref at ``margin`` (see the module docstring)."""
    if margin < 0:
        raise ValueError(f"margin must be >= 0, got {margin}")
    if math.isnan(iv.low):
        return INCONCLUSIVE
    if iv.low > -margin:
        return HOLDS
    return FAILS if iv.high < 0 else INCONCLUSIVE


# --------------------------------------------------------------------------- pairing


def paired_steps(ref_history, ctrl_history, column: str) -> tuple[np.ndarray, np.ndarray]:
    """The ``column`` of two histories (pandas frames with a ``step`` column), on the steps
    both logged, in step order."""
    from sagc import metrics

    a = ref_history[[metrics.STEP, column]].dropna().drop_duplicates(metrics.STEP, keep="last")
    b = ctrl_history[[metrics.STEP, column]].dropna().drop_duplicates(metrics.STEP, keep="last")
    both = a.merge(b, on=metrics.STEP, suffixes=("_ref", "_ctrl")).sort_values(metrics.STEP)
    return both[f"{column}_ref"].to_numpy(float), both[f"{column}_ctrl"].to_numpy(float)


def doc_scores(eval_dir: str, task: str) -> dict[int, float]:
    """Per-problem score (avg@k) of one evaluation from lm-eval's samples file
    (``samples_<task>_<timestamp>.jsonl`` under ``eval_dir``; the newest if several)."""
    from sagc.evaluate.scoring import METRIC

    files = sorted(glob.glob(os.path.join(glob.escape(eval_dir), "**", f"samples_{task}_*.jsonl"), recursive=True))
    if not files:
        raise FileNotFoundError(f"no lm-eval samples file for task {task!r} under {eval_dir}")
    scores = {}
    with open(files[-1], encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                scores[int(rec["doc_id"])] = float(rec[METRIC])
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                raise ValueError(f"{files[-1]}:{n}: not an lm-eval sample with doc_id and {METRIC}: {exc}") from exc
    return scores


def paired_docs(ref: dict[int, float], ctrl: dict[int, float]) -> tuple[np.ndarray, np.ndarray]:
    """Scores of the problems both evaluations hold, in doc-id order."""
    ids = sorted(set(ref) & set(ctrl))
    return np.array([ref[i] for i in ids], dtype=float), np.array([ctrl[i] for i in ids], dtype=float)
