"""Dry runs enumerate exactly the grid's jobs; the workflow is lint-clean."""

import re
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def snakemake(*args, cwd=REPO):
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )
    return proc.returncode, proc.stdout + proc.stderr


def job_counts(output):
    table = output.split("Job stats:")[1]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}


# Dry runs go to an empty working directory: a developer's own results/ must not turn
# them into "Nothing to be done".


def test_default_dry_run_enumerates_the_grid(tmp_path):
    rc, out = snakemake("-n", "--directory", str(tmp_path))
    assert rc == 0, out
    declared = yaml.safe_load((REPO / "configs/default.yaml").read_text())
    counts = job_counts(out)
    # 2 models x 2 algorithms x 4 sizings x the report seeds
    cells = 2 * 2 * 4 * len(declared["seeds"])
    assert counts["train"] == cells and counts["evaluate_cell"] == cells
    assert counts["evaluate_base"] == 2 and counts["tiny_base_model"] == 2
    assert counts["tiny_data"] == counts["tiny_tokenizer"] == counts["aggregate"] == 1
    for model in ("tiny-qwen2", "tiny-llama"):
        for algo in ("grpo", "dapo"):
            for sizing in ("g4", "g8", "g16", "sagc"):
                for seed in declared["seeds"]:
                    assert f"results/default/train/{model}/{algo}/{sizing}/seed{seed}/done.json" in out
    # The development seeds the settings were tuned on are never trained by the default grid.
    assert declared["dev_seeds"] and not any(f"/seed{seed}/" in out for seed in declared["dev_seeds"])


def test_paper_dry_run_enumerates_the_grid_with_gpus(tmp_path):
    rc, out = snakemake("-n", "--directory", str(tmp_path), "--configfile", str(REPO / "configs/paper.yaml"))
    assert rc == 0, out
    counts = job_counts(out)
    assert counts["train"] == 16 and counts["evaluate_cell"] == 16 and counts["evaluate_base"] == 2
    assert counts["resolve_hub_model"] == 2 and counts["stage_train_data"] == 1
    assert counts["stage_benchmarks"] == 1
    assert "tiny_base_model" not in counts, "the paper grid must not mix in the tiny world"
    jobs = out.split("rule ")
    train_jobs = [j for j in jobs if j.startswith("train:")]
    eval_jobs = [j for j in jobs if j.startswith(("evaluate_cell:", "evaluate_base:"))]
    assert len(train_jobs) == 16 and len(eval_jobs) == 18
    gpus = yaml.safe_load((REPO / "configs/paper.yaml").read_text())["launch"]["processes_per_node"]
    for job in train_jobs:  # one node, one GPU per process
        assert re.search(rf"resources: .*\bnodes=1\b.*\bgpu={gpus}\b", job), job
    for job in eval_jobs:
        assert re.search(r"resources: .*\bgpu=1\b", job), job
    for model in ("qwen2.5-3b", "llama-3.2-3b"):
        assert f"results/paper/train/{model}/dapo/sagc/seed0/done.json" in out
    # The evaluation's size before anything runs: 18 models x (AIME 30 x 64, AMC 40 x 64,
    # GPQA 198 x 8 samples) x 8192 tokens at most.
    tokens = 18 * (30 * 64 + 40 * 64 + 198 * 8) * 8192
    assert f"at most {tokens / 1e6:.0f}M generated tokens" in out and "GPU-hours" in out
    total = int(re.search(r"^total\s+(\d+)$", out.split("Job stats:")[1], re.M).group(1))
    claimed = re.search(r"configs/paper\.yaml` shows\s+the (\d+) jobs", (REPO / "docs" / "cluster.md").read_text())
    assert claimed and int(claimed.group(1)) == total, "docs/cluster.md's paper dry-run job count"


def test_a_models_own_tiny_model_flags_override_the_shared_ones(tmp_path):
    config = yaml.safe_load((REPO / "configs/default.yaml").read_text())
    config["tiny"]["model"] = {"warm_steps": 900, "warm_check_frac": 0.02}
    config["models"]["tiny-llama"]["tiny_model"] = {"warm_steps": 1500}
    configfile = tmp_path / "config.yaml"
    configfile.write_text(yaml.safe_dump(config))
    rc, out = snakemake("-n", "-p", "--directory", str(tmp_path / "run"), "--configfile", str(configfile))
    assert rc == 0, out
    commands = {
        arch: c
        for c in re.findall(r"-m sagc\.tiny base-model .*", out)
        for arch in ("qwen2", "llama")
        if f"--arch {arch} " in c
    }
    assert set(commands) == {"qwen2", "llama"}, out
    assert "--warm-steps 1500" in commands["llama"] and "--warm-steps 900" not in commands["llama"]
    assert "--warm-steps 900" in commands["qwen2"]
    # the model's flags replace only the keys they name
    assert all("--warm-check-frac 0.02" in c for c in commands.values())


def test_lint_is_clean():
    rc, out = snakemake("--lint")
    assert rc == 0, out
