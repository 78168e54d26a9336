"""benchmarks/gpu_check.py at tiny size on CPU: the paper's GRPO/SAGC cell resolved by the
pipeline, trained for the steps asked, checkpointed, and its layout and memory estimate
reported as the cell config resolves them."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "gpu_check.py"
STEPS, PROMPTS, MAX_COMPLETION = 2, 2, 16


def _check(out: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO / "src"),
        "OMP_NUM_THREADS": "1",
        "WANDB_MODE": "offline",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "WANDB_X_DISABLE_STATS": "true",
    }
    env.pop("WANDB_SERVICE", None)
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--tiny", "--out", str(out), *extra],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu_check") / "out"
    proc = _check(out, "--steps", str(STEPS), "--prompts", str(PROMPTS), "--max-completion", str(MAX_COMPLETION))
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads((out / "gpu_check.json").read_text())
    return out, proc, result


def _paper_config() -> dict:
    return yaml.safe_load((REPO / "configs/paper.yaml").read_text())


def _independent_cell(monkeypatch) -> tuple[dict, dict]:
    """The same cell, resolved here: the paper config on its own card, one process, the
    tiny run's P and completion cap; then CPU and HF generate, as the check runs it."""
    from sagc.pipeline.cells import train_cell_config
    from sagc.pipeline.config import prepare
    from sagc.pipeline.grid import Cell, Grid

    monkeypatch.chdir(REPO)
    config = _paper_config()
    if "launch" in config:
        config["launch"] = {"processes_per_node": 1}
    config["train"].update(prompts_per_step=PROMPTS, max_completion_length=MAX_COMPLETION)
    config = prepare(config, "configs/paper.yaml")
    cell = train_cell_config(config, Grid.from_config(config), Cell("qwen2.5-3b", "grpo", "sagc", 0))
    cell["device"].update(use_cpu=True, use_vllm=False)
    cell["train"]["steps"] = STEPS
    del cell["resolved"]  # edited here: resolved again when loaded
    return config, cell


def test_it_trains_the_steps_asked_at_the_papers_candidates_and_writes_a_checkpoint(tiny_run):
    out, proc, r = tiny_run
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == r  # the last line is the JSON
    assert r["mode"] == "tiny" and r["cell"]["id"] == "qwen2.5-3b/grpo/sagc/seed0"
    candidates = _paper_config()["sagc"]["candidates"]
    assert r["cell"]["candidates"] == candidates
    assert r["steps_trained"] == STEPS and [s["step"] for s in r["steps"]] == list(range(1, STEPS + 1))
    assert r["updates"] == STEPS * r["layout"]["updates_per_rollout"]
    for step in r["steps"]:
        g = step["group_size"]
        assert g in candidates
        assert step["rollouts"] == PROMPTS * g == r["layout"]["by_group_size"][str(g)]["rollouts"]
        assert 0 < step["rollout_s"] <= step["step_s"]
        assert 0 < step["length_max"] <= MAX_COMPLETION
    assert r["checkpoints"], "no checkpoint was written"
    for ckpt in r["checkpoints"]:
        folder = out / "train" / "checkpoints" / ckpt["name"]
        assert ckpt["bytes"] > 0 and ckpt["save_s"] > 0
        assert (folder / "sagc_state.json").is_file() and (folder / "model.safetensors").stat().st_size > 0
    assert r["checkpoints"][-1]["step"] == STEPS


def test_the_paper_settings_are_kept_and_the_differences_named(tiny_run):
    _, proc, r = tiny_run
    paper = _paper_config()
    s = r["settings"]
    assert s["bf16"] and s["gradient_checkpointing"] and s["master_weights"] == paper["device"]["master_weights"]
    assert s["max_prompt_length"] == paper["train"]["max_prompt_length"] and s["stop"] == paper["train"]["stop"]
    assert s["use_cpu"] and not s["use_vllm"] and s["max_completion_length"] == MAX_COMPLETION
    assert r["trainer_args"]["bf16"] and r["trainer_args"]["gradient_checkpointing"]
    assert r["trainer_args"]["weights_dtype"] == "float32"  # fp32 master weights under bf16 autocast
    assert {"use_vllm", "max_completion_length", "prompts_per_step", "vocab_size"} <= set(r["differs_from_paper"])
    # a random model of the published architecture: the estimator counts its parameters exactly
    assert r["model"]["architecture"] == "Qwen2ForCausalLM" and r["model"]["vocab_size"] == r["model"]["tokenizer_size"]
    assert r["model"]["params"] == r["model"]["params_by_estimator"] > 0
    assert "real vocab is 151,936" in proc.stdout


def test_the_layout_and_estimate_are_the_ones_the_cell_config_resolves(tiny_run, monkeypatch):
    from sagc.pipeline.memory import GIB, cell_estimate
    from sagc.train.config import TrainConfig

    _, _, r = tiny_run
    config, cell = _independent_cell(monkeypatch)
    cfg = TrainConfig.from_dict(cell, check_vllm=False)
    algo, shapes = cfg.resolved.algorithm, cfg.resolved.layout
    lay = r["layout"]
    assert (
        lay["gradient_accumulation_steps"]
        == cell["train"]["gradient_accumulation_steps"]
        == shapes.gradient_accumulation_steps
    )
    assert lay["steps_per_generation"] == shapes.steps_per_generation
    assert lay["per_device_train_batch_size"] == shapes.max_micro_batch
    assert lay["by_group_size"] == {
        str(g): {"prompts": s.prompts, "rollouts": s.rollouts, "micro_batch": s.micro_batch}
        for g, s in shapes.shapes.items()
    }
    # what the trainer got is that layout
    assert r["trainer_args"]["per_device_train_batch_size"] == shapes.max_micro_batch
    assert r["trainer_args"]["gradient_accumulation_steps"] == shapes.gradient_accumulation_steps

    m = r["memory"]
    assert m["card_gib"] == _paper_config()["device"]["gpu_memory_gib"]
    assert isinstance(m["estimate_gib"], float) and math.isfinite(m["estimate_gib"]) and m["estimate_gib"] > 0
    sized = cell_estimate(config, "qwen2.5-3b", algo, shapes.max_micro_batch)
    assert sized.fits and m["estimate_with_vllm_share_gib"] == pytest.approx(sized.total / GIB, abs=1e-3)
    no_vllm = config.model_copy(update={"device": config.device.model_copy(update={"use_vllm": False})})
    assert m["estimate_gib"] == pytest.approx(
        cell_estimate(no_vllm, "qwen2.5-3b", algo, shapes.max_micro_batch).total / GIB, abs=1e-3
    )
    assert m["estimate_gib"] < m["estimate_with_vllm_share_gib"]
    assert 0 < m["estimate_this_model_gib"] < m["estimate_gib"]  # the tiny model is not the full-size one
    assert m["peak_allocated_gib"] is None and "not measured" in m["measured"] and m["max_rss_gib"] > 0


def test_a_folder_it_did_not_make_is_refused(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    proc = _check(out)
    assert proc.returncode != 0
    assert f"--out {out} is not empty and was not made by benchmarks/gpu_check.py" in proc.stderr
    assert (out / "notes.txt").read_text() == "keep me"
