"""What happens around TRL's generation call: importance-sampling bookkeeping and the timed
vLLM weight sync (vLLM does not run on CPU: a stand-in records the sync calls)."""

from __future__ import annotations

from collections import defaultdict
from types import SimpleNamespace

import pytest
import torch

from sagc.train.rollout import WEIGHT_SYNC_METRIC, importance_sampling_altered_frac, timed_weight_sync


def test_altered_fraction_counts_masked_tokens_or_rows_and_truncated_tokens():
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
    token_ratio = torch.tensor([[1.0, 0.0, 1.2, 0.0], [0.0, 0.9, 7.0, 7.0]])
    scored = {"importance_sampling_ratio": token_ratio, "completion_mask": mask}
    # token_mask: 2 of the 5 completion tokens were zeroed (padding ignored).
    assert importance_sampling_altered_frac(scored, "token_mask", 3.0) == pytest.approx(2 / 5)
    capped = {
        "importance_sampling_ratio": torch.tensor([[1.0, 3.0, 1.2, 0.0], [3.0, 0.9, 0.0, 0.0]]),
        "completion_mask": mask,
    }
    assert importance_sampling_altered_frac(capped, "token_truncate", 3.0) == pytest.approx(2 / 5)
    rows = {"importance_sampling_ratio": torch.tensor([[0.0], [1.1], [0.0], [0.7]]), "completion_mask": mask}
    assert importance_sampling_altered_frac(rows, "sequence_mask", 3.0) == pytest.approx(0.5)
    assert importance_sampling_altered_frac({"completion_mask": mask}, "token_mask", 3.0) is None


def test_weight_sync_happens_once_per_update_and_is_timed():
    calls = []
    trainer = SimpleNamespace(
        use_vllm=True,
        _last_loaded_step=-1,
        state=SimpleNamespace(global_step=0),
        vllm_generation=SimpleNamespace(mode="colocate", sync_weights=lambda: calls.append(1)),
        model=SimpleNamespace(training=True),
        _metrics={"train": defaultdict(list), "eval": defaultdict(list)},
    )
    first = timed_weight_sync(trainer)
    # A dynamic-sampling round in the same update: no second copy, nothing to subtract.
    assert timed_weight_sync(trainer) == 0.0
    assert trainer._metrics["train"][WEIGHT_SYNC_METRIC] == [first]
    assert len(calls) == 1 and trainer._last_loaded_step == 0  # TRL's own check now skips it
    trainer.state.global_step = 2
    timed_weight_sync(trainer)
    assert len(calls) == 2 and len(trainer._metrics["train"][WEIGHT_SYNC_METRIC]) == 2
    assert all(t >= 0 for t in trainer._metrics["train"][WEIGHT_SYNC_METRIC])
    trainer.use_vllm = False
    trainer.state.global_step = 3
    timed_weight_sync(trainer)
    assert len(calls) == 2


def test_in_sleep_mode_a_refill_round_pushes_the_weights_again_outside_the_rollout():
    """TRL's sleep mode (level 2) discards the engine's weights after each generation; TRL then
    re-pushes them inside its next generation call, where the copy would count as rollout
    time. The timed sync does it first for a DAPO refill round of the same update too."""
    gen = SimpleNamespace(mode="colocate", _llm_weights_sleeping=True, calls=0)

    def sync():  # TRL's VLLMGeneration.sync_weights wakes the weights and loads them
        gen.calls += 1
        gen._llm_weights_sleeping = False

    gen.sync_weights = sync
    trainer = SimpleNamespace(
        use_vllm=True,
        _last_loaded_step=-1,
        state=SimpleNamespace(global_step=0),
        vllm_generation=gen,
        model=SimpleNamespace(training=True),
        _metrics={"train": defaultdict(list), "eval": defaultdict(list)},
    )
    for round_ in range(3):  # the first round and two refills of one update
        timed_weight_sync(trainer)
        assert gen.calls == round_ + 1 and not gen._llm_weights_sleeping
        gen._llm_weights_sleeping = True  # TRL's generate: wake the KV cache, generate, sleep(level=2)
    assert len(trainer._metrics["train"][WEIGHT_SYNC_METRIC]) == 3
    gen._llm_weights_sleeping = False  # without sleep mode the refills skip the copy
    assert timed_weight_sync(trainer) == 0.0 and gen.calls == 3


def _decode_block_peak(prompts, lengths, block_size, prefix_caching):
    """A decode simulated token by token: each running row's blocks, a prompt's full blocks
    shared by its rows (reference-counted) when prefix caching is on."""
    import math

    peak = 0
    for t in range(1, max(lengths) + 1):
        running = [(tuple(p), n) for p, n in zip(prompts, lengths) if n >= t]
        shared = {p: len(p) // block_size if prefix_caching else 0 for p, _ in running}
        own = sum(math.ceil((len(p) + t) / block_size) - shared[p] for p, _ in running)
        peak = max(peak, (own + sum(shared.values())) * block_size)
    return peak


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("prefix_caching", [False, True])
def test_kv_peak_is_the_most_blocks_a_lockstep_decode_holds(seed, prefix_caching):
    import random

    from sagc.train.rollout import kv_peak_tokens

    rng = random.Random(seed)
    prompts = [[rng.randrange(50) for _ in range(rng.randint(1, 40))] for _ in range(rng.randint(1, 4))]
    group = rng.randint(1, 6)
    rows = [p for p in prompts for _ in range(group)]
    lengths = [rng.randint(1, 60) for _ in rows]
    block = rng.choice([1, 4, 16])
    assert kv_peak_tokens(rows, lengths, block, prefix_caching) == _decode_block_peak(
        rows, lengths, block, prefix_caching
    )
