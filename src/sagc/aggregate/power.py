"""Power of the headline's t tests: planned (assumed effect and spread, before a run) and
observed (the planned effect against the spread the seeds showed).

The formula: docs/aggregation.md, "Power".
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
