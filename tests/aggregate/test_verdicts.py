"""Verdict logic on synthetic claims whose answer is known: holds, fails, inconclusive,
untestable, non-inferiority at and near the margin, Holm, gatekeeping and the best static G."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest

from sagc.aggregate import paired, verdicts
from sagc.aggregate.verdicts import FAILS, HOLDS, INCONCLUSIVE, NOT_TESTED, UNTESTABLE, Claim

ALPHA = 0.05
MARGIN = 0.05


def _values(mean: float, half: float, n: int = 5) -> np.ndarray:
    """n per-seed values with the given mean whose 95 % t interval has half-width ``half``."""
    base = np.array([-2.0, -1.0, 0.0, 1.0, 2.0][:n]) if n == 5 else np.linspace(-1, 1, n)
    base = base / base.std(ddof=1)
    sd = half / (paired.stats.t.ppf(0.975, n - 1) / math.sqrt(n))
    return mean + sd * base


def _claim(values, null=0.0, side="below", name="c") -> Claim:
    return Claim("m", "grpo", "sagc", "g16", name, side, paired.seed_interval(values, null=null), "")


def test_interval_helper_builds_the_interval_it_says():
    iv = paired.seed_interval(_values(-0.03, 0.02), null=-0.05)
    assert (iv.low, iv.high) == (pytest.approx(-0.05), pytest.approx(-0.01))


@pytest.mark.parametrize("mean, half, side, expected", [
    (-0.20, 0.10, "below", HOLDS),          # wholly below 0: fewer stragglers
    (-0.20, 0.30, "below", INCONCLUSIVE),   # spans 0
    (0.20, 0.10, "below", FAILS),           # wholly above 0: more stragglers
    (0.20, 0.10, "above", HOLDS),
    (-0.20, 0.10, "above", FAILS),
])  # fmt: skip
def test_difference_verdicts_unadjusted(mean, half, side, expected):
    c = _claim(_values(mean, half), side=side)
    assert verdicts.decide(c.interval, side, c.interval.p, ALPHA) == expected


@pytest.mark.parametrize("mean, half, expected", [
    (-0.030, 0.0190, HOLDS),         # [-0.049, -0.011]: lower end above -margin
    (-0.030, 0.0210, INCONCLUSIVE),  # [-0.051, -0.009]: just reaches past -margin
    (-0.035, 0.0320, INCONCLUSIVE),  # the old "-3.5 [-6.7, -0.4]" that used to read "fails"
    (-0.080, 0.0290, FAILS),         # [-0.109, -0.051]: wholly below -margin
    (-0.080, 0.0310, INCONCLUSIVE),  # [-0.111, -0.049]: touches the margin band
    (-0.040, 0.0090, HOLDS),         # [-0.049, -0.031]: worse than 0 but inside the margin
])  # fmt: skip
def test_not_worse_verdicts_at_and_near_the_margin(mean, half, expected):
    c = _claim(_values(mean, half), null=-MARGIN, side="above")
    assert verdicts.decide(c.interval, "above", c.interval.p, ALPHA) == expected


def test_holm_adjusts_the_family_and_verdicts_follow():
    # Per-seed values chosen for their unadjusted p-values; Holm by hand:
    # sorted p  p1 < p2 < p3 < p4, adjusted max-cumulative of (4 p1, 3 p2, 2 p3, 1 p4).
    claims = [_claim(_values(-m, h), name=n) for m, h, n in
              [(0.2, 0.05, "a"), (0.2, 0.17, "b"), (0.2, 0.19, "c"), (0.2, 0.4, "d")]]  # fmt: skip
    raw = [c.interval.p for c in claims]
    order = np.argsort(raw)
    expected = np.empty(4)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, (4 - rank) * raw[i])
        expected[i] = min(1.0, running)
    out = verdicts.holm(claims, ALPHA)
    assert [c.p_holm for c in out] == pytest.approx(list(expected))
    # b and c are significant alone (p < 0.05) ...
    assert raw[1] < 0.05 and raw[2] < 0.05
    # ... and not after the family's correction, where their adjusted p exceeds 0.05.
    for c, p in zip(out, expected):
        assert c.verdict == (HOLDS if p < 0.05 else INCONCLUSIVE)
    assert [c.verdict for c in out][0] == HOLDS and expected[1] > 0.05
    # The family states the detectable effect at the first Holm step (alpha / 4): larger than at 5 %.
    assert verdicts.family(claims, ALPHA)[0].mde > claims[0].interval.mde()


def test_holm_adjusted_matches_statsmodels():
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(0)
    for m in (1, 2, 4, 9):
        p = rng.uniform(0, 0.2, m)
        p[0] = p[-1]  # ties keep their order
        assert verdicts.holm_adjusted(p) == pytest.approx(multipletests(p, method="holm")[1])


def test_a_lone_claim_is_not_adjusted():
    (c,) = verdicts.holm([_claim(_values(-0.2, 0.17))], ALPHA)
    assert c.p_holm == pytest.approx(c.interval.p) and c.verdict == HOLDS


def test_untestable_claims_stay_out_of_the_family():
    one_seed = _claim([0.5])
    strong = _claim(_values(-0.2, 0.05))
    out = verdicts.holm([one_seed, strong], ALPHA)
    assert out[0].verdict == UNTESTABLE and math.isnan(out[0].p_holm)
    assert out[1].p_holm == pytest.approx(strong.interval.p)  # a family of one tested claim


def test_ties_are_untestable_however_far_from_the_null():
    """Every seed gave the same value: no spread to test against, so no verdict, even a
    value far on the claimed side (per-seed values are discrete, ties happen)."""
    tied = verdicts.holm([_claim([-0.5, -0.5, -0.5, -0.5, -0.5])], ALPHA)[0]
    assert tied.verdict == UNTESTABLE and math.isnan(tied.interval.p)
    assert tied.interval.estimate == -0.5


def test_a_secondary_family_is_tested_only_when_its_gate_holds():
    family = [_claim(_values(-0.2, 0.05), name="a"), _claim(_values(-0.2, 0.4), name="b")]
    gate = replace(_claim(_values(-0.2, 0.05)), id="P1")
    open_ = verdicts.gated(family, replace(gate, verdict=HOLDS), ALPHA)
    assert [c.verdict for c in open_] == [HOLDS, INCONCLUSIVE]
    assert [c.p_holm for c in open_] == [c.p_holm for c in verdicts.holm(family, ALPHA)]
    closed = verdicts.gated(family, replace(gate, verdict=INCONCLUSIVE), ALPHA)
    assert [c.verdict for c in closed] == [NOT_TESTED, NOT_TESTED]
    assert all(math.isnan(c.p_holm) and c.gate == "gate: P1 did not hold" for c in closed)
    assert [c.interval for c in closed] == [c.interval for c in family]  # still shown


def test_a_claim_survives_its_csv_row(tmp_path):
    import pandas as pd

    c = verdicts.holm([_claim(_values(-0.2, 0.05))], ALPHA)[0]
    c = replace(c, family="primary", id="P1", power_planned=0.8)
    verdicts.headline_frame([c]).to_csv(tmp_path / "h.csv", index=False)
    rows = pd.read_csv(tmp_path / "h.csv")
    back = Claim.from_row(next(rows.itertuples()))
    pd.testing.assert_frame_equal(verdicts.headline_frame([back]), verdicts.headline_frame([c]), check_dtype=False)
    assert back.line() == c.line()


def test_bad_side_is_refused():
    with pytest.raises(ValueError, match="side"):
        verdicts.decide(paired.seed_interval([1.0, 2.0]), "less", 0.0, ALPHA)


@pytest.mark.parametrize("rates, expected", [
    ({4: 0.2, 8: 0.28, 16: 0.45}, "g8"),
    ({4: 0.2, 8: 0.31, 16: 0.45}, "g4"),
    ({4: 0.35, 8: 0.4, 16: 0.5}, "g4"),     # none meets the budget: the smallest
    ({4: 0.1, 8: 0.2, 16: 0.3}, "g16"),     # at the budget counts as meeting it
    ({8: 0.2}, "g8"),                       # only measured sizes are eligible
])  # fmt: skip
def test_best_static_is_the_largest_fixed_g_under_the_budget(rates, expected):
    assert verdicts.best_static(["g4", "g8", "g16", "sagc"], rates, 0.3) == expected


def test_best_static_reads_the_world_report(tmp_path):
    report = tmp_path / "stragglers.json"
    report.write_text(
        json.dumps(
            {"per_group_size": [{"group_size": 4, "straggler_rate": 0.2}, {"group_size": 16, "straggler_rate": 0.5}]}
        )
    )
    assert verdicts.base_straggler_rates(report) == {4: 0.2, 16: 0.5}
    report.write_text(json.dumps({"per_group_size": [{"group": 4}]}))
    with pytest.raises(ValueError, match="stragglers.json"):
        verdicts.base_straggler_rates(report)
