"""The two options beyond the paper: sub-group (counterfactual) observations and
constrained selection; their config errors and their exact JSON resume."""

import json

import pytest

from sagc import SAGCConfig, SAGCController
from sagc.lengths import as_groups, subgroup_ratios

from .test_default_pin import world_lengths

# Two prompts, G = 16. Sub-steps of size 4 are columns 4k..4k+3 of both prompts:
#   k=0: max 100, median 10 -> 10 (straggler)      k=1: all 10 -> 1
#   k=2: max 100, median 50 -> 2.0 (not > tau=2)   k=3: max 30, median 10 -> 3 (straggler)
# Sub-steps of size 8: k=0 holds the 100 among 10s -> 10 (straggler); k=1: sorted
#   10 x7, 30, 50 x7, 100 -> median (30 + 50) / 2 = 40, max 100 -> 2.5 (straggler).
HAND = [
    [10, 10, 10, 100, 10, 10, 10, 10, 50, 50, 50, 100, 10, 10, 10, 30],
    [10, 10, 10, 10, 10, 10, 10, 10, 50, 50, 50, 50, 10, 10, 10, 10],
]


def test_subgroup_ratios_on_hand_built_lengths():
    groups = as_groups(HAND)
    assert subgroup_ratios(groups, 4, "step").tolist() == [10.0, 1.0, 2.0, 3.0]
    assert subgroup_ratios(groups, 8, "step").tolist() == [10.0, 2.5]
    # group scope: the worst prompt of each sub-step; k=1 of size 8 is prompt 0's
    # [50, 50, 50, 100, 10, 10, 10, 30] -> median 40 -> 2.5
    assert subgroup_ratios(groups, 4, "group").tolist() == [10.0, 1.0, 2.0, 3.0]
    assert subgroup_ratios(groups, 8, "group").tolist() == [10.0, 2.5]
    assert subgroup_ratios(groups, 16, "step").tolist() == [10.0]
    assert subgroup_ratios(groups, 32, "step").size == 0


def test_counterfactual_gives_every_smaller_size_its_subgroup_fraction():
    ctrl = SAGCController(SAGCConfig(initial=16, counterfactual=True, tau=2.0, seed=0))
    assert ctrl.next_group_size() == 16
    rec = ctrl.observe(HAND)
    assert rec.straggler
    assert rec.subgroup_risk == {4: 0.5, 8: 1.0}
    # prior (1, 1) decays to itself; then 16 gets the step, 8 and 4 their fractions
    assert ctrl.alpha == [1.5, 2.0, 2.0]
    assert ctrl.beta == [1.5, 1.0, 1.0]


def test_counterfactual_off_leaves_smaller_sizes_at_the_prior():
    ctrl = SAGCController(SAGCConfig(initial=16, tau=2.0, seed=0))
    ctrl.next_group_size()
    rec = ctrl.observe(HAND)
    assert rec.subgroup_risk == {}
    assert ctrl.alpha == [1.0, 1.0, 2.0] and ctrl.beta == [1.0, 1.0, 1.0]


def test_counterfactual_uses_only_complete_subgroups():
    """Groups from several generation rounds work the same; a short group limits how many
    complete sub-steps the step holds (here one of size 4 and none of size 8)."""
    ctrl = SAGCController(SAGCConfig(initial=16, counterfactual=True, tau=2.0, seed=0))
    ctrl.next_group_size()
    rec = ctrl.observe([HAND[0], HAND[1], [10, 10, 10, 10, 10, 10]])
    assert rec.subgroup_risk == {4: 1.0}  # columns 0-3 of all three groups: 100 among 10s
    assert ctrl.alpha[1] == 1.0 and ctrl.beta[1] == 1.0


def test_counterfactual_never_updates_larger_sizes():
    ctrl = SAGCController(SAGCConfig(initial=4, counterfactual=True, tau=2.0, seed=0))
    ctrl.next_group_size()
    rec = ctrl.observe([row[:4] for row in HAND])
    assert rec.subgroup_risk == {}
    assert ctrl.alpha[1:] == [1.0, 1.0] and ctrl.beta[1:] == [1.0, 1.0]


