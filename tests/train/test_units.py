"""Prompt stream and dynamic-sampling merge: small pure pieces, checked exactly."""

from __future__ import annotations

import pytest
import torch

from sagc.prompts import PromptStream
from sagc.train.dynamic_sampling import informative_groups, merge_scored


def test_prompt_stream_is_seeded_covers_epochs_and_resumes():
    a, b = PromptStream(10, seed=3), PromptStream(10, seed=3)
    first = a.take(7) + a.take(6)  # crosses into epoch 1
    assert first == b.take(13)
    assert sorted(first[:10]) == list(range(10))  # an epoch is a permutation
    assert a.epoch == 1 and a.pos == 3
    state = a.state_dict()
    c = PromptStream(10, seed=3)
    c.load_state_dict(state)
    assert c.take(9) == a.take(9)
    assert PromptStream(10, seed=4).take(10) != PromptStream(10, seed=3).take(10)
    assert PromptStream(5, seed=0, shuffle=False).take(7) == [0, 1, 2, 3, 4, 0, 1]
    with pytest.raises(ValueError, match="did the training data or train.seed change"):
        PromptStream(11, seed=3).load_state_dict(state)


def test_informative_groups():
    r = torch.tensor([1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.5, float("nan"), 0.5, 0.5])
    assert informative_groups(r, 4).tolist() == [False, True, False]
    with pytest.raises(ValueError, match="do not form groups of 5"):
        informative_groups(r, 5)


def _scored(prompt_w, completion_w, rows, pad=0, offset=0.0):
    """A TRL-like scored batch whose rows are distinguishable."""
    return {
        "prompt_ids": torch.arange(rows * prompt_w).view(rows, prompt_w) + 100,
        "prompt_mask": torch.ones(rows, prompt_w, dtype=torch.long),
        "completion_ids": torch.arange(rows * completion_w).view(rows, completion_w) + 1000,
        "completion_mask": torch.ones(rows, completion_w, dtype=torch.long),
        "old_per_token_logps": torch.full((rows, completion_w), -1.0),
        "advantages": torch.arange(rows, dtype=torch.float) + offset,
        "num_items_in_batch": torch.tensor(rows * completion_w),
    }


def test_merge_scored_repads_and_recounts():
    a, b = _scored(3, 2, rows=4), _scored(2, 5, rows=2, offset=10.0)
    merged = merge_scored([(a, torch.tensor([2, 3])), (b, torch.tensor([0, 1]))], pad_token_id=7)
    assert merged["prompt_ids"].shape == (4, 3) and merged["completion_ids"].shape == (4, 5)
    # Prompts stay left-padded, completions right-padded, masks zero on the padding.
    assert merged["prompt_ids"][2].tolist() == [7, 100, 101]
    assert merged["prompt_mask"][2].tolist() == [0, 1, 1]
    assert merged["completion_ids"][0].tolist() == [1004, 1005, 7, 7, 7]
    assert merged["completion_mask"][0].tolist() == [1, 1, 0, 0, 0]
    assert merged["old_per_token_logps"][0].tolist() == [-1.0, -1.0, 0.0, 0.0, 0.0]
    assert merged["advantages"].tolist() == [2.0, 3.0, 10.0, 11.0]
    assert int(merged["num_items_in_batch"]) == 2 * 2 + 2 * 5
    with pytest.raises(NotImplementedError, match="pixel_values"):
        merge_scored([({**a, "pixel_values": torch.zeros(4, 1)}, torch.tensor([0]))], pad_token_id=7)
