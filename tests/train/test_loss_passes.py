"""A micro-batch's loss in passes of a fixed size gives the whole micro-batch's loss and
gradient under each of TRL's loss normalisations, and holds the gradient reduction until the
last pass (no TRL loop: a linear policy and the loss forms TRL's loss types use)."""

from __future__ import annotations

import pytest
import torch
from accelerate import Accelerator

from sagc.train.loss_passes import loss_in_passes, pass_slices, pass_weights

ROWS, TOKENS, FEATURES = 8, 5, 3


class Policy(torch.nn.Linear):
    """A per-token score from features, with FSDP2's per-module sync switch as a flag that can
    be read (what accelerate's ``no_sync`` drives under FSDP2)."""

    def __init__(self) -> None:
        super().__init__(FEATURES, 1)
        self.requires_gradient_sync = True

    def set_requires_gradient_sync(self, flag: bool, *, recurse: bool = True) -> None:
        self.requires_gradient_sync = flag


def _batch() -> dict:
    g = torch.Generator().manual_seed(0)
    mask = torch.ones(ROWS, TOKENS)
    for row, n in enumerate([5, 1, 3, 5, 2, 4, 1, 5]):  # rows of different token counts
        mask[row, n:] = 0
    return {
        "completion_ids": torch.randint(0, 50, (ROWS, TOKENS), generator=g),
        "completion_mask": mask,
        "features": torch.randn(ROWS, TOKENS, FEATURES, generator=g),
        "advantages": torch.randn(ROWS, generator=g),
        # DAPO's normaliser: the whole generation batch's tokens (a scalar, not per row)
        "num_items_in_batch": mask.sum() * 2,
    }


def _loss(policy: Policy, loss_type: str, inputs: dict) -> torch.Tensor:
    """A policy-gradient loss normalised as TRL's ``loss_type`` normalises a micro-batch's."""
    per_token = -policy(inputs["features"]).squeeze(-1) * inputs["advantages"].unsqueeze(1)
    mask = inputs["completion_mask"]
    if loss_type == "grpo":  # per row over its tokens, then a mean over the rows
        return ((per_token * mask).sum(1) / mask.sum(1).clamp(min=1)).mean()
    if loss_type == "bnpo":  # a mean over the micro-batch's tokens
        return (per_token * mask).sum() / mask.sum().clamp(min=1)
    return (per_token * mask).sum() / inputs["num_items_in_batch"]  # dapo: the batch's normaliser


@pytest.mark.parametrize("loss_type", ["grpo", "bnpo", "dapo"])
def test_passes_give_the_whole_micro_batchs_loss_and_gradient(loss_type):
    inputs = _batch()
    whole = Policy()
    split = Policy()
    split.load_state_dict(whole.state_dict())
    expected = _loss(whole, loss_type, inputs)
    expected.backward()

    sizes = []

    def one_pass(chunk):
        sizes.append(int(chunk["completion_ids"].shape[0]))
        return _loss(split, loss_type, chunk)

    loss = loss_in_passes(inputs, 3, loss_type, one_pass, Accelerator(cpu=True), split)
    loss.backward()  # what the Trainer does with the returned loss
    assert sizes == [3, 3, 2]  # uneven passes: equal weights would be wrong for grpo and bnpo
    torch.testing.assert_close(loss.detach(), expected.detach())
    for name, p in whole.named_parameters():
        torch.testing.assert_close(dict(split.named_parameters())[name].grad, p.grad, msg=name)


def test_pass_weights_sum_to_the_micro_batch_and_follow_the_normalisation():
    inputs = _batch()
    passes = pass_slices(ROWS, 3)
    assert [(p.start, p.stop) for p in passes] == [(0, 3), (3, 6), (6, 8)]
    assert pass_weights("grpo", inputs, passes) == [3 / 8, 3 / 8, 2 / 8]
    # tokens per pass: 5+1+3, 5+2+4, 1+5 of the 26
    assert pass_weights("bnpo", inputs, passes) == pytest.approx([9 / 26, 11 / 26, 6 / 26])
    assert pass_weights("dapo", inputs, passes) == [1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="train.micro_batch_rows does not support loss_type 'gspo'"):
        pass_weights("gspo", inputs, passes)


def test_only_the_last_pass_runs_with_gradient_sync_on(monkeypatch):
    """On the micro-step that ends an accumulation, the early passes back-propagate with the
    reduction held; the last one (back-propagated by the Trainer) reduces the whole gradient."""
    monkeypatch.setattr(Accelerator, "is_fsdp2", property(lambda self: True))
    accelerator = Accelerator(cpu=True)
    accelerator.gradient_state._set_sync_gradients(True)
    policy = Policy()
    seen = []

    def one_pass(chunk):
        seen.append(policy.requires_gradient_sync)
        return _loss(policy, "dapo", chunk)

    loss_in_passes(_batch(), 3, "dapo", one_pass, accelerator, policy)
    assert seen == [False, False, True]
    assert policy.requires_gradient_sync
