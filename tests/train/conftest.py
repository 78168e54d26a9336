"""Fixtures of the trainer tests: a throwaway tiny world built in seconds.

A random-init 2-layer Llama (hidden 32) with a byte-level BPE trained on the prompts, and a
JSONL of modular-arithmetic prompts with ``answer``. A random model almost never samples
EOS, so every rollout would hit the length cap (max/median = 1: no straggler ever). The
tests therefore add a constant bias to EOS at sampling time (``sequence_bias``): lengths
become geometric (p ~ 0.15 per token), long-tailed like real chains of thought, and SAGC
has stragglers to react to.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_X_DISABLE_STATS", "true")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

EOS_BIAS = 4.0


def _problems(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        a, b = rng.randrange(10), rng.randrange(10)
        op = rng.choice("+-*")
        val = {"+": a + b, "-": a - b, "*": a * b}[op] % 10
        prompt = f"Compute mod 10, one step per line.\nx={a}\ny=x{op}{b}\nFind y. Put the final answer in \\boxed{{}}.\nSolution:\n"
        rows.append({"prompt": prompt, "answer": str(val), "id": i})
    return rows


@pytest.fixture(scope="session")
def train_world(tmp_path_factory) -> dict:
    """``{"data": jsonl path, "model": model folder (with tokenizer), "eos_id": int}``."""
    import torch

    from sagc.tiny.models import ModelSize, build_model, save_model
    from sagc.tiny.tokenizer import train_tokenizer

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("train_world")
    rows = _problems(64, seed=0)
    data = root / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    texts = [r["prompt"] + f"y=\\boxed{{{r['answer']}}}" for r in rows]
    tok = train_tokenizer(texts, vocab_size=300)
    size = ModelSize(
        hidden_size=32, num_layers=2, num_heads=2, num_kv_heads=1, intermediate_size=64, max_position_embeddings=128
    )
    model = build_model("llama", tok, size=size, seed=0)
    model_dir = save_model(model, tok, root / "model")
    return {"data": data, "model": model_dir, "eos_id": tok.eos_token_id, "n_prompts": len(rows)}


@pytest.fixture
def make_cell(train_world):
    """``make_cell(out_dir, **overrides)`` -> a cell config dict (see ``cell_dict``)."""
    return lambda out, **kw: cell_dict(train_world, Path(out), **kw)


def cell_dict(
    world: dict,
    out: Path,
    *,
    algorithm: str = "grpo",
    sizing: str = "sagc",
    steps: int = 4,
    prompts: int = 2,
    max_completion: int = 24,
    save_steps: int = 2,
    sagc: dict | None = None,
    algo_overrides: dict | None = None,
    wandb_mode: str = "offline",
    seed: int = 7,
) -> dict:
    """A cell config in the pipeline's shape, sized for a CPU test."""
    return {
        "cell": {
            "id": f"test/{algorithm}/{sizing}/seed0",
            "config_name": "test",
            "model": "tiny-test",
            "algorithm": algorithm,
            "sizing": sizing,
            "seed": 0,
        },
        "model": {"path": str(world["model"]), "tokenizer": None, "trust_remote_code": False},
        "data": {"train": str(world["data"])},
        "rewards": {"correctness": 1.0, "format": 0.1},
        "train": {
            "steps": steps,
            "prompts_per_step": prompts,
            "rollout_budget": None,
            "max_prompt_length": 64,
            "max_completion_length": max_completion,
            "temperature": 1.0,
            "top_p": 1.0,
            "learning_rate": 1e-3,
            "save_steps": save_steps,
            "seed": seed,
            "torch_threads": 1,
            "generation_kwargs": {"sequence_bias": [[[world["eos_id"]], EOS_BIAS]]},
        },
        "algorithm": {"name": algorithm, **(algo_overrides or {})},
        "sizing": {
            "name": sizing,
            "sagc": sagc if sagc is not None else {"candidates": [4, 8, 16], "tau": 2.0, "delta": 0.3},
        },
        "wandb": {
            "mode": wandb_mode,
            "project": "sagc-test",
            "entity": None,
            "group": "test",
            "name": f"test/{algorithm}/{sizing}",
            "dir": str(out / "wandb"),
        },
        "device": {
            "use_cpu": True,
            "bf16": False,
            "gradient_checkpointing": False,
            "use_vllm": False,
            "vllm_mode": "colocate",
            "vllm_gpu_memory_utilization": 0.3,
            "vllm_tensor_parallel_size": 1,
        },
        "output_dir": str(out),
    }
