"""Behaviour of the SAGC controller in synthetic environments with known straggler risks."""

import json
import math
import warnings
from collections import Counter

import numpy as np
import pytest

from sagc import FixedGroupSize, SAGCConfig, SAGCController
from sagc.controller import make_group_sizer, summarize


def bernoulli_step(rng, group_size, risk, prompts=2):
    """Lengths of one step that straggles (max/median = 10 > tau) with probability ``risk``."""
    lengths = [[10.0] * group_size for _ in range(prompts)]
    if rng.random() < risk:
        lengths[0][0] = 100.0
    return lengths


def run(ctrl, risks, steps, seed=0, change=None):
    """Drive ``ctrl`` for ``steps``; ``change=(t, new_risks)`` swaps the environment at step t."""
    rng = np.random.default_rng(seed)
    gs, records = [], []
    for t in range(steps):
        if change is not None and t == change[0]:
            risks = change[1]
        g = ctrl.next_group_size()
        gs.append(g)
        records.append(ctrl.observe(bernoulli_step(rng, g, risks[g])))
    return gs, records


RISKS = {4: 0.05, 8: 0.2, 16: 0.9}


def test_long_run_rate_respects_budget_and_settles_on_largest_feasible_g():
    ctrl = SAGCController(SAGCConfig(delta=0.3, seed=3))
    gs, records = run(ctrl, RISKS, 3000)
    tail = records[1000:]
    rate = np.mean([r.straggler for r in tail])
    assert rate <= 0.3 + 0.05
    # G=8 is the largest size whose risk (0.2) is under the budget (0.3).
    assert Counter(gs[1000:]).most_common(1)[0][0] == 8
    assert ctrl.posterior_mean()[16] > ctrl.posterior_mean()[4]


def test_generous_budget_settles_on_largest_g():
    ctrl = SAGCController(SAGCConfig(delta=0.95, seed=1))
    gs, _ = run(ctrl, RISKS, 1000)
    assert np.mean(np.asarray(gs[200:]) == 16) > 0.95


@pytest.mark.parametrize("seed", range(8))
def test_moves_off_large_g_when_it_turns_risky(seed):
    """When G=16 turns risky it leaves 16 at once, and its straggler rate returns to the budget.

    The controller promises the rate, not a share of G: with p(16) = 0.95 and p(8) = 0.02 a
    rate of delta = 0.3 means G=16 in about 30 % of steps, so the share of 16 is no test."""
    safe = {4: 0.02, 8: 0.02, 16: 0.02}
    risky = {4: 0.02, 8: 0.02, 16: 0.95}
    ctrl = SAGCController(SAGCConfig(delta=0.3, seed=seed))
    gs, records = run(ctrl, safe, 1500, seed=seed, change=(1000, risky))
    assert all(g == 16 for g in gs[900:1000]), "with no risk anywhere it should sit at G=16"
    after = gs[1000:]
    # The posterior must learn p(16) and lambda climb by eta * (1 - delta) a straggling step:
    # 6-22 steps over 100 seeds; 30 leaves room without allowing a stuck controller.
    first_move = next(i for i, g in enumerate(after) if g != 16)
    assert first_move <= 30
    # Over the last 400 steps the rate is the budget's, within a tolerance (the rate of 400
    # Bernoulli steps at 0.3 alone has sd 0.023).
    rate = np.mean([r.straggler for r in records[1100:]])
    assert abs(rate - 0.3) <= 0.08, rate


def test_forgetting_lets_a_stale_estimate_recover():
    """A candidate that was risky long ago must become eligible again once it is safe."""
    early = {4: 0.02, 8: 0.02, 16: 0.95}
    later = {4: 0.02, 8: 0.02, 16: 0.02}
    with_forgetting = SAGCController(SAGCConfig(delta=0.3, forgetting=0.95, seed=2))
    gs, _ = run(with_forgetting, early, 1500, change=(500, later))
    assert np.mean(np.asarray(gs[1000:]) == 16) > 0.8


