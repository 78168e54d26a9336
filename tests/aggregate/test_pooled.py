"""The pooled primary claims: the stratified paired t against an independent fit, its
coverage, and the family's error rate under a simulated null (the negative control) and
its power under a true effect.

The simulated worlds have what the default grid's per-seed values have: 4 strata (model x
algorithm) x 5 seeds, unequal spreads per stratum (of the sizes the reference run showed),
and discrete values (a straggler-rate difference over 32 steps is a multiple of 1/32, an
accuracy over 64 problems x 4 samples of 1/256), so ties happen. Error rates are checked
with binomial bounds that fail with well under 1 % probability for any RNG seed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from sagc.aggregate import paired, verdicts
from sagc.aggregate.paired import planned_power
from sagc.aggregate.registration import PRIMARIES, Registration
from sagc.aggregate.verdicts import HOLDS, POOLED, Claim

REPS = 2000
SEEDS = 5
REG = Registration()
#: Per primary: per-stratum sd of the per-seed values, and the grid each value falls on.
SPREADS = {
    "P1": ([0.04, 0.13, 0.08, 0.15], 1 / 32),
    "P2": ([0.10, 0.17, 0.09, 0.11], None),
    "P3": ([0.05, 0.04, 0.05, 0.03], 1 / 256),
    "P4": ([0.02, 0.04, 0.06, 0.05], 1 / 256),
}


def _draw(rng, mean: float, sds, step, seeds=SEEDS) -> list[np.ndarray]:
    values = [mean + rng.normal(0, sd, seeds) for sd in sds]
    return [np.round(v / step) * step if step else v for v in values]


def _family(rng, truth: dict[str, float], spreads=SPREADS) -> list[Claim]:
    """One draw of the primary family, tested as the headline tests it (pooled, Holm)."""
    claims = []
    for p in PRIMARIES:
        sds, step = spreads[p.id]
        iv = paired.pooled_interval(_draw(rng, truth[p.id], sds, step), null=p.null(REG))
        claims.append(Claim(POOLED, POOLED, "sagc", "g16", p.id, p.side, iv, "", id=p.id))
    return verdicts.holm(claims, REG.alpha)


def test_pooled_interval_is_the_stratum_means_contrast_of_least_squares():
    """The formula against statsmodels: OLS with one mean per stratum, the contrast
    "mean of the stratum means" (unequal seeds per stratum)."""
    import statsmodels.api as sm

    rng = np.random.default_rng(1)
    strata = [rng.normal(m, 0.1, n) for m, n in ((0.1, 5), (-0.05, 3), (0.2, 4))]
    x = np.concatenate(strata)
    design = np.zeros((x.size, len(strata)))
    row = 0
    for k, s in enumerate(strata):
        design[row : row + s.size, k] = 1
        row += s.size
    fit = sm.OLS(x, design).fit()
    test = fit.t_test(np.full((1, len(strata)), 1 / len(strata)), use_t=True)
    low, high = test.conf_int(alpha=0.05)[0]
    iv = paired.pooled_interval(strata, null=0.0)
    assert iv.estimate == pytest.approx(float(test.effect[0]))
    assert iv.se == pytest.approx(float(test.sd[0, 0]))
    assert iv.df == fit.df_resid == 9
    assert iv.p == pytest.approx(float(test.pvalue))
    assert (iv.low, iv.high) == (pytest.approx(low), pytest.approx(high))
    assert (iv.n, iv.strata) == (12, 3)


def test_one_stratum_is_the_one_sample_t():
    values = [0.1, 0.3, 0.2, 0.05, 0.25]
    pooled, single = paired.pooled_interval([values], null=0.02), paired.seed_interval(values, null=0.02)
    for field in ("estimate", "low", "high", "p", "sd", "se", "df"):
        assert getattr(pooled, field) == pytest.approx(getattr(single, field)), field


def test_no_spread_or_no_df_is_untestable():
    tied = paired.pooled_interval([[0.25, 0.25], [-0.5, -0.5]])
    assert tied.estimate == pytest.approx(-0.125) and math.isnan(tied.p) and not tied.testable
    one_each = paired.pooled_interval([[0.1], [0.3]])
    assert one_each.df != one_each.df or one_each.df == 0  # NaN or 0: no degrees of freedom
    assert one_each.estimate == pytest.approx(0.2) and not one_each.testable
    # A stratum of one seed adds its mean, not a degree of freedom.
    mixed = paired.pooled_interval([[0.1, 0.3], [0.5]])
    assert (mixed.estimate, mixed.df) == (pytest.approx(0.35), 1)
    assert paired.pooled_interval([[], [float("nan")]]).n == 0


def test_pooled_interval_covers_the_mean_of_unequal_stratum_effects():
    rng = np.random.default_rng(2)
    effects, sds = np.array([-0.15, -0.02, -0.10, 0.0]), SPREADS["P1"][0]
    truth = effects.mean()
    covered = 0
    for _ in range(REPS):
        iv = paired.pooled_interval([e + rng.normal(0, sd, SEEDS) for e, sd in zip(effects, sds)])
        covered += iv.low <= truth <= iv.high
    # ~94 % with unequal spreads (the pooled sd is their average); floor 3.3 binomial se below 94 %.
    assert covered / REPS >= 0.94 - 3.3 * math.sqrt(0.94 * 0.06 / REPS)


def test_negative_control_the_family_holds_falsely_at_most_alpha():
    """Every primary at its null (no straggler difference, no speed-up, accuracy exactly the
    margin worse): a family in which any claim holds is a false discovery. Its rate over
    REPS draws must not exceed alpha (one-sided binomial test at 1 %)."""
    rng = np.random.default_rng(3)
    truth = {p.id: p.null(REG) for p in PRIMARIES}
    false = sum(any(c.verdict == HOLDS for c in _family(rng, truth)) for _ in range(REPS))
    test = stats.binomtest(false, REPS, REG.alpha, alternative="greater")
    assert test.pvalue > 0.01, f"{false} of {REPS} null families had a claim that holds"


def test_with_a_true_effect_the_family_holds_at_its_planned_power():
    """Effects at which each primary's planned power (``sagc.aggregate.paired``, at alpha / 4)
    is ~0.9, equal spreads: each primary holds at least that often (Holm's later steps only
    add power), and the whole family holds in most draws."""
    rng = np.random.default_rng(4)
    sd = 0.08
    equal = {k: ([sd] * 4, None) for k in SPREADS}
    distance = 0.9 * sd
    truth = {p.id: p.null(REG) + (distance if p.side == "above" else -distance) for p in PRIMARIES}
    planned = planned_power(distance, sd, [SEEDS] * 4, REG.alpha / len(PRIMARIES))
    assert 0.85 < planned < 0.95
    held = np.array([[c.verdict == HOLDS for c in _family(rng, truth, equal)] for _ in range(REPS)])
    floor = planned - 3.3 * math.sqrt(planned * (1 - planned) / REPS)
    assert (held.mean(axis=0) >= floor).all(), held.mean(axis=0)
    assert held.all(axis=1).mean() > 0.5
