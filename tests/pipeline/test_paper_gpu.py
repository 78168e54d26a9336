"""The paper config as a GPU job would see it, checked on CPU: every cell's micro-batch fits
the card by the written-down estimator, vLLM still gets the whole step, every evaluation
command line parses with the real entry point, and a hub world must name its device."""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sagc.pipeline.cells import train_cell_config
from sagc.pipeline.config import ConfigError, prepare
from sagc.pipeline.grid import Grid
from sagc.pipeline.memory import PAPER_MODEL_CONFIGS, Architecture, cell_estimate
from sagc.train.config import TrainConfig
from sagc.train.presets import grpo_config_kwargs, resolve_algorithm, step_shapes, vllm_max_num_seqs

REPO = Path(__file__).resolve().parents[2]

#: The two cards the paper config is written for: what the driver reports (GiB), and the
#: device keys the config's comments give for it.
CARDS = {
    "141GB": {"gpu_memory_gib": 139},
    "80GB": {"gpu_memory_gib": 79, "master_weights": "bf16_kahan", "vllm_gpu_memory_utilization": 0.25},
}


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch):
    monkeypatch.chdir(REPO)


def paper(**device) -> dict:
    config = yaml.safe_load((REPO / "configs/paper.yaml").read_text())
    config["device"].update(device)
    return config


def resolved_cells(config: dict):
    config = prepare(config, "configs/paper.yaml")
    grid = Grid.from_config(config)
    for cell in grid.cells():
        cfg = TrainConfig.from_dict(train_cell_config(config, grid, cell), check_vllm=False)
        algo = resolve_algorithm(cfg.algorithm, cfg.train.max_completion_length)
        # one process's share of the step (the cell's launch: several GPUs)
        shapes = step_shapes(cfg.train, algo, cfg.sizing.group_sizes(), processes=cfg.launch.processes)
        yield config, cell, cfg, algo, shapes, grpo_config_kwargs(cfg, algo, shapes)


@pytest.mark.parametrize("card", CARDS)
def test_every_paper_cell_fits_its_card_and_vllm_gets_the_whole_step(card):
    n = 0
    for config, cell, cfg, algo, shapes, kw in resolved_cells(paper(**CARDS[card])):
        micro = kw["per_device_train_batch_size"]
        seq = cfg.train.max_prompt_length + cfg.train.max_completion_length
        est = cell_estimate(config, cell.model, algo, micro)
        assert est.fits, f"{cell.id}: {est.describe()}"
        assert est.micro_batch * est.tokens_per_row == micro * seq
        # The TRL 1.16 colocate formula still covers the largest step: each process's engine
        # its share of P x G_max in one pass.
        processes = cfg.launch.processes
        assert vllm_max_num_seqs(kw) * processes == cfg.train.prompts_per_step * max(cfg.sizing.group_sizes()), \
            cell.id
        assert kw["gradient_accumulation_steps"] * algo.minibatches * micro * processes == shapes.max_rollouts
        n += 1
    assert n == 16


def test_fp32_master_weights_do_not_fit_an_80gb_card_and_the_error_says_why():
    with pytest.raises(ConfigError) as err:
        prepare(paper(gpu_memory_gib=79, vllm_gpu_memory_utilization=0.25), "configs/paper.yaml")
    msg = str(err.value)
    assert "no micro-batch fits device.gpu_memory_gib=79" in msg and "bf16_kahan" in msg
    assert "qwen2.5-3b/grpo/sagc/seed0" in msg


def test_a_fixed_accumulation_that_would_run_out_of_memory_is_refused():
    config = paper()
    # micro-batch: a process's share of P x G / minibatches (up to 512 / the processes)
    config["train"]["gradient_accumulation_steps"] = 1
    largest = 512 // config["launch"]["processes_per_node"]
    with pytest.raises(ConfigError, match=rf"gradient_accumulation_steps=1 does not fit.*micro-batch {largest} "):
        prepare(config, "configs/paper.yaml")


