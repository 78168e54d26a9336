"""The grid's disk need (sagc.pipeline.disk): the arithmetic against published parameter
counts, real checkpoints against the estimate, the warning on a short filesystem, the line
a real dry run prints, and the W&B advice and sync command for compute nodes."""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import yaml

from sagc.pipeline import disk, wandb_sync
from sagc.pipeline.config import prepare
from sagc.pipeline.grid import Grid
from tests.pipeline.test_dryrun import snakemake
from tests.pipeline.test_paper_gpu import CARDS
from tests.train import conftest as train_conftest
from tests.train.conftest import cell_dict

REPO = Path(__file__).resolve().parents[2]
#: Published parameter counts (model cards): what the estimate is checked against.
PUBLISHED = {"qwen2.5-3b": 3.09e9, "llama-3.2-3b": 3.21e9}
#: The trainer tests' throwaway world (a random tiny Llama and its prompts), as a fixture here.
train_world = train_conftest.train_world


def config_of(name: str, **device):
    config = yaml.safe_load((REPO / "configs" / name).read_text())
    config.setdefault("device", {}).update(device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the paper config's KV-cache warning
        return prepare(config, f"configs/{name}")


def by_model(config) -> dict[str, disk.CellDisk]:
    out = {}
    for cell, d in disk.plan(config, Grid.from_config(config)):
        assert out.setdefault(cell.model, d) == d, "every cell of a model needs the same"
    return out


@pytest.mark.parametrize("card", CARDS)
def test_a_paper_checkpoint_is_weights_and_adamw_from_the_published_counts(card):
    """fp32 master weights: 4 bytes of weights + 8 of AdamW moments a parameter, the final
    model 4; bf16 weights with the compensated AdamW: 2 + 8 (fp32 moments) + 2 (bf16
    compensation), the final model 2."""
    weights, optimizer = {"141GB": (4, 8), "80GB": (2, 8 + 2)}[card]
    for model, d in by_model(config_of("paper.yaml", **CARDS[card])).items():
        n = PUBLISHED[model]
        assert d.checkpoint == pytest.approx(n * (weights + optimizer), rel=0.01)
        assert d.final == pytest.approx(n * weights, rel=0.01)
        kept = yaml.safe_load((REPO / "configs/paper.yaml").read_text())["train"]["save_total_limit"]
        assert (d.kept, d.at_once) == (kept, kept + 1)  # a save writes one more before deleting the oldest
        assert d.footprint == kept * d.checkpoint + d.final and d.peak == (kept + 1) * d.checkpoint


def test_the_paper_grid_total_and_its_line():
    config = config_of("paper.yaml")
    rep = disk.report(config, Grid.from_config(config), free_bytes=lambda path: 10**15)
    # 8 cells per model (2 algorithms x 4 sizings x 1 seed), fp32 master weights, the
    # config's number of checkpoints kept (and one more while a save writes the next)
    kept = config.train.save_total_limit
    total = sum(8 * (kept * n * 12 + n * 4) for n in PUBLISHED.values())
    peak = sum(8 * (kept + 1) * n * 12 for n in PUBLISHED.values())
    assert rep.total == pytest.approx(total, rel=0.01) and rep.peak == pytest.approx(peak, rel=0.01)
    assert rep.remaining == rep.peak and not rep.short and rep.warning() is None
    line = rep.line()
    ckpts = f"{kept} checkpoints?"
    m = re.fullmatch(
        rf"disk: 8 qwen2\.5-3b cells x \({ckpts} x ([\d.]+) GB \+ final ([\d.]+) GB\) \+ "
        rf"8 llama-3\.2-3b cells x \({ckpts} x ([\d.]+) GB \+ final ([\d.]+) GB\) = ([\d.]+ [GT]B) "
        r"under results/paper, ([\d.]+ [GT]B) at peak \(.*\) \(free: 1000 TB\)",
        line,
    )
    assert m, line
    qwen, llama = PUBLISHED["qwen2.5-3b"], PUBLISHED["llama-3.2-3b"]
    expected = (qwen * 12, qwen * 4, llama * 12, llama * 4, total, peak)
    for shown, value in zip(m.groups(), expected):
        number, unit = (shown.split() + ["GB"])[:2]
        assert float(number) * {"GB": 1e9, "TB": 1e12}[unit] == pytest.approx(value, rel=0.01), line


def test_fewer_saves_than_the_limit_keep_every_one_and_never_rotate():
    d = disk.cell_disk("m", 1000, weights_dtype="float32", steps=32, save_steps=16, save_total_limit=2)
    assert (d.kept, d.at_once, d.checkpoint, d.final) == (2, 2, 12_000, 4_000)
    assert d.peak == d.footprint == 28_000
    d = disk.cell_disk("m", 1000, weights_dtype="bfloat16", steps=5, save_steps=2, save_total_limit=1)
    assert (d.kept, d.at_once, d.checkpoint, d.final) == (1, 2, 12_000, 2_000)  # saves at 2, 4, 5
    assert d.peak == 24_000 and d.footprint == 14_000


def test_a_short_filesystem_warns_and_finished_cells_need_nothing_more(tmp_path, monkeypatch, recwarn):
    monkeypatch.chdir(tmp_path)
    config = config_of("paper.yaml")
    grid = Grid.from_config(config)
    asked = []

    def tiny_free(path):
        asked.append(path)
        return 10**9

    line = disk.check_disk(config, grid, free_bytes=tiny_free)
    assert asked == [tmp_path]  # results/ does not exist yet: its nearest existing parent
    (w,) = [w for w in recwarn if issubclass(w.category, disk.DiskSpaceWarning)]
    peak = sum(8 * (config.train.save_total_limit + 1) * n * 12 for n in PUBLISHED.values())
    shown = re.search(r"may still write up to ([\d.]+) TB", str(w.message))
    assert shown and float(shown.group(1)) == pytest.approx(peak / 1e12, rel=0.01)
    assert f"{tmp_path} has 1.00 GB free" in str(w.message) and line.endswith("(free: 1.00 GB)")

    # 15 cells finished, one under way with a checkpoint on disk (a sparse file: no blocks)
    cells = list(grid.cells())
    for cell in cells[:-1]:
        Path(grid.train_dir(cell)).mkdir(parents=True)
        Path(grid.train_dir(cell), "done.json").write_text("{}")
    last = Path(grid.train_dir(cells[-1]), "checkpoints", "checkpoint-25")
    last.mkdir(parents=True)
    with open(last / "optimizer.pt", "wb") as fh:
        fh.truncate(20 * 10**9)
    recwarn.clear()
    rep = disk.report(config, grid, free_bytes=tiny_free)
    assert asked[-1] == tmp_path / "results" / "paper"
    n = PUBLISHED[cells[-1].model]
    at_once = config.train.save_total_limit + 1  # checkpoints on disk during a save
    assert rep.remaining == pytest.approx(at_once * n * 12 - 20e9, rel=0.01)
    assert "; 1 cells unfinished, still to write" in rep.line() and rep.short
    rep = disk.report(config, grid, free_bytes=lambda path: 10**11)
    assert not rep.short and rep.warning() is None  # less than 100 GB to write, 100 GB free

    Path(grid.train_dir(cells[-1]), "done.json").write_text("{}")
    assert disk.report(config, grid, free_bytes=tiny_free).remaining == 0
    assert disk.check_disk(config, grid, free_bytes=tiny_free)
    assert not [w for w in recwarn if issubclass(w.category, disk.DiskSpaceWarning)]


class _Tokenizer:
    """What ``build_model`` reads of a tokenizer: its length and two token ids."""

    eos_token_id, pad_token_id = 0, 1

    def __len__(self):
        from sagc.tiny.defaults import DEFAULT_VOCAB_SIZE

        return DEFAULT_VOCAB_SIZE


def test_the_tiny_worlds_counts_are_the_models_it_builds(tmp_path, monkeypatch):
    """Before the base models exist: their ModelSize (tiny.model and the model's flags) at the
    tokenizer's vocabulary bound; after: the built model's config.json."""
    from sagc.tiny.models import ModelSize, build_model, n_parameters

    monkeypatch.chdir(tmp_path)
    config = config_of("default.yaml")
    config.models["tiny-llama"].tiny_model = {"hidden_size": 96, "num_layers": 3, "warm_steps": 1500}
    grid = Grid.from_config(config)
    for name, spec in config.models.items():
        size = ModelSize(**{k: v for k, v in spec.tiny_model.items() if not k.startswith("warm_")})
        model = build_model(spec.arch, _Tokenizer(), size=size)
        assert disk.model_params(config, grid, name) == (n_parameters(model), None), name
        built = tmp_path / grid.root / "models" / name / "base"
        built.mkdir(parents=True)
        config_json = json.loads(model.config.to_json_string())
        config_json["vocab_size"] = 360  # what the trained tokenizer gave
        (built / "config.json").write_text(json.dumps(config_json))
        fewer = n_parameters(model) - (len(_Tokenizer()) - 360) * size.hidden_size  # tied embeddings
        assert disk.model_params(config, grid, name) == (fewer, None), name


def test_the_default_grid_needs_about_a_gigabyte_and_no_warning(tmp_path, monkeypatch, recwarn):
    monkeypatch.chdir(tmp_path)
    config = config_of("default.yaml")
    n = 2 * 4 * len(config.seeds)  # cells per model: 2 algorithms x 4 sizings x the report seeds
    line = disk.check_disk(config, Grid.from_config(config), free_bytes=lambda path: 10 * 10**9)
    m = re.fullmatch(
        rf"disk: {n} tiny-qwen2 cells x \(2 checkpoints x ([\d.]+) MB \+ final ([\d.]+) MB\) \+ "
        rf"{n} tiny-llama cells x \(2 checkpoints x [\d.]+ MB \+ final [\d.]+ MB\) = ([\d.]+) ([MG])B "
        r"under results/default \(free: 10\.0 GB\)",
        line,
    )  # 2 saves of 2 kept: no peak
    assert m, line
    ckpt, final = float(m[1]), float(m[2])
    total = float(m[3]) * (1000 if m[4] == "G" else 1)
    assert ckpt == pytest.approx(3 * final, rel=0.01) and 500 < total < 1500
    assert not [w for w in recwarn if issubclass(w.category, disk.DiskSpaceWarning)]


def test_a_hub_model_without_a_count_is_unknown_not_guessed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = yaml.safe_load((REPO / "configs/paper.yaml").read_text())
    config["models"]["mystery"] = {"hub_id": "sagc-test/not-a-cached-model"}
    config["train"]["gradient_accumulation_steps"] = 16  # auto needs the architecture
    config["device"].update(gpu_memory_gib=None, vllm_gpu_memory_utilization=0.3)  # auto needs the card too
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = prepare(config, "configs/paper.yaml")
    rep = disk.report(config, Grid.from_config(config), free_bytes=lambda path: 10**9)
    assert rep.unknown == {
        "mystery": "models.mystery: 'sagc-test/not-a-cached-model' is not in the local Hugging Face cache"
    }
    line = rep.line()
    assert "8 mystery cells x unknown (models.mystery: " in line and re.search(r"= at least [\d.]+ [GT]B", line)
    assert rep.short  # the known part alone exceeds 1 GB
    config.models["qwen2.5-3b"].strategy = "zero3"  # DeepSpeed writes its own layout
    assert "8 qwen2.5-3b cells x unknown (strategy zero3: " in disk.report(config, Grid.from_config(config)).line()
    config.models = {"mystery": config.models["mystery"]}
    assert " = unknown under results/paper" in disk.report(config, Grid.from_config(config)).line()


@pytest.mark.parametrize("master_weights", ["fp32", "bf16_kahan"])
def test_a_real_checkpoint_and_final_model_are_what_the_estimate_says(train_world, tmp_path, master_weights):
    """Two steps, a checkpoint each, save_total_limit 1: one checkpoint is left (the newest,
    resumable), and its weights and optimizer files are the estimate's bytes."""
    from sagc.pipeline.memory import Architecture
    from sagc.train.checkpoint import latest_complete_checkpoint
    from sagc.train.config import TrainConfig
    from sagc.train.run import run_cell

    out = tmp_path / "cell"
    cell = cell_dict(train_world, out, steps=2, save_steps=1, sizing="g4")
    cell["train"]["save_total_limit"] = 1
    if master_weights == "bf16_kahan":
        cell["device"].update(bf16=True, master_weights="bf16_kahan")
    cfg = TrainConfig.from_dict(cell)
    run_cell(cfg)
    n = Architecture.from_config(json.loads((train_world["model"] / "config.json").read_text())).params
    d = disk.cell_disk("m", n, weights_dtype=cfg.device.weights_dtype, steps=2, save_steps=1, save_total_limit=1)
    ckpts = sorted((out / "checkpoints").glob("checkpoint-*"))
    assert [c.name for c in ckpts] == ["checkpoint-2"] and latest_complete_checkpoint(out / "checkpoints") == ckpts[0]
    big = sum(os.path.getsize(ckpts[0] / f) for f in ("model.safetensors", "optimizer.pt"))
    # the files' headers and pickling: a few kB on a model of ~28k parameters
    assert d.checkpoint <= big <= d.checkpoint * 1.05 + 20_000, (big, d.checkpoint)
    final = os.path.getsize(out / "final" / "model.safetensors")
    assert d.final <= final <= d.final + 5_000, (final, d.final)
    # everything else in a checkpoint (tokenizer, RNG, scheduler, states) stays small
    rest = sum(p.stat().st_size for p in ckpts[0].iterdir()) - big
    assert rest < 100_000


def _warned(output: str, category: type) -> list[str]:
    return [line for line in output.splitlines() if f" {category.__name__}: " in line]


def test_every_dry_run_prints_the_line_and_warns_only_when_short(tmp_path):
    import shutil

    rc, out = snakemake("-n", "--directory", str(tmp_path))
    assert rc == 0, out
    assert re.search(
        r"^disk: \d+ tiny-qwen2 cells x \(2 checkpoints x [\d.]+ MB .* under results/default "
        r"\(free: ",
        out,
        re.M,
    ), out
    assert not _warned(out, disk.DiskSpaceWarning)

    rc, out = snakemake("-n", "--directory", str(tmp_path), "--configfile", str(REPO / "configs/paper.yaml"))
    assert rc == 0, out
    line = re.search(r"^disk: 8 qwen2\.5-3b cells x \(1 checkpoint x 37\.0 GB \+ final 12\.3 GB\) .*$", out, re.M)
    assert line, out
    assert line.group(0).split(" (free: ")[0] + " (free: ...)" in (REPO / "docs" / "cluster.md").read_text()
    peak = sum(8 * 3 * n * 12 for n in PUBLISHED.values())
    short = shutil.disk_usage(tmp_path).free < peak
    assert len(_warned(out, disk.DiskSpaceWarning)) == short, out
    assert not _warned(out, wandb_sync.WandbModeWarning), "the paper config logs offline"


def test_online_wandb_on_the_slurm_profile_prints_the_offline_advice(tmp_path):
    overlay = tmp_path / "online.yaml"
    overlay.write_text("wandb: {mode: online}\n")
    rc, out = snakemake(
        "-n",
        "--directory",
        str(tmp_path),
        "--profile",
        str(REPO / "profiles/slurm"),
        "--configfile",
        str(REPO / "configs/paper.yaml"),
        str(overlay),
    )
    assert rc == 0, out
    (advice,) = _warned(out, wandb_sync.WandbModeWarning)
    assert "config key 'wandb.mode' is online" in advice and "set wandb.mode: offline" in advice
    assert advice.endswith("wandb sync -p sagc-repro results/paper/train/*/*/*/seed*/wandb/wandb/offline-run-*")
    # A local tiny run with online W&B gets no advice, unless it runs inside a SLURM job.
    config = config_of("default.yaml")
    config.wandb.mode = "online"
    grid = Grid.from_config(config)
    assert wandb_sync.wandb_advice(config, grid, env={}) is None
    assert wandb_sync.wandb_advice(config, grid, env={"SLURM_JOB_ID": "1"}).startswith("config key 'wandb.mode'")


def test_the_sync_glob_finds_a_cells_real_offline_run(tmp_path, monkeypatch):
    """A W&B run started as a paper cell's job starts it (its cell config's wandb dir), in
    offline mode: the glob the config and the advice print finds it, and wandb sync takes it."""
    from sagc.pipeline.cells import train_cell_config
    from sagc.train.wandb_log import StepLogger

    monkeypatch.chdir(tmp_path)
    for key, value in {
        "WANDB_MODE": "offline",
        "WANDB_DIR": str(tmp_path),
        "WANDB_SILENT": "true",
        "WANDB_X_DISABLE_STATS": "true",
    }.items():
        monkeypatch.setenv(key, value)  # StepLogger sets some of them: restored afterwards
    config = config_of("paper.yaml")
    grid = Grid.from_config(config)
    cell = list(grid.cells())[5]
    wb = train_cell_config(config, grid, cell)["wandb"]
    logger = StepLogger(
        mode="offline",
        project=wb["project"],
        run_id="abc123",
        # absolute: this process's wandb-core may have been started by an
        # earlier test, in another working directory
        directory=Path(wb["dir"]).absolute(),
        name=wb["name"],
        group=wb["group"],
    )
    logger.log({"reward": 1.0}, step=1)
    logger.finish()
    found = glob.glob(wandb_sync.offline_runs_glob(grid))
    assert len(found) == 1 and found[0].startswith(grid.train_dir(cell) + "/"), found
    command = wandb_sync.sync_command(config, grid)
    assert command in (REPO / "configs/paper.yaml").read_text()  # the config's comment says the same
    argv = [sys.executable, "-m", "wandb", *command.split()[1:-1], "--dry-run", *found]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Would sync 1 run(s)" in proc.stdout + proc.stderr and "run-abc123.wandb" in proc.stdout + proc.stderr
