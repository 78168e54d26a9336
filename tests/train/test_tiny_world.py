"""The trainer on the shared tiny world (tests/conftest.py): the pipeline's real inputs."""

from __future__ import annotations

import math

import pytest

from sagc.train.config import TrainConfig

pytestmark = pytest.mark.slow


def test_trains_on_the_tiny_world_with_registry_rewards(tiny_qwen2_dir, tiny_data_dir, make_cell, tmp_path):
    from sagc.train.run import run_cell

    cfg = make_cell(
        tmp_path / "cell",
        algorithm="dapo",
        sizing="sagc",
        steps=2,
        save_steps=10,
        max_completion=64,
        wandb_mode="disabled",
    )
    cfg["model"]["path"] = str(tiny_qwen2_dir)
    cfg["data"]["train"] = str(tiny_data_dir / "train.jsonl")
    cfg["train"]["max_prompt_length"] = 96
    del cfg["train"]["generation_kwargs"]  # the warm-started model ends its answers by itself
    done = run_cell(TrainConfig.from_dict(cfg))
    assert done["steps"] == 2 and done["updates"] == 4
    for h in done["history"]:
        assert h["group_size"] in (4, 8, 16) and math.isfinite(h["loss"])
        assert 1 <= h["length_median"] <= h["length_max"] <= 64
    # The tiny world's tokenizer is detected (not swapped for a Qwen2Tokenizer) and saved.
    from sagc.tiny.tokenizer import load_tokenizer

    final = load_tokenizer(tmp_path / "cell" / "final")
    base = load_tokenizer(tiny_qwen2_dir)
    text = "Compute mod 10, one step per line.\nd=7"
    assert final(text)["input_ids"] == base(text)["input_ids"]