def test_gradient_accumulation_is_a_config_key():
    config = yaml.safe_load((REPO / "configs/default.yaml").read_text())
    config["train"]["gradient_accumulation_steps"] = 2
    config = prepare(config, "configs/default.yaml")
    grid = Grid.from_config(config)
    cell = next(iter(grid.cells()))
    assert train_cell_config(config, grid, cell)["train"]["gradient_accumulation_steps"] == 2
    config["train"]["gradient_accumulation_steps"] = "auto"
    with pytest.raises(ConfigError, match="needs device.gpu_memory_gib"):
        prepare(config, "configs/default.yaml")


def test_the_estimator_agrees_with_published_sizes():
    """Parameter counts as published (Qwen2.5-3B: 3.09B; Llama-3.2-3B: 3.21B), and activation
    memory with checkpointing in the 0.3-0.4 MB per token (bf16) a 3B model is known for."""
    qwen = Architecture.from_config(PAPER_MODEL_CONFIGS["Qwen/Qwen2.5-3B"])
    llama = Architecture.from_config(PAPER_MODEL_CONFIGS["meta-llama/Llama-3.2-3B"])
    assert qwen.params == pytest.approx(3.09e9, rel=0.01)
    assert llama.params == pytest.approx(3.21e9, rel=0.01)
    for arch in (qwen, llama):
        assert 0.3e6 <= arch.activation_elements_per_token(True) * 2 <= 0.4e6


def test_hub_world_without_a_device_block_fails_before_any_job():
    config = paper()
    del config["device"]
    with pytest.raises(ConfigError, match=r"config key 'device.use_cpu': world 'hub' needs an explicit device"):
        prepare(config, "configs/paper.yaml")
    config["device"] = {"bf16": True}  # a block that still leaves the CPU default implicit
    with pytest.raises(ConfigError, match="device.use_cpu"):
        prepare(config, "configs/paper.yaml")
    config["device"] = {"use_cpu": True}  # CPU on purpose: accepted
    config["train"]["gradient_accumulation_steps"] = 1
    prepare(config, "configs/paper.yaml")


def test_training_stops_like_the_evaluation():
    """Every evaluation stop, text or chat end token, stops training too."""
    from sagc.evaluate.taskcfg import load_task_config

    config = prepare(paper(), "configs/paper.yaml")
    train_stop = set(config["train"]["stop"])
    for task in config["evaluate"]["tasks"]:
        until = set(load_task_config(task)["generation_kwargs"]["until"])
        assert any(re.fullmatch(r"<\|[^|]+\|>", s) for s in until), task  # chat end tokens are there
        assert until <= train_stop, task


def _shell_commands(output: str) -> list[str]:
    return [m.group(1) for m in re.finditer(r"^Shell command: (.+)$", output, re.M) if m.group(1) != "None"]


def _argv(command: str, module: str) -> list[str]:
    """The arguments after ``python -m <module>`` up to the first redirection or ``&&``."""
    words = shlex.split(command)
    start = words.index(module) + 1
    stop = next((i for i, w in enumerate(words[start:], start) if w in (">", "&&", "2>&1", "|")), len(words))
    return words[start:stop]


def test_every_paper_evaluation_command_line_parses_with_the_entry_point(tmp_path):
    from sagc.evaluate.cli import build_parser, model_folder

    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "-p", "--directory", str(tmp_path),
         "--configfile", str(REPO / "configs/paper.yaml")],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    commands = [c for c in _shell_commands(proc.stdout + proc.stderr) if "sagc.evaluate" in c]
    parser = build_parser()
    runs = []
    for command in commands:
        args = parser.parse_args(_argv(command, "sagc.evaluate"))  # exits (SystemExit) on a bad flag
        if args.command == "run":
            runs.append(args)
    assert len(runs) == 16 + 2
    for args in runs:
        assert args.batch_size == "auto" and args.backend == "vllm"
        if args.cell.endswith("/base"):
            # The resolved snapshot folder, read from resolve_hub_model's record; never a hub id.
            model = args.cell.split("/")[0]
            assert args.model is None and str(args.model_json) == f"results/paper/models/{model}/base.json"
            record = tmp_path / "base.json"
            record.write_text('{"hub_id": "Qwen/Qwen2.5-3B", "path": "/cache/snapshots/abc"}')
            assert model_folder(argparse.Namespace(model=None, model_json=record)) == Path("/cache/snapshots/abc")
        else:
            assert str(args.model).startswith("results/paper/train/") and str(args.model).endswith("/final")
