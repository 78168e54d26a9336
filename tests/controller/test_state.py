"""``load_state_dict`` validates the whole state before assigning anything (all or
nothing; errors name the key), and ``observe`` rejects lengths no generation produces
instead of overflowing."""

import copy
import json
import math

import pytest

from sagc import FixedGroupSize, SAGCConfig, SAGCController
from sagc.lengths import MAX_LENGTH


def trained(cfg=None):
    ctrl = SAGCController(cfg or SAGCConfig(seed=3, counterfactual=True))
    for t in range(5):
        g = ctrl.next_group_size()
        ctrl.observe([[10] * (g - 1) + [100 if t % 2 else 12]] * 2)
    return ctrl


def damaged(state, key, value):
    bad = copy.deepcopy(state)
    if value is KeyError:
        del bad[key]
    else:
        bad[key] = value
    return bad


GOOD = trained().state_dict()

SAGC_CASES = [
    ("alpha", KeyError, "alpha"),
    ("rng", KeyError, "rng"),
    ("index", 7, "index"),
    ("index", -1, "index"),
    ("index", 1.0, "index"),
    ("index", True, "index"),
    ("alpha", [1.0, 2.0], "alpha"),
    ("beta", [1.0, 2.0, 3.0, 4.0], "beta"),
    ("alpha", "1,2,3", "alpha"),
    ("beta", [1.0, -2.0, 3.0], "beta"),
    ("alpha", [1.0, float("inf"), 3.0], "alpha"),
    ("lambda", float("nan"), "lambda"),
    ("lambda", -0.5, "lambda"),
    ("lambda", "2.0", "lambda"),
    ("step", -1, "step"),
    ("step", "5", "step"),
    ("n_stragglers", 6, "n_stragglers"),  # more stragglers than steps
    ("started", "yes", "started"),
    ("last_sampled", {"5": 0.2}, "last_sampled"),
    ("last_sampled", {"8": 1.5}, "last_sampled"),
    ("last_scores", [1.0], "last_scores"),
    ("config", {"candidates": [4, 8, 16], "tau": 0.5}, "config"),
    ("config", "sagc", "config"),
    ("rng", {"bit_generator": "PCG64", "state": {"state": "x", "inc": "1"}, "has_uint32": 0, "uinteger": 0}, "rng"),
    ("rng", {"bit_generator": "MT19937"}, "rng"),
]


@pytest.mark.parametrize("key, value, named", SAGC_CASES)
def test_bad_sagc_state_is_rejected_whole_and_named(key, value, named):
    ctrl = SAGCController(SAGCConfig(seed=9, counterfactual=True))
    ctrl.next_group_size()
    ctrl.observe([[5, 6, 7, 8, 9, 10, 11, 12]])
    before = json.dumps(ctrl.state_dict())
    with pytest.raises(ValueError, match=named):
        ctrl.load_state_dict(damaged(GOOD, key, value))
    assert json.dumps(ctrl.state_dict()) == before, "a rejected state must change nothing"


def test_good_state_still_loads_exactly():
    ctrl = SAGCController(SAGCConfig(seed=3, counterfactual=True))
    ctrl.load_state_dict(json.loads(json.dumps(GOOD)))
    assert ctrl.state_dict() == GOOD


def test_state_of_another_kind_or_version():
    ctrl = SAGCController()
    with pytest.raises(ValueError, match="'sagc'"):
        ctrl.load_state_dict(FixedGroupSize(8).state_dict())
    with pytest.raises(ValueError, match="version"):
        ctrl.load_state_dict({**GOOD, "version": 99})
    with pytest.raises(ValueError, match="'sagc'"):
        ctrl.load_state_dict([GOOD])


FIXED_CASES = [
    ("step", KeyError, "step"),
    ("n_stragglers", KeyError, "n_stragglers"),
    ("step", -1, "step"),
    ("step", 2.5, "step"),
    ("n_stragglers", 4, "n_stragglers"),
    ("n_stragglers", "1", "n_stragglers"),
    ("group_size", "8", "group_size"),
]


@pytest.mark.parametrize("key, value, named", FIXED_CASES)
def test_bad_fixed_state_is_rejected_whole_and_named(key, value, named):
    src = FixedGroupSize(8)
    for _ in range(3):
        src.observe([[1, 1, 1, 9, 1, 1, 1, 1]])
    good = src.state_dict()
    ctrl = FixedGroupSize(8)
    ctrl.observe([[1] * 8])
    before = ctrl.state_dict()
    with pytest.raises(ValueError, match=named):
        ctrl.load_state_dict(damaged(good, key, value))
    assert ctrl.state_dict() == before


def test_huge_lengths_are_rejected_not_overflowed():
    ctrl = SAGCController(SAGCConfig(seed=0))
    ctrl.next_group_size()
    before = json.dumps(ctrl.state_dict())
    with pytest.raises(ValueError, match="above .* tokens"):
        ctrl.observe([[1e308, 1e308]])
    assert json.dumps(ctrl.state_dict()) == before
    with pytest.raises(ValueError, match="group 1"):
        FixedGroupSize(4).observe([[1, 2], [3, MAX_LENGTH * 2]])


def test_ratio_stays_exact_up_to_the_largest_accepted_length():
    rec = FixedGroupSize(4).observe([[2.0**52, MAX_LENGTH]])
    assert rec.length_median == 1.5 * 2.0**52
    assert rec.ratio == pytest.approx(4 / 3)
    assert math.isfinite(rec.length_mean)
