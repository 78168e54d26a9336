"""Seed-level intervals: a training run is the unit of every interval in the tables.

Why seeds: two runs of one cell differ by far more than the steps or problems inside one
run suggest (a seed draws the prompt stream, the sampling and the controller's Thompson
draws, and a run's steps carry G and the policy over). So steps and problems only sharpen
a seed's own summary; they never add degrees of freedom.

Why paired: the cells of one seed share their prompt stream (``Cell.train_seed`` ignores
the sizing), so a controller and a fixed G of the same seed train on the same prompts
(DAPO's refills let the streams drift apart after the first refill) and are evaluated on
the same problems. A comparison takes one number per seed — the controller's summary
minus (or over) the reference's — and then treats those S numbers as S independent draws.

Each interval (``seed_interval``) is Student's t over the S per-seed values, S - 1 degrees
of freedom (``scipy.stats.ttest_1samp``), with its two-sided p-value against the claim's
null value, and the smallest effect the test detects with 80 % power at a given level
(``statsmodels`` ``TTestPower``): a claim with a large ``mde`` was not powered to see a
smaller effect, whatever its verdict.

The per-seed values:

* a rate or a per-step mean (straggler flag, reward): the mean over the run's steps;
* a cost speed-up: log(summed reference cost / summed controller cost) per seed; the
  interval is computed on the log scale and shown as ``exp`` (a geometric mean speed-up);
* accuracy: the mean over problems of the per-problem paired difference of avg@k scores
  (the samples per problem and the problems sharpen it; the seed is the unit).
"""

from __future__ import annotations

import glob
import math
import os
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats

from sagc.io import read_jsonl

#: Confidence level of every interval; a two-sided test at 1 - LEVEL matches it.
LEVEL = 0.95
#: Power at which the minimal detectable effect is stated.
POWER = 0.8


@dataclass(frozen=True)
class Interval:
    """A point estimate with its ``LEVEL`` interval over ``n`` seeds.

    ``p`` is the two-sided p-value against ``null`` (NaN when fewer than 2 seeds or no
    spread); ``sd`` the seeds' sample standard deviation; ``log`` marks an interval computed
    on the log scale and shown exponentiated (speed-ups)."""

    estimate: float
    low: float
    high: float
    n: int
    null: float = 0.0
    p: float = math.nan
    sd: float = math.nan
    log: bool = False

    def clipped(self, low: float, high: float) -> "Interval":
        """The interval cut to a parameter's range (a rate's interval ends inside [0, 1])."""
        return Interval(self.estimate, max(self.low, low), min(self.high, high), self.n,
                        self.null, self.p, self.sd, self.log)  # fmt: skip

    def text(self, fmt: str = ".3f", scale: float = 1.0, suffix: str = "") -> str:
        if math.isnan(self.estimate):
            return "n/a"
        f = lambda v: "n/a" if math.isnan(v) else format(v * scale, fmt)  # noqa: E731
        return f"{f(self.estimate)}{suffix} [{f(self.low)}, {f(self.high)}]"

    def mde(self, alpha: float = 1 - LEVEL, power: float = POWER) -> float:
        """The smallest true effect (distance from ``null``, in the shown units; for a
        log-scale interval, the speed-up factor) that a two-sided t test at ``alpha`` on
        these seeds detects with ``power``, given their observed spread."""
        if self.n < 2 or not math.isfinite(self.sd):
            return math.nan
        from statsmodels.stats.power import TTestPower

        d = TTestPower().solve_power(effect_size=None, nobs=self.n, alpha=alpha, power=power,
                                     alternative="two-sided")  # fmt: skip
        effect = float(d) * self.sd
        return math.exp(effect) if self.log else effect


def seed_interval(values: Sequence[float], null: float = 0.0) -> Interval:
    """Mean of per-seed ``values`` with its t interval (S - 1 degrees of freedom) and the
    two-sided p-value against ``null``. NaN values (a seed without the statistic) drop out."""
    x = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    n = int(x.size)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, 0, null)
    mean = float(x.mean())
    if n == 1:
        return Interval(mean, math.nan, math.nan, 1, null)
    sd = float(x.std(ddof=1))
    if sd <= 1e-12 * max(1.0, abs(mean)):  # equal up to rounding (a t statistic would be noise)
        sd = 0.0
    if sd == 0.0:
        # Every seed gave the same value: a point interval, and no test to make.
        p = 0.0 if mean != null else 1.0
        return Interval(mean, mean, mean, n, null, p, 0.0)
    res = stats.ttest_1samp(x, popmean=null)
    ci = res.confidence_interval(LEVEL)
    return Interval(mean, float(ci.low), float(ci.high), n, null, float(res.pvalue), sd)


def ratio_interval(pairs: Sequence[tuple[float, float]]) -> Interval:
    """The speed-up ``ref / ctrl`` from per-seed summed costs ``(ref, ctrl)``: the t
    interval of log(ref / ctrl) over seeds, exponentiated (1.0 = no speed-up)."""
    logs = [math.log(r / c) for r, c in pairs if r > 0 and c > 0]
    iv = seed_interval(logs, null=0.0)
    e = lambda v: math.exp(v) if math.isfinite(v) else math.nan  # noqa: E731
    return Interval(e(iv.estimate), e(iv.low), e(iv.high), iv.n, 1.0, iv.p, iv.sd, log=True)


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
