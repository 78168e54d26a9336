"""The no-grad scoring passes (reference and old log-probs) run in chunks of the loss pass's
rows (``micro_batch_rows``), not TRL's whole micro-batch at G_max: the memory plan sizes one
layout for every pass of a step. Real TRL on the throwaway tiny world (CPU)."""

from __future__ import annotations

import pytest
import torch

from sagc.train.config import TrainConfig

pytestmark = pytest.mark.slow


def _length_reward(prompts, completions, completion_ids, **kw):
    return [len(ids) / 10.0 for ids in completion_ids]


def _scoring_chunks(make_cell, out, cap):
    """Rows of every forward pass of the reference model while training one step of a GRPO g8
    cell (P = 2: a micro-batch of 16 rows), and the reference log-probs of the step."""
    from sagc.train.run import build_trainer
    from sagc.train.trainer import SAGCGRPOTrainer

    chunks = {"reference": []}
    ref_logps = []

    class Recording(SAGCGRPOTrainer):
        def _generate_and_score_completions(self, inputs):
            out = super()._generate_and_score_completions(inputs)
            if self.model.training:
                ref_logps.append(out["ref_per_token_logps"].detach().clone())
            return out

    cfg = make_cell(out, algorithm="grpo", sizing="g8", steps=1, save_steps=100, wandb_mode="disabled")
    cfg["train"]["micro_batch_rows"] = cap
    trainer = build_trainer(
        TrainConfig.from_dict(cfg), trainer_cls=Recording, reward_funcs=[_length_reward], reward_weights=[1.0]
    )

    def hook(name):
        def record(module, args, kwargs):
            if not torch.is_grad_enabled():
                chunks[name].append(int(kwargs["input_ids"].shape[0]))

        return record

    trainer.ref_model.register_forward_pre_hook(hook("reference"), with_kwargs=True)
    trainer.train()
    return trainer, chunks, torch.cat(ref_logps)


def test_scoring_passes_run_in_chunks_of_the_loss_passs_rows(make_cell, tmp_path):
    trainer, chunks, ref_chunked = _scoring_chunks(make_cell, tmp_path / "cap3", 3)
    whole = trainer.args.per_device_train_batch_size
    assert whole == 16 and trainer.sagc_args.layout.micro_batch_rows == 3
    # the step's 16 rows scored against the reference in chunks of at most 3 (3+3+3+3+3+1)
    assert chunks["reference"] == [3, 3, 3, 3, 3, 1]
    _, unchunked, ref_whole = _scoring_chunks(make_cell, tmp_path / "uncapped", None)
    assert unchunked["reference"] == [16]  # TRL's own chunk: the whole micro-batch at once
    # the same rollouts (same seed), the same reference log-probs, chunked or not
    torch.testing.assert_close(ref_chunked, ref_whole, rtol=1e-5, atol=1e-6)