def test_constrained_picks_largest_g_within_budget():
    """Risks known exactly (posteriors concentrated by a strong prior): 4 and 8 meet the
    budget, 16 does not, so the constrained rule picks 8 from 8 every time, while the
    Lagrangian at lambda = 0 would pick 16."""
    for selection, want in (("constrained", 8), ("lagrangian", 16)):
        ctrl = SAGCController(SAGCConfig(selection=selection, delta=0.3, seed=1))
        ctrl.alpha = [1.0, 20.0, 900.0]  # posterior means ~0.001, 0.02, 0.9
        ctrl.beta = [999.0, 980.0, 100.0]
        ctrl.next_group_size()  # the first call returns the initial G (8)
        assert [ctrl.next_group_size() for _ in range(20)] == [want] * 20


def test_constrained_falls_back_to_smallest_eligible():
    ctrl = SAGCController(SAGCConfig(selection="constrained", delta=0.3, initial=16, seed=1))
    ctrl.alpha = [900.0, 900.0, 900.0]
    ctrl.beta = [100.0, 100.0, 100.0]
    ctrl.next_group_size()
    assert ctrl.next_group_size() == 8  # eligible from 16: {8, 16}, both over budget
    assert ctrl.next_group_size() == 4


def test_constrained_keeps_lambda_and_scores_in_the_record():
    ctrl = SAGCController(SAGCConfig(selection="constrained", delta=0.3, eta=0.5, seed=0))
    g = ctrl.next_group_size()
    ctrl.observe([[10] * (g - 1) + [100]])
    g = ctrl.next_group_size()
    rec = ctrl.observe([[10] * (g - 1) + [100]])
    assert rec.lambda_ == pytest.approx(2 * 0.5 * (1 - 0.3))
    assert set(rec.scores) == set(rec.sampled_risk) and rec.scores


def run_world(ctrl, lengths, steps):
    gs = []
    for t in range(steps):
        g = ctrl.next_group_size()
        gs.append(g)
        ctrl.observe(lengths[t, :, :g].tolist())
    return gs


@pytest.mark.parametrize("k", [0, 1, 9, 30])
def test_exact_resume_through_json_with_options_on(k):
    cfg = SAGCConfig(counterfactual=True, selection="constrained", tau=2.5, eta=2.0, seed=5)
    lengths = world_lengths(3)
    full = run_world(SAGCController(cfg), lengths, 48)
    first = SAGCController(cfg)
    gs = run_world(first, lengths, k)
    state = json.loads(json.dumps(first.state_dict()))
    assert state["config"]["counterfactual"] is True and state["config"]["selection"] == "constrained"
    resumed = SAGCController(SAGCConfig.from_dict(state["config"]))
    resumed.load_state_dict(state)
    for t in range(k, 48):
        g = resumed.next_group_size()
        gs.append(g)
        resumed.observe(lengths[t, :, :g].tolist())
    assert gs == full
    assert len(set(full)) > 1, "the world should make the controller move"


@pytest.mark.parametrize(
    "kwargs, key",
    [
        ({"counterfactual": "yes"}, "counterfactual"),
        ({"counterfactual": 1}, "counterfactual"),
        ({"selection": "greedy"}, "selection"),
        ({"selection": None}, "selection"),
    ],
)
def test_bad_option_names_the_key(kwargs, key):
    with pytest.raises(ValueError, match=f"SAGCConfig.{key}"):
        SAGCConfig(**kwargs)
    with pytest.raises(ValueError, match=f"SAGCConfig.{key}"):
        SAGCConfig.from_dict(kwargs)


def test_options_default_off_and_round_trip():
    cfg = SAGCConfig()
    assert cfg.counterfactual is False and cfg.selection == "lagrangian"
    on = SAGCConfig(counterfactual=True, selection="constrained")
    assert SAGCConfig.from_dict(json.loads(json.dumps(on.to_dict()))) == on
