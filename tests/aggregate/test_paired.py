"""Seed-level intervals on synthetic runs whose answer is known.

The simulated world has what the grid's runs have: a run-level (seed) effect, steps that
carry over inside a run (AR(1)), and 0/1 straggler flags. Coverage is checked with enough
repetitions for a binomial bound. The t interval over 5 seeds' rate differences (which are
not quite normal) covers ~94.6 % in this world (8 x 2000 repetitions, 94.1-95.3 %), so the
floor sits 3.3 binomial standard errors below 94.5 %: it fails with well under 1 %
probability for any RNG seed. (An interval that pooled the steps as units covers ~60-70 %
here.) The pooled intervals over strata are tested in ``test_pooled.py``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from sagc.aggregate import paired

REPS = 2000
SEEDS = 5
STEPS = 32
SEED_SD = 0.5  # run-level effect on the latent scale: straggler rates differ by seed
PHI = 0.6  # lag-1 correlation of the latent step process inside a run


def _floor(p: float, reps: int = REPS) -> float:
    return p - 3.3 * math.sqrt(p * (1 - p) / reps)


def _flags(rng, c, reps, seeds=SEEDS, steps=STEPS):
    """0/1 flags, shape (reps, seeds, steps): flag = [z_t < c + u], z a unit-variance AR(1)
    per run and u ~ N(0, SEED_SD^2) per run, so E[flag] = Phi(c / sqrt(1 + SEED_SD^2))."""
    z = np.empty((reps, seeds, steps))
    z[..., 0] = rng.normal(size=(reps, seeds))
    for t in range(1, steps):
        z[..., t] = PHI * z[..., t - 1] + math.sqrt(1 - PHI**2) * rng.normal(size=(reps, seeds))
    u = rng.normal(0, SEED_SD, size=(reps, seeds, 1))
    return (z < c + u).astype(float)


def _true_rate(c):
    return float(stats.norm.cdf(c / math.sqrt(1 + SEED_SD**2)))


@pytest.mark.parametrize("rng_seed", [11, 12])
def test_seed_interval_covers_a_straggler_rate_difference(rng_seed):
    """Paired runs (controller vs reference, the same seeds) with seed effects and AR(1)
    steps: the seed-level 95 % interval of the rate difference covers the true one."""
    rng = np.random.default_rng(rng_seed)
    c_ref, c_ctrl = 0.3, -0.4
    truth = _true_rate(c_ctrl) - _true_rate(c_ref)
    ref, ctrl = _flags(rng, c_ref, REPS), _flags(rng, c_ctrl, REPS)
    diffs = ctrl.mean(axis=2) - ref.mean(axis=2)  # one number per seed
    covered = 0
    for rep in range(REPS):
        iv = paired.seed_interval(diffs[rep])
        covered += iv.low <= truth <= iv.high
    assert covered / REPS >= _floor(0.945)


def test_ratio_interval_covers_a_seed_varying_speed_up():
    """Per-seed cost totals with a true geometric-mean speed-up of 1.5 and a seed effect
    on the ratio itself (lognormal, sd 0.15 on the log scale)."""
    rng = np.random.default_rng(5)
    covered = 0
    for _ in range(REPS):
        ref = rng.uniform(2000, 4000, SEEDS)
        ctrl = ref / (1.5 * np.exp(rng.normal(0, 0.15, SEEDS)))
        iv = paired.ratio_interval(list(zip(ref, ctrl)))
        covered += iv.low <= 1.5 <= iv.high
    assert covered / REPS >= _floor(0.95)


def test_minimal_detectable_effect_is_detected_at_the_stated_power():
    """Draw seeds whose true mean difference is exactly the interval's stated detectable
    effect (computed from the true spread): the test rejects in ~80 % of repetitions."""
    rng = np.random.default_rng(7)
    sd = 0.1
    mde = paired.Interval(0.0, -1, 1, SEEDS, sd=sd, se=sd / math.sqrt(SEEDS), df=SEEDS - 1).mde()
    assert 0 < mde < 1
    rejected = sum(paired.seed_interval(rng.normal(mde, sd, SEEDS)).p < 0.05 for _ in range(REPS))
    assert abs(rejected / REPS - paired.POWER) <= 3.3 * math.sqrt(0.8 * 0.2 / REPS)


def test_interval_and_p_against_a_null():
    values = [0.2, 0.25, 0.3, 0.35, 0.4]
    iv = paired.seed_interval(values, null=0.3)
    assert (iv.estimate, iv.n, iv.null) == (pytest.approx(0.3), 5, 0.3)
    assert iv.p == pytest.approx(1.0)  # the mean is the null
    half = stats.t.ppf(0.975, 4) * np.std(values, ddof=1) / math.sqrt(5)
    assert (iv.low, iv.high) == (pytest.approx(0.3 - half), pytest.approx(0.3 + half))


def test_degenerate_inputs():
    assert math.isnan(paired.seed_interval([]).estimate)
    one = paired.seed_interval([3.0])
    assert one.estimate == 3.0 and math.isnan(one.low) and math.isnan(one.p)
    # Every seed the same: a point interval with nothing to test against (p NaN, untestable),
    # whether or not the value is the null.
    same = paired.seed_interval([2.0, 2.0, 2.0])
    assert (same.low, same.high, same.sd) == (2.0, 2.0, 0.0) and math.isnan(same.p) and not same.testable
    assert math.isnan(paired.seed_interval([0.0, 0.0], null=0.0).p)
    assert paired.seed_interval([1.0, float("nan"), 3.0]).n == 2
    assert math.isnan(paired.ratio_interval([(1.0, 0.0)]).estimate)
    assert paired.ratio_interval([(4.0, 2.0), (4.0, 2.0)]).estimate == pytest.approx(2.0)


def test_doc_scores_and_pairing(tmp_path):
    import json

    (tmp_path / "samples_arith_2026.jsonl").write_text(
        json.dumps({"doc_id": 0, "exact_match": 1.0}) + "\n" + json.dumps({"doc_id": 1, "exact_match": 0.5}) + "\n"
    )
    (tmp_path / "samples_bad_2026.jsonl").write_text('{"doc_id": 0}\n')
    assert paired.doc_scores(str(tmp_path), "arith") == {0: 1.0, 1: 0.5}
    with pytest.raises(FileNotFoundError):
        paired.doc_scores(str(tmp_path), "other")
    with pytest.raises(ValueError, match="samples_bad"):
        paired.doc_scores(str(tmp_path), "bad")
    a, b = paired.paired_docs({0: 1.0, 1: 0.0, 2: 1.0}, {1: 1.0, 2: 1.0, 3: 0.0})
    assert a.tolist() == [0.0, 1.0] and b.tolist() == [1.0, 1.0]
