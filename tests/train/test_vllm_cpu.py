"""The trainer's colocated vLLM path for real, on vLLM's CPU build: SAGC changes G through
vLLM, the weights vLLM samples from are the policy's after a sync, and DAPO's refill rounds
go through vLLM. Skipped where vLLM is not installed (``requirements/cpu-vllm.txt``)."""

from __future__ import annotations

import pytest

pytest.importorskip("vllm")
pytestmark = [pytest.mark.slow, pytest.mark.vllm]

CANDIDATES = [4, 8, 16]


@pytest.fixture(scope="module")
def vllm_model_dir(tiny_data_dir, tiny_tokenizer_dir, tmp_path_factory):
    """The fast fixture model with 2 heads of 32 dims (vLLM's CPU attention has no kernel
    for 16-dim heads)."""
    from tests.conftest import _fast_model

    return _fast_model("qwen2", tiny_data_dir, tiny_tokenizer_dir, tmp_path_factory.mktemp("vllm") / "tiny-qwen2",
                       num_heads=2, num_kv_heads=1)


@pytest.fixture(autouse=True)
def _small_kv_cache(monkeypatch):
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB


def _cell(model_dir, data_dir, out, algorithm="grpo", **train):
    return {
        "cell": {"id": f"test/{algorithm}/sagc/seed0", "algorithm": algorithm, "sizing": "sagc"},
        "model": {"path": str(model_dir)},
        "data": {"train": str(data_dir / "train.jsonl")},
        "train": {"steps": 3, "prompts_per_step": 2, "max_prompt_length": 64, "max_completion_length": 40,
                  "learning_rate": 5e-3, "save_steps": 100, "seed": 11, **train},
        "algorithm": {"name": algorithm},
        "sizing": {"name": "sagc", "sagc": {"candidates": CANDIDATES, "tau": 2.0, "delta": 0.3, "eta": 8.0}},
        "wandb": {"mode": "disabled"},
        "device": {"use_cpu": True, "use_vllm": True, "vllm_mode": "colocate", "vllm_gpu_memory_utilization": 0.3},
        "output_dir": str(out),
    }


def _hf_greedy(model, tok, prompts, n=40):
    import torch

    out = []
    for p in prompts:
        ids = tok(p, return_tensors="pt", add_special_tokens=False).input_ids
        with torch.no_grad():
            g = model.generate(ids, max_new_tokens=n, do_sample=False, eos_token_id=tok.eos_token_id,
                               pad_token_id=tok.pad_token_id)
        out.append(g[0, ids.shape[1]:].tolist())
    return out


def test_sagc_trains_through_colocated_vllm_and_vllm_holds_the_policys_weights(vllm_model_dir, tiny_data_dir, tmp_path):
    from transformers import AutoModelForCausalLM
    from vllm import SamplingParams

    from sagc.train.config import TrainConfig
    from sagc.train.rollout import sync_weights
    from sagc.train.run import build_trainer

    trainer = build_trainer(TrainConfig.from_dict(_cell(vllm_model_dir, tiny_data_dir, tmp_path / "grpo")))
    tok = trainer.processing_class
    prompts = [trainer.train_dataset[i]["prompt"] for i in range(6)]
    trainer.train()

    history = trainer.history
    assert [h["step"] for h in history] == [1, 2, 3]
    assert all(h["group_size"] in CANDIDATES for h in history)
    for h in history:  # every row of the step came from one vLLM generate call of P x G rows
        assert [c["rows"] for c in h["calls"]] == [2 * h["group_size"]] and h["rollouts"] == 2 * h["group_size"]

    # The last update came after the last rollout: sync once more, then vLLM's greedy
    # continuations must be the policy's, token for token.
    sync_weights(trainer.vllm_generation)
    outs = trainer.vllm_generation.llm.generate(prompts, SamplingParams(temperature=0.0, max_tokens=40))
    policy = _hf_greedy(trainer.model.eval(), tok, prompts)
    assert [list(o.outputs[0].token_ids) for o in outs] == policy
    # ... and the check can fail: training moved the weights away from the base model's.
    base = _hf_greedy(AutoModelForCausalLM.from_pretrained(vllm_model_dir).eval(), tok, prompts)
    assert base != policy


def test_dapo_refill_rounds_go_through_vllm(vllm_model_dir, tiny_data_dir, tmp_path):
    from sagc.train.config import TrainConfig
    from sagc.train.run import build_trainer

    cfg = _cell(vllm_model_dir, tiny_data_dir, tmp_path / "dapo", algorithm="dapo", steps=2)
    # Every reward weight zero: every group has zero variance, so dynamic sampling refills
    # until its cap in every step: 1 + ds_max_rounds vLLM calls of P x G rows each.
    cfg["rewards"] = {"correctness": 0.0, "format": 0.0}
    cfg["algorithm"].update(overlong_weight=0.0, ds_max_rounds=2)
    trainer = build_trainer(TrainConfig.from_dict(cfg))
    trainer.train()
    for h in trainer.history:
        assert h["generate_calls"] == 3 and h["ds_rounds"] == 2
        assert [c["rows"] for c in h["calls"]] == [2 * h["group_size"]] * 3