@pytest.mark.parametrize("radius", [1, 2])
def test_local_search_never_skips_a_neighbour(radius):
    cands = (2, 4, 8, 16, 32, 64)
    ctrl = SAGCController(SAGCConfig(candidates=cands, radius=radius, delta=0.2, seed=7))
    risks = {2: 0.0, 4: 0.1, 8: 0.2, 16: 0.4, 32: 0.7, 64: 0.95}
    gs, _ = run(ctrl, risks, 2000, change=(1000, {g: 0.0 for g in cands}))
    idx = [cands.index(g) for g in gs]
    jumps = np.abs(np.diff(idx))
    assert jumps.max() <= radius
    assert len(set(gs)) >= 3, "the controller should actually move around"


@pytest.mark.parametrize("k", [0, 1, 17, 250])
def test_exact_resume_through_json(k):
    cfg = SAGCConfig(delta=0.3, seed=11)
    full = SAGCController(cfg)
    gs_full, _ = run(full, RISKS, 400, seed=4)

    first = SAGCController(cfg)
    rng = np.random.default_rng(4)
    gs = []
    for _ in range(k):
        g = first.next_group_size()
        gs.append(g)
        first.observe(bernoulli_step(rng, g, RISKS[g]))
    state = json.loads(json.dumps(first.state_dict()))
    resumed = SAGCController(cfg)
    resumed.load_state_dict(state)
    for _ in range(400 - k):
        g = resumed.next_group_size()
        gs.append(g)
        resumed.observe(bernoulli_step(rng, g, RISKS[g]))
    assert gs == gs_full
    assert resumed.lambda_ == full.lambda_
    assert resumed.straggler_rate == full.straggler_rate


def test_same_seed_same_trajectory_other_seed_differs():
    a, _ = run(SAGCController(SAGCConfig(seed=0)), RISKS, 300)
    b, _ = run(SAGCController(SAGCConfig(seed=0)), RISKS, 300)
    c, _ = run(SAGCController(SAGCConfig(seed=1)), RISKS, 300)
    assert a == b
    assert a != c


def test_record_holds_what_a_plot_needs():
    ctrl = SAGCController(SAGCConfig(seed=0))
    assert ctrl.next_group_size() == 8, "the first rollout uses the middle candidate"
    first = ctrl.observe([[10] * 8])
    assert first.sampled_risk == {} and not first.straggler
    g = ctrl.next_group_size()
    assert g == 16, "no straggler and lambda = 0: the largest eligible size wins"
    rec = ctrl.observe([[10, 20, 30, 100] + [10] * (g - 4), [10] * g])
    assert rec.step == 2 and rec.group_size == 16
    assert rec.n_groups == 2 and rec.n_rollouts == 32
    assert rec.length_max == 100 and rec.length_median == 10
    assert rec.ratio == pytest.approx(10.0)
    assert rec.straggler is True and rec.straggler_rate == 0.5
    assert rec.lambda_ == pytest.approx(0.5 * (1 - 0.3))  # max(0, 0 - 0.5*0.3) = 0, then +0.35
    assert set(rec.posterior_mean) == {4, 8, 16}
    assert set(rec.sampled_risk) == set(rec.scores) == {4, 8, 16}  # eligible from G=8
    for g_, p in rec.sampled_risk.items():
        assert rec.scores[g_] == pytest.approx(math.log2(g_) - 0.0 * p)
    # the observed candidate's posterior moved toward "risky", the unseen one sits at the prior
    assert rec.posterior_mean[16] > 0.5 and rec.posterior_mean[4] == pytest.approx(0.5)
    assert rec.posterior_mean[8] < 0.5
    json.dumps(rec.to_dict())


def test_true_median_is_used():
    ctrl = FixedGroupSize(4, tau=2.0)
    # lower-middle median (torch.median) would be 2 -> ratio 3 > tau; the true median 2.5 -> 2.4
    rec = ctrl.observe([[1, 2, 3, 6]])
    assert rec.length_median == 2.5
    assert rec.ratio == pytest.approx(2.4)


def test_group_scope_catches_a_straggler_hidden_in_the_step():
    lengths = [[10, 10, 30], [30, 30, 30, 30, 30]]
    step = FixedGroupSize(4, scope="step").observe(lengths)
    group = FixedGroupSize(4, scope="group").observe(lengths)
    assert not step.straggler and step.ratio == pytest.approx(1.0)
    assert group.straggler and group.ratio == pytest.approx(3.0)


