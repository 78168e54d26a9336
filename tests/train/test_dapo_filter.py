"""DAPO's dynamic sampling filters on correctness (accuracy all 0 or all 1), not on the total
reward, and logs how often the two criteria disagree (real TRL, real generation, CPU)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from sagc import metrics as M
from sagc.prompts import PromptStream
from sagc.train.config import TrainConfig
from sagc.train.dynamic_sampling import FILTER_REWARD, filter_disagreement

from .test_trainer import _build

pytestmark = pytest.mark.slow


def test_disagreement_counts_groups_kept_by_exactly_one_criterion():
    g = 3
    total = torch.tensor([0.1, 0.2, 0.3,  # informative
                          1.0, 1.0, 1.0,  # not
                          0.0, 1.1, 0.0,  # informative
                          0.5, 0.5, 0.5])  # not  # fmt: skip
    correct = torch.tensor([0.0, 0.0, 0.0,  # not: total says keep
                            1.0, 1.0, 1.0,  # not: both drop
                            0.0, 1.0, 0.0,  # informative: both keep
                            0.0, 1.0, 1.0])  # informative: total says drop  # fmt: skip
    assert filter_disagreement(total, correct, g) == 2


def _accuracy_by_id(counter):
    """Stands in for the correctness reward (the filter finds it by its name): groups of a
    prompt whose id is 0 mod 3 are all wrong, 2 mod 3 all right, 1 mod 3 right and wrong
    alternately."""

    def reward(prompts, completions, completion_ids, id, **kw):
        return [float(i % 3 == 2) if i % 3 != 1 else float(next(counter) % 2) for i in id]

    reward.__name__ = FILTER_REWARD
    return reward


def test_dapo_keeps_only_groups_of_mixed_accuracy_and_counts_the_disagreement(make_cell, tmp_path, train_world):
    torch.set_num_threads(1)
    fresh = itertools.count()

    def noise(prompts, completions, **kw):
        """A second reward that differs on every row: the total differs within every group."""
        return [next(fresh) / 1000 for _ in completions]

    seed, p, g, max_rounds = 5, 4, 4, 2
    cfg = make_cell(
        tmp_path / "run",
        algorithm="dapo",
        sizing=f"g{g}",
        steps=3,
        prompts=p,
        save_steps=100,
        wandb_mode="disabled",
        seed=seed,
        algo_overrides={"overlong_weight": 0.0, "ds_max_rounds": max_rounds},
    )
    trainer = _build(cfg, reward_funcs=[_accuracy_by_id(itertools.count()), noise], reward_weights=[1.0, 0.1])
    trainer.train()

    stream = PromptStream(train_world["n_prompts"], seed=seed)
    assert len(trainer.steps) == 3
    for result, rec in zip(trainer.steps, trainer.recorded):
        kept, rounds, need, disagree = 0, 0, p, 0
        while True:
            ids = stream.take(need)
            mixed = sum(i % 3 == 1 for i in ids)
            kept += mixed
            # the total differs in every group: it would keep them all, correctness keeps `mixed`
            disagree += len(ids) - mixed
            if kept >= p or rounds == max_rounds:
                break
            rounds, need = rounds + 1, p - kept
        row = result.row()
        assert row[M.DS_ROUNDS] == rounds
        assert row[M.DS_FILTER_DISAGREE] == disagree
        assert result.ds_filled == max(p - kept, 0)
        # Exactly the groups of mixed accuracy carry a policy gradient.
        adv = rec["advantages"].numpy().reshape(p, g)
        assert int((np.abs(adv).sum(axis=1) > 0).sum()) == min(kept, p)
    assert any(s.ds_rounds > 0 for s in trainer.steps), "no refill round: the test checks nothing"


def test_dapo_without_the_correctness_reward_is_refused(make_cell, tmp_path):
    cfg = make_cell(tmp_path / "run", algorithm="dapo", sizing="g4", steps=1, prompts=4, wandb_mode="disabled")
    cfg["rewards"] = {"format": 1.0}
    with pytest.raises(ValueError, match="dynamic sampling drops the groups whose accuracy is all 0 or all 1"):
        TrainConfig.from_dict(cfg)

    def format_only(prompts, completions, **kw):
        return [0.0 for _ in completions]

    # A trainer given reward functions by hand (the config had correctness) is refused too.
    cfg = make_cell(tmp_path / "run2", algorithm="dapo", sizing="g4", steps=1, prompts=4, wandb_mode="disabled")
    with pytest.raises(ValueError, match=f"reward function '{FILTER_REWARD}', which is not among"):
        _build(cfg, reward_funcs=[format_only], reward_weights=[1.0])
