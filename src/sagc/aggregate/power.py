"""Power of the headline's t tests: planned (before a run, from assumed effects and spreads)
and observed (after it, at the planned effect with the spread the seeds showed).

A claim's test is Student's t of an estimate with standard error ``se`` on ``df`` degrees of
freedom (``sagc.aggregate.paired``), two-sided at level ``alpha``, and *holds* only on the
claimed side. Its power at a true distance d from the null, counted on the claimed side, is
the noncentral t's tail beyond the critical value::

    power = P(T' > t_{1 - alpha/2, df}),   T' ~ noncentral t(df, d / se)

(``scipy.stats.nct``; the far tail, a rejection on the wrong side, does not make a claim
hold and is not counted). For a design of K strata with n_k seeds each and a per-seed spread
sd, the pooled estimate has ``se = sd * sqrt(sum_k 1/n_k) / K`` and ``df = sum_k (n_k - 1)``
(``design``). A family of m claims under Holm is powered conservatively at ``alpha / m``,
the first Holm step (each claim's power is at least that).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from scipy import optimize, stats


def design(seeds_per_stratum: Sequence[int]) -> tuple[float, int]:
    """``(se / sd, df)`` of the pooled estimate over strata with these seed counts."""
    ns = [int(n) for n in seeds_per_stratum if n > 0]
    if not ns:
        return math.nan, 0
    return math.sqrt(sum(1 / n for n in ns)) / len(ns), sum(n - 1 for n in ns)


def power_at(distance: float, se: float, df: float, alpha: float) -> float:
    """Power of the two-sided level-``alpha`` t test to hold when the truth lies ``distance``
    from the null on the claimed side (negative: on the other side)."""
    if not (math.isfinite(distance) and math.isfinite(se) and se > 0 and df >= 1):
        return math.nan
    crit = stats.t.ppf(1 - alpha / 2, df)
    return float(stats.nct.sf(crit, df, distance / se))


def detectable_distance(se: float, df: float, alpha: float, power: float) -> float:
    """The smallest distance from the null on the claimed side that the test detects with
    ``power`` (NaN without a standard error or degrees of freedom)."""
    if not (math.isfinite(se) and se > 0 and math.isfinite(df) and df >= 1):
        return math.nan
    crit = stats.t.ppf(1 - alpha / 2, df)
    ncp = optimize.brentq(lambda d: stats.nct.sf(crit, df, d) - power, 0.0, 100.0)
    return float(ncp * se)


def planned_power(distance: float, sd: float, seeds_per_stratum: Sequence[int], alpha: float) -> float:
    """Power of a pooled claim at ``distance`` for a per-seed spread ``sd`` and a design."""
    factor, df = design(seeds_per_stratum)
    return power_at(distance, sd * factor, df, alpha)