def _measurement_batches() -> list:
    """Length batches (grouped by prompt) covering what the straggler test must get right."""
    rng = np.random.default_rng(0)
    cap = 24  # a length cap: truncated rows sit exactly at it
    batches = [
        [[10, 10, 10, 10], [10, 10, 10, 20]],  # max/median exactly 2.0: a tie with tau = 2
        [[10, 10, 10, 10], [10, 10, 10, 21]],  # just over tau = 2
        [[10, 10, 10, 30]],  # max/median exactly 3.0: a tie with tau = 3
        [[1, 2, 3, 6]],  # even count: true median 2.5 (ratio 2.4), lower middle 2 (ratio 3)
        [[5, 5, 5, 5], [5, 5, 5, 5]],  # all lengths tied
        [[7], [7], [30]],  # one-row groups: each group's ratio is 1, the step's is 30/7
        [[12], [3, 3, 40]],  # a one-row group next to a straggling group
        [[10, 10, 30], [30, 30, 30, 30, 30]],  # a straggler hidden in the step (group scope sees it)
        [[cap, 3, 4, cap], [2, cap, cap, cap]],  # truncated-like rows at the cap, majority long
        [[cap, 2, 3, 2], [3, 2, 2, 2]],  # one truncated row over short ones
        [[0, 0, 0, 0]],  # empty completions: median floored at one token
        [[0, 0, 0, 5]],
        [[3.0, 4.0], [], [9.0, 8.0]],  # an empty group among others
        np.array([[4.0, 5.0, 6.0, 30.0], [5.0, 5.0, 5.0, 5.0]]),  # a 2-D array
    ]
    for _ in range(25):  # long-tailed lengths, some capped
        x = np.minimum(np.round(rng.lognormal(2.3, 0.7, size=(3, 8))), cap)
        batches.append(x.tolist())
    return batches


MEASURED = ("step", "group_size", "n_groups", "n_rollouts", "length_max", "length_median",
            "length_mean", "ratio", "straggler", "straggler_rate", "skipped")  # fmt: skip


@pytest.mark.parametrize("scope", ["step", "group"])
@pytest.mark.parametrize("tau", [2.0, 3.0])
def test_fixed_group_size_measures_like_sagc(scope, tau):
    """FixedGroupSize reports every step's measurement exactly as SAGCController does."""
    batches = _measurement_batches()
    fixed = FixedGroupSize(8, tau=tau, scope=scope)
    # One candidate: SAGC's G is 8 at every step, so only the measurement can differ.
    sagc = SAGCController(SAGCConfig(candidates=(8,), tau=tau, scope=scope, seed=0))
    flags = []
    for lengths in batches:
        assert fixed.next_group_size() == sagc.next_group_size() == 8
        a, b = fixed.observe(lengths), sagc.observe(lengths)
        assert {k: getattr(a, k) for k in MEASURED} == {k: getattr(b, k) for k in MEASURED}, lengths
        flags.append(a.straggler)
    # A skipped step (no lengths) is skipped by both, and counts for neither.
    with pytest.warns(RuntimeWarning):
        a, b = fixed.observe([[], []]), sagc.observe([[], []])
    assert a.skipped and b.skipped and (a.step, a.straggler_rate) == (b.step, b.straggler_rate)
    assert a.step == len(batches)
    # The batches exercise both outcomes of the straggler test under this tau and scope.
    assert True in flags and False in flags
    assert a.straggler_rate == sagc.straggler_rate == sum(flags) / len(batches)


def test_measurement_batches_tell_the_scopes_and_taus_apart():
    """The comparison above is not vacuous: scope and tau change some verdicts and ratios."""

    def verdicts(**kw):
        ctrl = FixedGroupSize(8, **kw)
        return [(r.straggler, r.ratio) for r in map(ctrl.observe, _measurement_batches())]

    step, group = verdicts(scope="step"), verdicts(scope="group")
    assert [s for s, _ in step] != [s for s, _ in group]
    assert [s for s, _ in verdicts(tau=2.0)] != [s for s, _ in verdicts(tau=3.0)]


