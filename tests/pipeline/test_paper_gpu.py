"""The paper config as a GPU job would see it, checked on CPU: every cell's micro-batch fits
the card by the written-down estimator, vLLM still gets the whole step, every evaluation
command line parses with the real entry point, and a hub world must name its device."""

from __future__ import annotations

import json
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
from sagc.train.presets import grpo_config_kwargs, vllm_max_num_seqs

REPO = Path(__file__).resolve().parents[2]

#: The two cards the paper config is written for: what the driver reports (GiB), and the
#: device keys the config's comments give for it.
CARDS = {
    "141GB": {"gpu_memory_gib": 140.4},
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
        algo, shapes = cfg.resolved.algorithm, cfg.resolved.layout  # one process's share of the step
        yield config, cell, cfg, algo, shapes, grpo_config_kwargs(cfg, algo, shapes)


@pytest.mark.parametrize("card", CARDS)
def test_every_paper_cell_fits_its_card_and_vllm_gets_the_whole_step(card):
    n = 0
    for config, cell, cfg, algo, shapes, kw in resolved_cells(paper(**CARDS[card])):
        micro = kw["per_device_train_batch_size"]
        # The loss pass: the micro-batch, run as passes of micro_batch_rows when larger.
        rows = min(micro, cfg.train.micro_batch_rows or micro)
        seq = cfg.train.max_prompt_length + cfg.train.max_completion_length
        est = cell_estimate(config, cell.model, algo, rows)
        assert est.fits, f"{cell.id}: {est.describe()}"
        assert est.micro_batch * est.tokens_per_row == rows * seq
        # The TRL 1.16 colocate formula still covers the largest step: each process's engine
        # its share of P x G_max in one pass.
        processes = cfg.launch.processes
        assert vllm_max_num_seqs(kw) * processes == cfg.train.prompts_per_step * max(cfg.sizing.group_sizes()), cell.id
        assert kw["gradient_accumulation_steps"] * algo.minibatches * micro * processes == shapes.max_rollouts
        n += 1
    assert n == 16


@pytest.mark.parametrize("card", CARDS)
def test_a_step_at_g_trains_in_the_same_passes_in_a_sagc_cell_as_in_the_fixed_g_cell(card):
    """Fair wall-clock: the loss pass of a G-step holds as many rows, and a step as many
    passes, in the SAGC cell as in the gG cell of the same model and algorithm."""
    layouts = {}
    for _config, cell, cfg, _algo, shapes, _kw in resolved_cells(paper(**CARDS[card])):
        cap = cfg.train.micro_batch_rows
        for g, shape in shapes.shapes.items():
            passes = [min(cap, shape.micro_batch)] * -(-shape.micro_batch // cap) if cap else [shape.micro_batch]
            # every micro-batch of the step, on one process
            layouts[cell.model, cell.algorithm, cell.sizing, g] = passes * shapes.steps_per_generation
    checked = 0
    for (model, algo, sizing, g), passes in layouts.items():
        if sizing == "sagc":
            assert passes == layouts[model, algo, f"g{g}", g], (model, algo, g)
            checked += 1
    assert checked == 2 * 2 * 3  # models x algorithms x the controller's candidates


def test_fp32_master_weights_do_not_fit_an_80gb_card_and_the_error_says_why():
    """Without sleep mode the vLLM share stays on the card during the loss pass. (With it, fp32
    masters fit in passes of 1-2 rows: docs/history/2026-12-02-vllm-share.md.)"""
    with pytest.raises(ConfigError) as err:
        prepare(paper(gpu_memory_gib=79, vllm_gpu_memory_utilization=0.25, vllm_sleep_mode=False), "configs/paper.yaml")
    msg = str(err.value)
    assert "no micro-batch fits device.gpu_memory_gib=79" in msg and "bf16_kahan" in msg
    assert "qwen2.5-3b/grpo/sagc/seed0" in msg


def test_a_fixed_accumulation_that_would_run_out_of_memory_is_refused():
    config = paper()
    # micro-batch: a process's share of P x G / minibatches (up to 512 / the processes)
    config["train"]["gradient_accumulation_steps"] = 1
    largest = 512 // config["launch"]["processes_per_node"]
    with pytest.raises(
        ConfigError,
        match=rf"gradient_accumulation_steps=1, train.micro_batch_rows=None do not fit"
        rf".* {largest} rows x 5120 tokens a pass",
    ):
        prepare(config, "configs/paper.yaml")


def test_gradient_accumulation_is_a_config_key():
    raw = yaml.safe_load((REPO / "configs/default.yaml").read_text())
    raw["train"]["gradient_accumulation_steps"] = 2
    config = prepare(raw, "configs/default.yaml")
    grid = Grid.from_config(config)
    cell = next(iter(grid.cells()))
    assert train_cell_config(config, grid, cell)["train"]["gradient_accumulation_steps"] == 2
    raw["train"]["gradient_accumulation_steps"] = "auto"
    with pytest.raises(ConfigError, match="needs device.gpu_memory_gib"):
        prepare(raw, "configs/default.yaml")


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
    train_stop = set(config.train.stop)
    for task in config.evaluate.tasks:
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
    """Each evaluation job of the paper's dry run writes its cell (the JSON after printf) and
    runs ``sagc.evaluate run --config`` on it: the command parses, the cell validates."""
    from sagc.evaluate.cli import build_parser
    from sagc.evaluate.config import EvalConfig

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "-n",
            "-p",
            "--directory",
            str(tmp_path),
            "--configfile",
            str(REPO / "configs/paper.yaml"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    commands = [c for c in _shell_commands(proc.stdout + proc.stderr) if "sagc.evaluate run" in c]
    parser = build_parser()
    cells = []
    for command in commands:
        args = parser.parse_args(_argv(command, "sagc.evaluate"))  # exits (SystemExit) on a bad flag
        assert args.command == "run" and str(args.config).endswith("/eval.json")
        words = shlex.split(command)
        cells.append(EvalConfig.from_dict(json.loads(words[words.index("printf") + 2])))
    assert len(cells) == 16 + 2
    for cell in cells:
        assert cell.batch_size == "auto" and cell.backend == "vllm"
        if cell.cell.endswith("/base"):
            # The resolved snapshot folder, read from resolve_hub_model's record; never a hub id.
            model = cell.cell.split("/")[0]
            assert cell.model is None and str(cell.model_json) == f"results/paper/models/{model}/base.json"
            record = tmp_path / "base.json"
            record.write_text('{"hub_id": "Qwen/Qwen2.5-3B", "path": "/cache/snapshots/abc"}')
            assert cell.model_copy(update={"model_json": str(record)}).model_folder() == Path("/cache/snapshots/abc")
        else:
            assert str(cell.model).startswith("results/paper/train/") and str(cell.model).endswith("/final")


def test_a_step_at_g_max_that_overflows_vllms_kv_cache_is_named_before_any_job(recwarn):
    """On the 141 GB card with a 0.3 vLLM share, each engine gets 512 / 4 = 128 rows of up to
    1024 + 4096 tokens at G = 16. Llama-3.2-3B's KV cache (28 layers x 8 KV heads x 128 x k,v
    x 2 bytes = 112 KiB a token) cannot hold them even before its weights are counted;
    Qwen2.5-3B's (36 x 2 x 128 x 2 x 2 = 36 KiB) holds them with 7 GB of weights counted."""
    from sagc.pipeline.config import KVCacheWarning

    config = paper(**CARDS["141GB"], vllm_gpu_memory_utilization=0.3, vllm_sleep_mode=False)
    share = config["device"]["vllm_gpu_memory_utilization"] * 139 * 2**30
    rows = 32 * 16 // config["launch"]["processes_per_node"]
    need = rows * (config["train"]["max_prompt_length"] + config["train"]["max_completion_length"])
    assert share / (28 * 8 * 128 * 2 * 2) < need < (share - 7e9) / (36 * 2 * 128 * 2 * 2)
    prepare(config, "configs/paper.yaml")
    kv = [str(w.message) for w in recwarn if issubclass(w.category, KVCacheWarning)]
    assert len(kv) == 1, kv
    assert f"{rows} rows" in kv[0] and "llama-3.2-3b/grpo/sagc/seed0" in kv[0] and "qwen2.5-3b" not in kv[0]
    assert "llama-3.2-3b/grpo/g8/seed0" not in kv[0]  # 64 rows fit


def test_the_paper_configs_vllm_share_holds_the_g_max_step_where_the_generation_phase_allows(recwarn):
    """``vllm_gpu_memory_utilization: auto`` with sleep mode: each model's cells get one share,
    the smallest (in hundredths) whose KV cache holds an engine's 128 rows of 5120 tokens next
    to its bf16 weights and workspace (Qwen2.5-3B), or where the generation phase cannot give
    that much next to the fp32 policy, reference model, AdamW and DDP buckets, the largest it
    can (Llama-3.2-3B: a share 0.01 larger would not fit), its cells named in a warning; every
    phase fits the card."""
    from sagc.pipeline.config import KVCacheWarning
    from sagc.pipeline.memory import GIB, VLLM_WORKSPACE_GIB, architecture_of, vllm_kv_capacity_tokens

    card = CARDS["141GB"]["gpu_memory_gib"]
    shares = {}
    for config, cell, cfg, algo, _shapes, kw in resolved_cells(paper(**CARDS["141GB"])):
        share = cfg.device.vllm_gpu_memory_utilization
        assert kw["vllm_gpu_memory_utilization"] == share and kw["vllm_enable_sleep_mode"] is True
        assert shares.setdefault(cell.model, share) == share, cell.id  # one engine size per model
        arch = architecture_of(config.models[cell.model], cell.model)
        rows = 32 * 16 // 4  # an engine's share of the grid's largest step: P x G_max / processes
        seq = cfg.train.max_prompt_length + cfg.train.max_completion_length
        workspace = VLLM_WORKSPACE_GIB * GIB // arch.kv_cache_bytes_per_token()
        est = cell_estimate(config, cell.model, algo, cfg.train.micro_batch_rows)
        assert est.fits and max(est.generating, est.scoring, est.total) <= card * GIB, est.describe()
        if cell.model == "qwen2.5-3b":
            assert vllm_kv_capacity_tokens(arch, share, card) >= rows * seq + workspace, cell.id
            assert vllm_kv_capacity_tokens(arch, round(share - 0.01, 2), card) < rows * seq + workspace, cell.id
        elif algo.beta > 0:  # Llama's GRPO cells: the heaviest generation phase of the model
            assert vllm_kv_capacity_tokens(arch, share, card) < rows * seq + workspace, cell.id
            assert est.generating + 0.01 * card * GIB > card * GIB, cell.id
    kv = [str(w.message) for w in recwarn if issubclass(w.category, KVCacheWarning)]
    assert len(kv) == 1 and "llama-3.2-3b/grpo/sagc/seed0" in kv[0] and "qwen2.5-3b" not in kv[0], kv
    # Llama's KV cache is 3x Qwen's per token: it needs the larger share
    assert shares["llama-3.2-3b"] > 2 * shares["qwen2.5-3b"]


def test_fp32_master_weights_and_vllm_do_not_fit_an_80gb_card_in_any_phase_and_the_error_says_why():
    """80 GB card, fp32 masters, auto: the generation phase leaves Llama's engine a few rows'
    share, and the loss pass of a single row does not fit next to the fp32 policy, reference
    model, AdamW, DDP buckets and gradients; Qwen's DAPO cells (no reference model) fit."""
    config = paper(gpu_memory_gib=79)
    with pytest.raises(ConfigError) as err:
        prepare(config, "configs/paper.yaml")
    msg = str(err.value)
    assert "no micro-batch fits device.gpu_memory_gib=79" in msg and "llama-3.2-3b/grpo/g16/seed0" in msg
    assert "loss pass" in msg and "ddp_buckets" in msg
    assert "qwen2.5-3b/dapo" not in msg
