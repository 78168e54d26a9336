"""DAPO's dynamic sampling over scripted rounds, without TRL's loop: which groups a step
keeps, when it refills and with how many prompts, and how it completes a batch at the cap."""

from __future__ import annotations

import pytest
import torch

from sagc.train.dynamic_sampling import keep_informative

G, PAD = 2, 0
MIXED, WRONG, RIGHT = [0.0, 1.0], [0.0, 0.0], [1.0, 1.0]


def _round(tag: int, accuracy: list[list[float]], width: int = 3):
    """A scored round whose groups have these correctness rewards; each row's first
    completion token is ``tag * 100 + row``, its advantage ``tag + row / 10``."""
    rows = len(accuracy) * G
    completion = torch.full((rows, width), 5)
    completion[:, 0] = tag * 100 + torch.arange(rows)
    scored = {
        "prompt_ids": torch.ones(rows, 2, dtype=torch.long),
        "prompt_mask": torch.ones(rows, 2, dtype=torch.long),
        "completion_ids": completion,
        "completion_mask": torch.ones(rows, width, dtype=torch.long),
        "advantages": tag + torch.arange(rows) / 10,
        "num_items_in_batch": torch.tensor(rows * width),
    }
    correct = torch.tensor([x for group in accuracy for x in group])
    return scored, correct.clone(), correct


def _script(*rounds):
    """``refill`` that hands out ``rounds`` in turn and records the prompts it was asked for."""
    asked = []

    def refill(n_prompts):
        asked.append(n_prompts)
        scored, total, correct = rounds[len(asked) - 1]
        assert correct.numel() == n_prompts * G, "the script's round has another number of prompts"
        return scored, total, correct

    return refill, asked


def _tags(batch) -> list[int]:
    return batch["completion_ids"][:, 0].tolist()


def test_a_round_of_informative_groups_is_kept_as_it_is():
    refill, asked = _script()
    kept = keep_informative(
        _round(1, [MIXED, MIXED]), 2, G, max_rounds=3, refill_unit=1, refill=refill, pad_token_id=PAD
    )
    assert kept.batch is None and (kept.rounds, kept.dropped, kept.filled) == (0, 0, 0) and asked == []


def test_dropped_groups_are_refilled_with_whole_units_and_only_the_prompts_needed():
    # round 1 drops one of three groups; a refill unit of 2 prompts draws two, both informative:
    # only the first is kept, so the step has exactly P groups
    refill, asked = _script(_round(2, [MIXED, MIXED], width=4))
    kept = keep_informative(
        _round(1, [MIXED, WRONG, MIXED]), 3, G, max_rounds=3, refill_unit=2, refill=refill, pad_token_id=PAD
    )
    assert asked == [2]
    assert (kept.rounds, kept.dropped, kept.filled) == (1, 1, 0)
    assert _tags(kept.batch) == [100, 101, 104, 105, 200, 201]
    torch.testing.assert_close(kept.batch["advantages"], torch.tensor([1.0, 1.1, 1.4, 1.5, 2.0, 2.1]))
    assert kept.batch["completion_ids"].shape == (6, 4)  # re-padded to the widest round
    assert int(kept.batch["num_items_in_batch"]) == int(kept.batch["completion_mask"].sum())


def test_at_the_cap_the_batch_is_completed_with_the_latest_dropped_groups_at_zero_advantage():
    refill, asked = _script(_round(2, [RIGHT, WRONG]), _round(3, [MIXED, WRONG]))
    kept = keep_informative(
        _round(1, [MIXED, WRONG, RIGHT]), 3, G, max_rounds=2, refill_unit=1, refill=refill, pad_token_id=PAD
    )
    assert asked == [2, 2]
    assert (kept.rounds, kept.dropped, kept.filled) == (2, 5, 1)
    # kept: group 0 of round 1 and group 0 of round 3; filled with round 3's dropped group
    assert _tags(kept.batch) == [100, 101, 300, 301, 302, 303]
    torch.testing.assert_close(kept.batch["advantages"], torch.tensor([1.0, 1.1, 3.0, 3.1, 0.0, 0.0]))


def test_without_refill_rounds_the_first_rounds_dropped_groups_complete_the_batch():
    refill, asked = _script()
    kept = keep_informative(
        _round(1, [WRONG, MIXED, RIGHT]), 3, G, max_rounds=0, refill_unit=1, refill=refill, pad_token_id=PAD
    )
    assert asked == [] and (kept.rounds, kept.dropped, kept.filled) == (0, 2, 2)
    assert _tags(kept.batch) == [102, 103, 100, 101, 104, 105]
    torch.testing.assert_close(kept.batch["advantages"], torch.tensor([1.2, 1.3, 0.0, 0.0, 0.0, 0.0]))


def test_disagreement_with_the_total_reward_is_counted_over_every_round():
    first, _, correct = _round(1, [WRONG, MIXED])
    total = correct + torch.tensor([0.0, 0.1, 0.0, 0.0])  # the format term splits the wrong group
    second, _, correct2 = _round(2, [MIXED])
    refill, _ = _script((second, torch.zeros(2), correct2))  # equal totals: this group disagrees too
    kept = keep_informative((first, total, correct), 2, G, max_rounds=1, refill_unit=1, refill=refill, pad_token_id=PAD)
    assert kept.disagree == 2 and kept.rounds == 1


def test_rewards_that_do_not_form_groups_are_refused():
    scored, total, correct = _round(1, [MIXED, MIXED])
    with pytest.raises(ValueError, match="3 rewards do not form groups of 2"):
        keep_informative(
            (scored, total[:3], correct[:3]), 1, G, max_rounds=0, refill_unit=1, refill=_script()[0], pad_token_id=PAD
        )
