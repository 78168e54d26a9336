"""sagc-prompt: one SAGC controller per round kind, resumable exactly."""

import json

import numpy as np
import pytest

from sagc.controller import SAGCConfig, SAGCController
from sagc.prompt_aware.policy import PromptAwareSAGC
from sagc.prompts import PromptStream


class _Rounds:
    """A schedule whose every third round is long."""

    def __init__(self):
        self.t = 0

    def next_round_long(self):
        return self.t % 3 == 2


def _run(policy, rounds, steps, rng):
    out = []
    for _ in range(steps):
        g = policy.next_group_size()
        long = rounds.t % 3 == 2
        scale = 100.0 if long else 20.0
        lengths = scale * np.exp(0.3 * rng.standard_normal((2, g)))
        if long:
            lengths[0, 0] *= 5  # long rounds straggle
        rec = policy.observe(lengths)
        rounds.t += 1
        out.append((g, rec.straggler, rec.step))
    return out


def test_each_round_kind_learns_its_own_risk():
    cfg = SAGCConfig(tau=2.5, eta=2.0)
    rounds = _Rounds()
    policy = PromptAwareSAGC(cfg, rounds)
    trace = _run(policy, rounds, 60, np.random.default_rng(0))
    assert policy.long.posterior_mean()[16] > 0.8 > 0.2 > policy.short.posterior_mean()[16]
    short_g = [g for t, (g, _, _) in enumerate(trace) if t % 3 != 2]
    long_g = [g for t, (g, _, _) in enumerate(trace) if t % 3 == 2]
    assert np.mean(short_g[-10:]) > np.mean(long_g[-10:])
    assert [s for _, _, s in trace] == list(range(1, 61))  # the run's step count, not a kind's
    assert policy.straggler_rate == pytest.approx(np.mean([f for _, f, _ in trace]))


def test_without_a_schedule_it_is_plain_sagc():
    cfg = SAGCConfig(seed=3)
    policy, plain = PromptAwareSAGC(cfg), SAGCController(cfg)
    rng = np.random.default_rng(1)
    for _ in range(30):
        g = policy.next_group_size()
        assert g == plain.next_group_size()
        lengths = 30 * np.exp(0.5 * rng.standard_normal((2, g)))
        assert policy.observe(lengths).straggler == plain.observe(lengths).straggler


def test_without_a_sagc_prompt_block_it_keeps_the_plain_stream():
    policy = PromptAwareSAGC(SAGCConfig())
    base = PromptStream(4, seed=0)
    assert policy.prompt_stream(base, token_ids=[[1]] * 4) is base and policy.schedule is None


def test_state_resumes_exactly():
    cfg = SAGCConfig(tau=2.5, eta=2.0, seed=4)
    rounds = _Rounds()
    full = PromptAwareSAGC(cfg, rounds)
    rng = np.random.default_rng(2)
    _run(full, rounds, 25, rng)
    state = json.loads(json.dumps(full.state_dict()))
    t, rng_state = rounds.t, rng.bit_generator.state
    tail_full = _run(full, rounds, 25, rng)
    rounds2 = _Rounds()
    rounds2.t = t
    resumed = PromptAwareSAGC(cfg, rounds2)
    resumed.load_state_dict(state)
    rng2 = np.random.default_rng(0)
    rng2.bit_generator.state = rng_state
    assert _run(resumed, rounds2, 25, rng2) == tail_full


def test_damaged_state_names_the_key_and_changes_nothing():
    policy = PromptAwareSAGC(SAGCConfig())
    state = policy.state_dict()
    bad = json.loads(json.dumps(state))
    bad["long"]["lambda"] = -1.0
    before = policy.long.lambda_
    with pytest.raises(ValueError, match="'long'.*lambda"):
        policy.load_state_dict(bad)
    assert policy.long.lambda_ == before
    with pytest.raises(ValueError, match="'n_stragglers'"):
        policy.load_state_dict({**state, "n_stragglers": 5})
