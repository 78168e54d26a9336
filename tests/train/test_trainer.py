"""SAGCGRPOTrainer on the throwaway tiny world (real TRL, real generation, CPU).

Each test trains for a few steps; rewards are test-local functions with a known structure
so that the assertions are exact.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from sagc.prompts import PromptStream
from sagc.train.config import TrainConfig
from sagc.train.dynamic_sampling import FILTER_REWARD

pytestmark = pytest.mark.slow


def length_reward(prompts, completions, completion_ids, **kw):
    """Longer completion, higher reward: varies within a group, as real rewards do."""
    return [len(ids) / 10.0 for ids in completion_ids]


def length_as_correctness(prompts, completions, completion_ids, **kw):
    """``length_reward`` standing in for the correctness reward that DAPO's filter reads (by
    its name): it differs within a group, so the filter keeps every group."""
    return length_reward(prompts, completions, completion_ids)


length_as_correctness.__name__ = FILTER_REWARD


def _recording_trainer_cls():
    from sagc.train.trainer import SAGCGRPOTrainer

    class Recording(SAGCGRPOTrainer):
        """Keeps each step's G, per-round rewards, the scored batch TRL returned, the
        completion lengths of every generate call of the step (counted here, at the call)
        and the record the group sizer returned for the step."""

        recorded: list
        generated: list

        def _generate(self, prompts):
            result = super()._generate(prompts)
            if self.model.training:
                self.generated.append([len(ids) for ids in result[1]])
            return result

        def _generate_and_score_completions(self, inputs):
            n_calls = len(self.generated)
            out = super()._generate_and_score_completions(inputs)
            if self.model.training:
                self.recorded.append({
                    "G": self.num_generations,
                    "rewards": [r.clone() for r in self._current.rewards],
                    "advantages": out["advantages"].detach().cpu().clone(),
                    "completion_mask": out["completion_mask"].detach().cpu().clone(),
                    "generate": self.generated[n_calls:],
                    "observed": self._current.record,
                })  # fmt: skip
            return out

    Recording.recorded = []
    Recording.generated = []
    return Recording


def _build(cfg_dict, **kw):
    from sagc.train.run import build_trainer

    cls = _recording_trainer_cls()
    trainer = build_trainer(TrainConfig.from_dict(cfg_dict), trainer_cls=cls, **kw)
    trainer.recorded, trainer.generated = [], []
    return trainer


def test_sagc_grpo_varies_g_and_advantages_are_per_group(make_cell, tmp_path):
    torch.set_num_threads(1)
    cfg = make_cell(
        tmp_path / "run",
        steps=6,
        save_steps=100,
        wandb_mode="disabled",
        sagc={"candidates": [4, 8, 16], "tau": 2.0, "delta": 0.3, "eta": 2.0},
    )
    trainer = _build(cfg, reward_funcs=[length_reward], reward_weights=[1.0])
    trainer.train()

    gs = [h["group_size"] for h in trainer.history]
    assert len(gs) == 6
    assert len(set(gs)) >= 2, f"G never changed: {gs}"
    assert any(b < a for a, b in zip(gs, gs[1:])), f"SAGC never lowered G: {gs}"
    # The controller saw every step and chose what was trained.
    assert [r["G"] for r in trainer.recorded] == gs
    assert trainer.group_sizer.state_dict()["step"] == 6

    for rec, h in zip(trainer.recorded, trainer.history):
        g = rec["G"]
        (rewards,) = rec["rewards"]  # GRPO: one generation round
        adv = rec["advantages"].double().numpy()
        assert adv.shape == (2 * g,) and h["rollouts"] == 2 * g and h["prompts"] == 2
        # Independent computation: group-relative, sample std, TRL's 1e-4 guard.
        r = rewards.double().numpy().reshape(-1, g)
        expected = (r - r.mean(axis=1, keepdims=True)) / (r.std(axis=1, ddof=1, keepdims=True) + 1e-4)
        np.testing.assert_allclose(adv, expected.reshape(-1), rtol=1e-4, atol=1e-4)
        # Each group's advantages centre on zero (they were computed within the group).
        np.testing.assert_allclose(adv.reshape(-1, g).mean(axis=1), 0.0, atol=1e-4)
        # The rewards are the length reward of the very completions the controller saw.
        assert h["length_max"] == pytest.approx(float(rewards.max()) * 10)
    losses = [h["loss"] for h in trainer.history]
    assert all(math.isfinite(x) for x in losses)
    assert any(x != 0.0 for x in losses)


def test_dapo_trains_with_clip_higher_acting(make_cell, tmp_path):
    torch.set_num_threads(1)
    cfg = make_cell(
        tmp_path / "run", algorithm="dapo", sizing="g4", steps=3, save_steps=100, wandb_mode="disabled", prompts=4
    )
    trainer = _build(cfg, reward_funcs=[length_as_correctness], reward_weights=[1.0])
    assert trainer.loss_type == "dapo" and trainer.epsilon_high == pytest.approx(0.28)
    assert trainer.beta == 0.0 and trainer.mask_truncated_completions
    assert trainer.updates_per_rollout == 2  # two mini-batches per rollout: off-policy reuse
    assert trainer.reward_func_names[-1] == "soft_overlong_punishment_reward"
    trainer.train()
    assert trainer.state.global_step == 6 and len(trainer.history) == 3
    assert all(math.isfinite(h["loss"]) for h in trainer.history)
    # The second mini-batch of a step is scored by a policy that moved: the ratio departs
    # from 1 (TRL keeps old log-probs only in that case) so the clip region can act.
    assert all("old_per_token_logps" in b for b in trainer._buffered_inputs)
    # Overlong filtering: truncated rows carry no loss.
    for rec in trainer.recorded:
        assert rec["completion_mask"].shape[0] == 4 * 4


def test_dynamic_sampling_drops_zero_variance_groups_and_refills(make_cell, tmp_path, train_world):
    torch.set_num_threads(1)
    counter = itertools.count()

    def half_constant_reward(prompts, completions, completion_ids, id, **kw):
        """Even ids: the same reward for every completion (zero variance: dropped);
        odd ids: a fresh value per completion (always informative)."""
        return [0.5 if i % 2 == 0 else next(counter) / 100 for i in id]

    # It stands in for the correctness reward, which dynamic sampling filters on (by its name).
    half_constant_reward.__name__ = FILTER_REWARD
    seed, p, g, max_rounds = 11, 4, 4, 2
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
    trainer = _build(cfg, reward_funcs=[half_constant_reward], reward_weights=[1.0])
    trainer.train()

    # Replay the prompt stream: which prompts each round drew, and what DS must do.
    stream = PromptStream(train_world["n_prompts"], seed=seed)
    assert len(trainer.history) == len(trainer.recorded) == len(trainer.steps) == 3
    for h, rec, result in zip(trainer.history, trainer.recorded, trainer.steps):
        kept, dropped, rounds, need, drawn = 0, 0, 0, p, []
        while True:
            ids = stream.take(need)
            drawn.append(ids)
            good = sum(i % 2 == 1 for i in ids)
            kept, dropped = kept + good, dropped + len(ids) - good
            if kept == p or rounds == max_rounds:
                break
            rounds, need = rounds + 1, p - kept
        # One generate call per round (the first and every refill), each of G rows per
        # prompt that round drew.
        gen = rec["generate"]
        assert [len(c) for c in gen] == [g * len(ids) for ids in drawn]
        assert h["generate_calls"] == len(h["calls"]) == len(gen)
        # All rollouts generated in the step (every round, dropped groups included)
        # reached the controller, in one observation.
        every = [n for call in gen for n in call]
        observed = rec["observed"]
        assert observed.n_rollouts == len(every) and observed.n_groups == sum(len(ids) for ids in drawn)
        assert observed.length_max == max(every) and observed.length_median == np.median(every)
        assert [n for group in result.lengths for n in group] == every
        assert result.prompt_ids == [i for ids in drawn for i in ids]
        assert h["ds_rounds"] == rounds
        assert h["ds_dropped_groups"] == dropped
        assert h["ds_filled_groups"] == p - kept
        assert len(rec["rewards"]) == rounds + 1
        assert h["prompts"] == p and h["rollouts"] == p * g
        adv = rec["advantages"].numpy().reshape(p, g)
        informative = np.abs(adv).sum(axis=1) > 0
        assert informative.sum() == kept  # only filled groups (cap reached) have zero advantage
    # Exactly one observation per step: not one per round, none skipped.
    assert trainer.group_sizer.state_dict()["step"] == len(trainer.history)
    assert any(h["ds_rounds"] > 0 for h in trainer.history)
    assert all(math.isfinite(h["loss"]) for h in trainer.history)


def test_rollout_budget_keeps_rollouts_fixed(make_cell, tmp_path):
    torch.set_num_threads(1)
    cfg = make_cell(
        tmp_path / "run", steps=4, save_steps=100, wandb_mode="disabled", sagc={"candidates": [4, 8, 16], "eta": 2.0}
    )
    cfg["train"].update(prompts_per_step=None, rollout_budget=32)
    trainer = _build(cfg, reward_funcs=[length_reward], reward_weights=[1.0])
    trainer.train()
    for h in trainer.history:
        assert h["rollouts"] == 32
        assert h["prompts"] == 32 // h["group_size"]


def test_rollout_time_is_generation_alone(make_cell, tmp_path, monkeypatch):
    """Stop trimming (CPU work that grows with total tokens) is timed apart from generation:
    a trim made 0.3 s slow lands in the post-processing time, not in ``rollout_s``."""
    import time

    from sagc.train import rollout

    trim = rollout.trim_rollouts

    def slow_trim(*args, **kwargs):
        time.sleep(0.3)
        return trim(*args, **kwargs)

    monkeypatch.setattr(rollout, "trim_rollouts", slow_trim)
    cfg = make_cell(tmp_path / "run", steps=2, save_steps=100, wandb_mode="disabled", sizing="g4")
    cfg["train"]["stop"] = ["\nUser:"]
    trainer = _build(cfg)
    trainer.train()
    for step in trainer.steps:
        calls = len(step.calls)
        assert step.post_s >= 0.3 * calls
        assert step.rollout_s < 0.3 * calls, "the trim's time went into rollout_s"
        assert step.rollout_s + step.post_s + step.sync_s <= step.step_s


@pytest.mark.parametrize("algorithm, overrides", [("grpo", {}), ("grpo", {"loss_type": "bnpo"}), ("dapo", {})])
def test_loss_passes_of_a_fixed_size_give_the_micro_batchs_gradient(make_cell, tmp_path, algorithm, overrides):
    """A micro-batch run as passes of ``micro_batch_rows`` rows trains the weights the whole
    micro-batch would (each pass weighted as its share of the loss), in passes no larger."""
    from sagc.train.trainer import SAGCGRPOTrainer

    class Counting(SAGCGRPOTrainer):
        passes: list

        def _compute_loss(self, model, inputs):
            self.passes.append(int(inputs["completion_ids"].shape[0]))
            return super()._compute_loss(model, inputs)

    weights, passes = {}, {}
    for cap in (None, 3):
        cfg = make_cell(
            tmp_path / f"cap{cap}",
            algorithm=algorithm,
            algo_overrides=overrides,
            steps=2,
            save_steps=100,
            wandb_mode="disabled",
            sizing="g8",
        )
        cfg["train"]["micro_batch_rows"] = cap
        from sagc.train.run import build_trainer

        trainer = build_trainer(
            TrainConfig.from_dict(cfg), trainer_cls=Counting, reward_funcs=[length_as_correctness], reward_weights=[1.0]
        )
        trainer.passes = []
        trainer.train()
        weights[cap] = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}
        passes[cap] = trainer.passes
    # One pass per micro-batch without the cap (P x G = 16 rows, split by the algorithm's
    # minibatches); with it, passes of at most 3 rows covering the same rows.
    assert max(passes[3]) <= 3 < max(passes[None])
    assert sum(passes[3]) == sum(passes[None])
    for name, w in weights[None].items():
        torch.testing.assert_close(weights[3][name], w, rtol=1e-4, atol=1e-6, msg=name)
    # ... and the runs did move the weights (the comparison is not between two untrained models).
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(make_cell(tmp_path / "x")["model"]["path"]).state_dict()
    assert any(not torch.equal(base[k], w) for k, w in weights[None].items() if k in base)
