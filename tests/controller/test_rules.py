"""The rule-based baselines (aimd, threshold): their moves, their long-run rate, exact resume."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sagc.controller import fixed_group_size, make_group_sizer, parse_sizing
from sagc.controller.rules import AIMDConfig, AIMDRule, ThresholdConfig, ThresholdRule

QUIET = [[10.0, 10.0, 10.0, 10.0]]  # max/median 1
STRAGGLING = [[10.0, 10.0, 10.0, 100.0]]  # max/median 10 > tau


def step(rule, straggler: bool) -> int:
    """One control step; the G it ran at."""
    g = rule.next_group_size()
    rule.observe(STRAGGLING if straggler else QUIET)
    return g


def bernoulli_run(rule, risk: dict[int, float], steps: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A stationary world where a step at G straggles with probability risk[G]."""
    rng = np.random.default_rng(seed)
    sizes, flags = [], []
    for _ in range(steps):
        g = rule.next_group_size()
        flag = bool(rng.random() < risk[g])
        rec = rule.observe(STRAGGLING if flag else QUIET)
        sizes.append(g)
        flags.append(rec.straggler)
    return np.array(sizes), np.array(flags)


def test_aimd_halves_after_each_straggler_down_to_the_smallest():
    rule = AIMDRule(AIMDConfig(initial=16))
    assert [step(rule, True) for _ in range(4)] == [16, 8, 4, 4]


@pytest.mark.parametrize("k", [1, 3, 5])
def test_aimd_climbs_after_k_quiet_steps_and_a_straggler_restarts_the_count(k):
    rule = AIMDRule(AIMDConfig(initial=4, quiet_steps=k))
    assert [step(rule, False) for _ in range(k)] == [4] * k
    assert rule.next_group_size() == 8
    for _ in range(k - 1):
        step(rule, False)
    step(rule, True)  # one short of the climb: down, and the count starts over
    assert rule.next_group_size() == 4
    assert [step(rule, False) for _ in range(k + 1)] == [4] * k + [8]


@pytest.mark.parametrize("delta, k", [(0.1, 7), (0.3, 2), (0.5, 1)])
def test_aimd_default_climb_balances_moves_at_the_budget(delta, k):
    # k quiet steps in a row come before the next straggler half the time at risk delta.
    cfg = AIMDConfig(delta=delta)
    assert cfg.climb_after == k
    assert abs((1 - delta) ** k - 0.5) <= min(abs((1 - delta) ** j - 0.5) for j in range(1, 20))


RISKS = [{4: 0.1, 8: 0.25, 16: 0.5}, {4: 0.15, 8: 0.35, 16: 0.6}, {4: 0.05, 8: 0.2, 16: 0.4}]


@pytest.mark.parametrize("risk", RISKS)
def test_threshold_rate_tracks_delta_on_a_stationary_world(risk):
    # The moving rate is held between delta - margin and delta: the realised rate lands
    # there too, on every seed (3,000 steps: sampling sd of the rate ~0.01).
    cfg = ThresholdConfig(delta=0.3, margin=0.1, ema=0.1)
    for seed in range(5):
        _, flags = bernoulli_run(ThresholdRule(cfg), risk, 3000, seed)
        assert 0.3 - 0.1 - 0.02 <= flags.mean() <= 0.3 + 0.02, (risk, seed, flags.mean())


def test_threshold_sits_at_the_ends_when_the_budget_never_or_always_binds():
    cfg = ThresholdConfig(delta=0.3, margin=0.1)
    for seed in range(3):
        sizes, _ = bernoulli_run(ThresholdRule(cfg), {4: 0.6, 8: 0.8, 16: 0.95}, 500, seed)
        assert np.mean(sizes[50:] == 4) > 0.95
        sizes, _ = bernoulli_run(ThresholdRule(cfg), {4: 0.0, 8: 0.02, 16: 0.05}, 500, seed)
        assert np.mean(sizes[50:] == 16) > 0.95


