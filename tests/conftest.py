"""Shared session fixtures: a small tiny-world built once per test session.

Stable names (other parts' tests use them; do not rename):

* ``tiny_data_dir``      -> folder with ``train.jsonl`` (200 rows), ``eval.jsonl`` (32),
  ``heldout.jsonl`` (16), ``task.json``; rows have ``prompt``, ``answer``, ``solution``,
  ``n_steps`` (see ``sagc.tiny.task``).
* ``tiny_tokenizer_dir`` -> tokenizer folder (load it with ``sagc.tiny.tokenizer.load_tokenizer``).
* ``tiny_qwen2_dir``     -> ``Qwen2ForCausalLM`` folder (tokenizer saved inside).
* ``tiny_llama_dir``     -> ``LlamaForCausalLM`` folder (tokenizer saved inside).
* ``tiny_model_dirs``    -> ``{"tiny-qwen2": path, "tiny-llama": path}``.

The models are *fast*, not good: a small shape (~0.1M parameters) with ~13 s of warm
start each: sampled at temperature 1 they mostly follow the solution format and stop with
eos (format reward varies within groups), sometimes check their work, and are right only a few
percent of the time (correctness is mostly 0). Tests that need the
calibrated default models build them with ``python -m sagc.tiny base-model``.
Everything is seeded, so fixtures are identical across runs.
"""

from __future__ import annotations

import os

import pytest

# Cheap, reproducible CPU runs on shared cores.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

FIXTURE_SEED = 1234


@pytest.fixture(scope="session")
def tiny_data_dir(tmp_path_factory):
    from sagc.tiny.build import build_data
    from sagc.tiny.task import TaskParams

    out = tmp_path_factory.mktemp("tiny_world") / "data"
    build_data(out, seed=FIXTURE_SEED, params=TaskParams(n_train=200, n_eval=32, n_heldout=16))
    return out


@pytest.fixture(scope="session")
def tiny_tokenizer_dir(tiny_data_dir, tmp_path_factory):
    from sagc.tiny.build import build_tokenizer

    out = tmp_path_factory.mktemp("tiny_world") / "tokenizer"
    build_tokenizer(tiny_data_dir, out)
    return out


def _fast_model(arch, data_dir, tokenizer_dir, out, num_heads=4, num_kv_heads=2):
    import torch

    from sagc.tiny.build import build_base_model
    from sagc.tiny.models import ModelSize
    from sagc.tiny.warmstart import WarmStartParams

    torch.set_num_threads(1)
    build_base_model(
        arch,
        data_dir,
        tokenizer_dir,
        out,
        seed=FIXTURE_SEED,
        size=ModelSize(
            hidden_size=64, num_layers=2, num_heads=num_heads, num_kv_heads=num_kv_heads, intermediate_size=128
        ),
        # ~13 s per model on one thread: enough to learn the format (about 2/3 of sampled
        # completions end with one box), not the arithmetic (accuracy a few percent).
        warm=WarmStartParams(
            steps=120, batch_size=16, learning_rate=5e-3, warmup_steps=5, check_frac=0.05, max_length=160
        ),
        eval_samples=0,
    )
    return out


@pytest.fixture(scope="session")
def tiny_qwen2_dir(tiny_data_dir, tiny_tokenizer_dir, tmp_path_factory):
    return _fast_model("qwen2", tiny_data_dir, tiny_tokenizer_dir, tmp_path_factory.mktemp("tiny_world") / "tiny-qwen2")


@pytest.fixture(scope="session")
def tiny_llama_dir(tiny_data_dir, tiny_tokenizer_dir, tmp_path_factory):
    return _fast_model("llama", tiny_data_dir, tiny_tokenizer_dir, tmp_path_factory.mktemp("tiny_world") / "tiny-llama")


@pytest.fixture(scope="session")
def tiny_model_dirs(tiny_qwen2_dir, tiny_llama_dir):
    return {"tiny-qwen2": tiny_qwen2_dir, "tiny-llama": tiny_llama_dir}
