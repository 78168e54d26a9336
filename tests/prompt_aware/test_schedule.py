"""Tail batching: every prompt once per epoch, long prompts gathered, exact resume."""

import json

import numpy as np
import pytest

from sagc.prompt_aware.predictor import PromptLengthPredictor
from sagc.prompt_aware.schedule import TailBatchingStream
from sagc.prompts import PromptStream


def _lengths(idx, z, rng, g=8):
    return [np.exp(z[i] + 0.3 * rng.standard_normal(g)) for i in idx]


def _run(stream, steps, z, rng, k=4):
    drawn = []
    for _ in range(steps):
        stream.next_round_long()
        idx = stream.take(k)
        drawn.append(idx)
        stream.observe(idx, _lengths(idx, z, rng))
    return drawn


@pytest.mark.parametrize("k", [3, 4, 5])
def test_every_prompt_once_per_epoch(k):
    n = 40
    z = np.log(50) + np.random.default_rng(0).normal(0, 0.7, n)
    stream = TailBatchingStream(n, seed=1)
    flat = [i for idx in _run(stream, 4 * n // k, z, np.random.default_rng(1), k) for i in idx]
    for e in range(len(flat) // n):
        assert sorted(flat[e * n : (e + 1) * n]) == list(range(n))


def test_long_prompts_are_gathered_into_regular_long_rounds():
    """Once the predictor knows the prompts (second epoch), about one round in four is long,
    the long rounds hold the prompts with the largest scales, and they start within the epoch
    (each prompt waits about six rounds), not at its end (only the queue's rest is flushed
    there)."""
    n, k = 64, 4
    z = np.log(50) + np.random.default_rng(0).normal(0, 0.7, n)
    stream = TailBatchingStream(n, seed=2, long_fraction=0.25)
    drawn = _run(stream, 2 * n // k, z, np.random.default_rng(3), k)
    epoch2, kinds = drawn[n // k :], stream.rounds[n // k :]
    long_prompts = [i for idx, long in zip(epoch2, kinds) if long for i in idx]
    top = set(np.argsort(z)[-n // 4 :].tolist())
    assert len(set(long_prompts) & top) >= 0.75 * len(top)
    assert 3 <= sum(kinds) <= 5
    positions = [t for t, long in enumerate(kinds) if long]
    assert positions[0] < 12  # a long round well before the epoch's end (queue: 2 rounds' worth)
    short = [i for idx, long in zip(epoch2, kinds) if not long for i in idx]
    assert np.mean(z[short]) < np.mean(z) < np.mean(z[long_prompts])


def test_a_run_shorter_than_an_epoch_trains_its_long_prompts():
    """Deferring is a delay of a few rounds: 10 rounds over 400 prompts train the same
    prompts as the plain stream but for at most the queue (two rounds' worth, plus one)."""
    n, k = 400, 4
    z = np.log(50) + np.random.default_rng(0).normal(0, 0.7, n)
    stream = TailBatchingStream(n, seed=4)
    # the predictor knows the scales (a previous run's history)
    for i in range(n):
        stream.predictor.observe([i], [np.exp(z[i] + 0.3 * np.random.default_rng(i).standard_normal(8))])
    drawn = _run(stream, 10, z, np.random.default_rng(5), k)
    plain = PromptStream(n, seed=4).take(10 * k)
    assert any(stream.rounds)
    assert len(set(plain) - {i for idx in drawn for i in idx}) <= 3 * k
    assert stream.pos - len(stream.deferred) == 10 * k


def test_without_information_it_is_the_plain_stream():
    n = 30
    plain, tail = PromptStream(n, seed=5), TailBatchingStream(n, seed=5)
    assert [plain.take(4) for _ in range(20)] == [tail.take(4) for _ in range(20)]
    assert not any(tail.rounds)


def test_dynamic_sampling_refills_continue_the_round():
    stream = TailBatchingStream(20, seed=0)
    stream.take(4)
    stream.take(2)  # a refill: same round
    assert len(stream.rounds) == 1
    stream.observe([0], [[5, 6]])
    stream.take(4)
    assert len(stream.rounds) == 2


def test_resume_mid_epoch_is_exact():
    n = 48
    z = np.log(50) + np.random.default_rng(0).normal(0, 0.7, n)
    full = TailBatchingStream(n, seed=7)
    rng = np.random.default_rng(8)
    _run(full, 17, z, rng)  # 68 prompts: 1 epoch and 20 more
    state = json.loads(json.dumps(full.state_dict()))
    rng_state = rng.bit_generator.state
    resumed = TailBatchingStream(n, seed=7)
    resumed.load_state_dict(state)
    rng2 = np.random.default_rng(8)
    rng2.bit_generator.state = rng_state
    assert _run(full, 30, z, rng) == _run(resumed, 30, z, rng2)
    assert full.rounds == resumed.rounds


def test_bad_values_and_states_name_the_key():
    with pytest.raises(ValueError, match="sagc_prompt.long_fraction"):
        TailBatchingStream(10, seed=0, long_fraction=1.0)
    with pytest.raises(ValueError, match="sagc_prompt.queue_rounds"):
        TailBatchingStream(10, seed=0, queue_rounds=0)
    with pytest.raises(ValueError, match="'queue_rounds'"):
        TailBatchingStream(10, seed=0, queue_rounds=3).load_state_dict(TailBatchingStream(10, seed=0).state_dict())
    with pytest.raises(ValueError, match="predictor knows"):
        TailBatchingStream(10, seed=0, predictor=PromptLengthPredictor(11))
    state = TailBatchingStream(10, seed=0).state_dict()
    with pytest.raises(ValueError, match="'deferred'"):
        TailBatchingStream(10, seed=0).load_state_dict({**state, "deferred": [1, 1]})
    fresh = TailBatchingStream(10, seed=0)
    with pytest.raises(ValueError, match="'round_prompts'"):
        fresh.load_state_dict({**state, "pos": 3, "round_prompts": 0})
    assert fresh.pos == 0  # nothing was assigned
    with pytest.raises(ValueError, match="'kind'"):
        TailBatchingStream(10, seed=0).load_state_dict(PromptStream(10, seed=0).state_dict())
    with pytest.raises(ValueError, match="seed"):
        TailBatchingStream(10, seed=1).load_state_dict(state)