@pytest.mark.parametrize("name, block", [("aimd", {"quiet_steps": 3}), ("threshold", {"ema": 0.2, "margin": 0.05})])
def test_resume_from_json_state_gives_the_same_sequence(name, block):
    risk = {4: 0.2, 8: 0.4, 16: 0.7}
    ref = make_group_sizer(name, {"tau": 2.0, "delta": 0.3, **block})
    sizes, flags = bernoulli_run(ref, risk, 60, seed=7)

    first = make_group_sizer(name, {"tau": 2.0, "delta": 0.3, **block})
    rng = np.random.default_rng(7)
    got = []
    for t in range(60):
        if t == 23:  # stop, save as JSON, resume in a fresh sizer
            state = json.loads(json.dumps(first.state_dict()))
            first = make_group_sizer(name, {"tau": 2.0, "delta": 0.3, **block})
            first.load_state_dict(state)
        g = first.next_group_size()
        first.observe(STRAGGLING if rng.random() < risk[g] else QUIET)
        got.append(g)
    assert got == sizes.tolist()
    assert first.straggler_rate == pytest.approx(flags.mean())
    assert len(set(got)) > 1  # the sequence moved: the resume had something to get right


@pytest.mark.parametrize(
    "rule, key, bad",
    [
        (AIMDRule(), "quiet", -1),
        (AIMDRule(), "index", 3),
        (ThresholdRule(), "rate", 1.5),
        (ThresholdRule(), "n_stragglers", 99),
    ],
)
def test_a_damaged_state_is_refused_by_key_and_changes_nothing(rule, key, bad):
    step(rule, True)
    before = rule.state_dict()
    state = {**before, key: bad}
    with pytest.raises(ValueError, match=f"{rule.kind} state key '{key}'"):
        rule.load_state_dict(state)
    assert rule.state_dict() == before
    with pytest.raises(ValueError, match="missing"):
        rule.load_state_dict({k: v for k, v in before.items() if k != "index"})
    with pytest.raises(ValueError, match="candidates"):
        rule.load_state_dict({**before, "config": {**before["config"], "candidates": [2, 4]}})


def test_a_state_of_the_other_rule_is_refused():
    with pytest.raises(ValueError, match="'threshold'"):
        ThresholdRule().load_state_dict(AIMDRule().state_dict())


def test_rules_are_controllers_that_read_the_sagc_block():
    config = {
        "sagc": {"candidates": [2, 4, 8], "tau": 2.5, "delta": 0.2, "eta": 4.0},
        "aimd": {"quiet_steps": 4},
        "threshold_variants": {"slow": {"ema": 0.05}},
    }
    for name, cls in (("aimd", AIMDRule), ("threshold", ThresholdRule), ("threshold-slow", ThresholdRule)):
        sizing = parse_sizing(name)
        assert fixed_group_size(name) is None and not sizing.is_fixed
        rule = sizing.build(sizing.cell_block(config), seed=3)
        assert isinstance(rule, cls) and rule.candidates == (2, 4, 8)
        assert (rule.config.tau, rule.config.delta, rule.config.seed) == (2.5, 0.2, 3)
        assert rule.next_group_size() == 4  # the middle candidate
    assert parse_sizing("aimd").build(parse_sizing("aimd").cell_block(config)).config.climb_after == 4
    assert parse_sizing("threshold-slow").build(parse_sizing("threshold-slow").cell_block(config)).config.ema == 0.05


@pytest.mark.parametrize(
    "cls, block, named",
    [
        (AIMDConfig, {"quiet_steps": 0}, "aimd.quiet_steps"),
        (ThresholdConfig, {"ema": 0.0}, "threshold.ema"),
        (ThresholdConfig, {"margin": 1.0}, "threshold.margin"),
        (ThresholdConfig, {"window": 3}, "unknown threshold key"),
        (AIMDConfig, {"eta": -1.0}, "aimd: SAGCConfig.eta"),  # an inherited key is still checked
        (AIMDConfig, {"initial": 32}, "aimd: SAGCConfig.initial"),
    ],
)
def test_bad_config_names_the_key(cls, block, named):
    with pytest.raises(ValueError, match=named):
        cls.from_dict(block)
