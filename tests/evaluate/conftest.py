"""Tiny-world artefacts for the evaluation tests, built once per session with ``sagc.tiny``.

A small data set (the real split files and columns), a byte-level BPE tokenizer trained on
it in a second, and a randomly initialised tiny Qwen2 saved the way the pipeline saves
models (weights + ``PreTrainedTokenizerFast`` in one folder). Kept local to
``tests/evaluate`` so these tests do not depend on the shared fixtures' sizes.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def eval_data_dir(tmp_path_factory):
    from sagc.tiny.task import TaskParams, write_splits

    d = tmp_path_factory.mktemp("eval_data")
    write_splits(d, TaskParams(n_train=300, n_eval=24, n_heldout=12), seed=7)
    return d


@pytest.fixture(scope="session")
def eval_model_dir(tmp_path_factory, eval_data_dir):
    import torch

    from sagc.tiny.models import ModelSize, build_model, save_model
    from sagc.tiny.task import iter_texts
    from sagc.tiny.tokenizer import train_tokenizer

    torch.set_num_threads(1)
    tok = train_tokenizer(iter_texts(eval_data_dir), vocab_size=320)
    size = ModelSize(
        hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64, max_position_embeddings=512
    )
    model = build_model("qwen2", tok, size=size, seed=3)
    return save_model(model, tok, tmp_path_factory.mktemp("model") / "tiny-qwen2")
