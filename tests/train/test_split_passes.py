"""Loss passes of a micro-batch under the sharded strategies: FSDP2's gradient-sync switch is
left as the Trainer set it, and ZeRO 2/3 with split passes is refused before any job."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
import yaml
from accelerate import Accelerator

from sagc.pipeline import launch
from sagc.pipeline.config import ConfigError, prepare
from sagc.train.loss_passes import held_gradient_sync

REPO = Path(__file__).resolve().parents[2]


class FSDP2Switch(torch.nn.Module):
    """FSDP2's per-module switch (``FSDPModule.set_requires_gradient_sync``) as a flag that
    can be read: what accelerate's ``no_sync`` drives under FSDP2 (FSDP2 needs GPUs)."""

    def __init__(self) -> None:
        super().__init__()
        self.requires_gradient_sync = True

    def set_requires_gradient_sync(self, flag: bool, *, recurse: bool = True) -> None:
        self.requires_gradient_sync = flag


@pytest.fixture
def fsdp2_accelerator(monkeypatch):
    accelerator = Accelerator(cpu=True)
    monkeypatch.setattr(Accelerator, "is_fsdp2", property(lambda self: True))
    return accelerator


def test_accelerate_no_sync_under_fsdp2_turns_sync_on_at_exit(fsdp2_accelerator):
    """The premise: a nested no_sync ends with sync on, whatever it was before."""
    model = FSDP2Switch()
    with fsdp2_accelerator.no_sync(model):
        with fsdp2_accelerator.no_sync(model):
            pass
        assert model.requires_gradient_sync  # the outer hold is gone


def test_early_passes_of_a_non_final_micro_step_keep_the_trainers_hold(fsdp2_accelerator):
    """A micro-step that does not end the accumulation: the Trainer holds sync off around it
    (its own no_sync); the trainer's early passes must leave it off for the last pass."""
    model = FSDP2Switch()
    fsdp2_accelerator.gradient_state._set_sync_gradients(False)
    with fsdp2_accelerator.no_sync(model):  # the Trainer's, around training_step
        for _ in range(2):  # two early passes
            with held_gradient_sync(fsdp2_accelerator, model):
                assert not model.requires_gradient_sync
            assert not model.requires_gradient_sync  # the last pass does not reduce either
    assert model.requires_gradient_sync


def test_early_passes_of_the_final_micro_step_hold_sync_until_the_last_pass(fsdp2_accelerator):
    """The micro-step that ends the accumulation (the Trainer's context is empty): early passes
    run without reduction, the last one reduces the whole accumulated gradient."""
    model = FSDP2Switch()
    fsdp2_accelerator.gradient_state._set_sync_gradients(True)
    with held_gradient_sync(fsdp2_accelerator, model):
        assert not model.requires_gradient_sync
    assert model.requires_gradient_sync


# --- ZeRO 2/3 ------------------------------------------------------------------------------


def _paper(strategy: str, **train) -> dict:
    config = yaml.safe_load((REPO / "configs" / "paper.yaml").read_text())
    config["launch"] = {**(config.get("launch") or {}), "processes_per_node": 4}
    config["models"]["qwen2.5-3b"]["strategy"] = strategy
    config["train"] = {**config["train"], **train}
    return config


@pytest.mark.parametrize("strategy", ["zero2", "zero3"])
def test_zero_with_split_loss_passes_is_refused_naming_the_cells(strategy, monkeypatch):
    monkeypatch.setattr(launch, "deepspeed_installed", lambda: True)  # the check after installing it
    # gradient_accumulation_steps=auto sizes the passes for the smallest G: larger G split
    with pytest.raises(ConfigError) as err:
        prepare(copy.deepcopy(_paper(strategy)), "configs/paper.yaml")
    msg = str(err.value)
    assert f"launch.strategy={strategy}" in msg and f"ZeRO {strategy[-1]} cannot accumulate" in msg
    assert "qwen2.5-3b/dapo/g16/seed0" in msg and "qwen2.5-3b/grpo/sagc/seed0" in msg
    assert "llama-3.2-3b/" not in msg  # that model trains with its own strategy
    assert "set train.gradient_accumulation_steps to a number and leave train.micro_batch_rows unset" in msg
    # What the message says to do (an accumulation whose micro-batch at G_max fits the card):
    # one micro-batch = one pass at every G.
    config = prepare(copy.deepcopy(_paper(strategy, gradient_accumulation_steps=16)), "configs/paper.yaml")
    assert config.models["qwen2.5-3b"].strategy == strategy