def test_fixed_group_size_state_round_trips():
    fixed = FixedGroupSize(8)
    for lengths in _measurement_batches():
        fixed.observe(lengths)
    other = FixedGroupSize(8)
    other.load_state_dict(json.loads(json.dumps(fixed.state_dict())))
    assert other.state_dict() == fixed.state_dict()
    # The restored counts carry on: the next step's rate is the same in both.
    assert other.observe([[1, 1, 1, 9]]).straggler_rate == fixed.observe([[1, 1, 1, 9]]).straggler_rate
    with pytest.raises(ValueError, match="FixedGroupSize\\(8\\)"):
        FixedGroupSize(16).load_state_dict(fixed.state_dict())


def test_make_group_sizer():
    assert isinstance(make_group_sizer("g16"), FixedGroupSize)
    assert make_group_sizer("g16").max_group_size == 16
    sagc = make_group_sizer("sagc", {"candidates": [4, 8], "tau": 3.0}, seed=9)
    assert isinstance(sagc, SAGCController) and sagc.config.seed == 9 and sagc.config.tau == 3.0
    assert make_group_sizer("g4", {"tau": 3.0})._counter.tau == 3.0
    with pytest.raises(ValueError, match="unknown sizing 'big'"):
        make_group_sizer("big")
    with pytest.raises(ValueError, match="unknown SAGCConfig key.*'tua'"):
        make_group_sizer("sagc", {"tua": 2.0})


@pytest.mark.parametrize(
    "kwargs, key",
    [
        ({"tau": 1.0}, "tau"),
        ({"tau": 0.5}, "tau"),
        ({"tau": float("nan")}, "tau"),
        ({"delta": 0.0}, "delta"),
        ({"delta": 1.0}, "delta"),
        ({"eta": 0.0}, "eta"),
        ({"eta": -1}, "eta"),
        ({"forgetting": 0.0}, "forgetting"),
        ({"forgetting": 1.5}, "forgetting"),
        ({"candidates": (4, 8, 8)}, "candidates"),
        ({"candidates": (0, 8)}, "candidates"),
        ({"candidates": (-4, 8)}, "candidates"),
        ({"candidates": (1, 8)}, "candidates"),
        ({"candidates": ()}, "candidates"),
        ({"candidates": (4.5, 8)}, "candidates"),
        ({"initial": 12}, "initial"),
        ({"prior": ()}, "prior"),
        ({"prior": None}, "prior"),
        ({"prior": (1.0, 0.0)}, "prior"),
        ({"radius": 0}, "radius"),
        ({"scope": "batch"}, "scope"),
        ({"lambda_max": 0}, "lambda_max"),
    ],
)
def test_bad_config_names_the_key(kwargs, key):
    with pytest.raises(ValueError, match=f"SAGCConfig.{key}"):
        SAGCConfig(**kwargs)


def test_observe_edge_cases_never_corrupt_the_state():
    ctrl = SAGCController(SAGCConfig(seed=0))
    ctrl.next_group_size()
    before = json.dumps(ctrl.state_dict())

    with pytest.warns(RuntimeWarning, match="without any completion length"):
        rec = ctrl.observe([])
    assert rec.skipped and json.dumps(ctrl.state_dict()) == before
    with pytest.warns(RuntimeWarning):
        assert ctrl.observe([[], []]).skipped

    for bad, msg in [
        ([[1.0, float("nan")]], "NaN"),
        ([[1.0, float("inf")]], "NaN or infinity"),
        ([[1.0, -3.0]], "negative"),
        ([1.0, 2.0], "grouped by prompt"),
    ]:
        with pytest.raises(ValueError, match=msg):
            ctrl.observe(bad)
        assert json.dumps(ctrl.state_dict()) == before

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        one = ctrl.observe([[7]])  # a group with a single completion: ratio 1, no straggler
        assert one.ratio == 1.0 and not one.straggler
        zeros = ctrl.observe([[0, 0, 0, 0]])  # empty completions: median floored at one token
        assert zeros.ratio == 0.0 and not zeros.straggler
        mostly_empty = ctrl.observe([[0, 0, 0, 5]])
        assert mostly_empty.ratio == 5.0 and mostly_empty.straggler
    assert math.isfinite(ctrl.lambda_)


def test_summarize():
    ctrl = FixedGroupSize(4)
    recs = [ctrl.observe([[1, 1, 1, 9]]), ctrl.observe([[1, 1, 1, 1]])]
    s = summarize(recs)
    assert s == {"steps": 2, "straggler_rate": 0.5, "mean_group_size": 4.0}
