"""The real pipeline, end to end, on the CI grid (configs/ci.yaml): world -> train ->
evaluate -> aggregate, then a config edit that must rerun only the affected cells."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


def snakemake(workdir, *args, timeout=1500):
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "--directory", str(workdir), *args],
        cwd=REPO, capture_output=True, text=True, timeout=timeout,
    )
    return proc.returncode, proc.stdout + proc.stderr


def jobs_to_run(output):
    table = output.split("Job stats:")[1] if "Job stats:" in output else ""
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}


@pytest.fixture(scope="module")
def ci_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("pipeline")
    config = work / "ci.yaml"
    config.write_text((REPO / "configs" / "ci.yaml").read_text())
    rc, out = snakemake(work, "--cores", "2", "--configfile", str(config))
    if rc != 0:
        logs = "\n".join(f"--- {p}\n{p.read_text()[-3000:]}" for p in sorted((work / "results").rglob("*.log")))
        pytest.fail(f"pipeline failed:\n{out[-6000:]}\n{logs}")
    return work, config


@pytest.mark.slow
def test_pipeline_writes_tables_and_figures(ci_run):
    work, _ = ci_run
    tables = work / "results" / "ci" / "tables"
    eff = pd.read_csv(tables / "efficiency.csv")
    assert set(eff["sizing"]) == {"g4", "sagc"}
    assert eff["straggler_rate_mean"].between(0, 1).all()
    for name in ("efficiency.md", "efficiency.tex", "downstream.md", "downstream.tex", "headline.md"):
        assert (tables / name).stat().st_size > 0
    figures = work / "paper_figures" / "ci"
    for fig in ("straggler_rate", "sagc_group_size", "sagc_posterior", "reward_vs_time",
                "length_ratio", "accuracy_vs_length", "sim_sizing", "sim_sweep"):
        assert (figures / f"{fig}.png").stat().st_size > 1000, fig
        assert (figures / f"{fig}.pdf").stat().st_size > 1000, fig
    # every cell trained, logged to its own W&B dir, and was evaluated
    for sizing in ("g4", "sagc"):
        cell = work / "results" / "ci" / "train" / "tiny-llama" / "grpo" / sizing / "seed0"
        done = json.loads((cell / "done.json").read_text())
        assert done["steps"] == 4 and len(done["group_sizes"]) == 4
        assert list((cell / "wandb").rglob("run-*.wandb"))
        assert (cell / "final" / "config.json").is_file()
        summary = json.loads((work / "results" / "ci" / "eval" / "tiny-llama" / "grpo" / sizing
                              / "seed0" / "summary.json").read_text())
        assert set(summary["tasks"]) == {"tiny_arith", "tiny_arith_heldout"}
    fixed = json.loads((work / "results/ci/train/tiny-llama/grpo/g4/seed0/done.json").read_text())
    assert set(fixed["group_sizes"]) == {4}


@pytest.mark.slow
def test_nothing_left_to_do_after_a_run(ci_run):
    work, config = ci_run
    rc, out = snakemake(work, "-n", "--configfile", str(config))
    assert rc == 0, out
    assert "Nothing to be done" in out


@pytest.mark.slow
def test_a_controller_edit_reruns_only_the_sagc_cell(ci_run):
    work, config = ci_run
    edited = work / "ci_edited.yaml"
    data = yaml.safe_load(config.read_text())
    data["sagc"]["delta"] = 0.1
    edited.write_text(yaml.safe_dump(data))
    rc, out = snakemake(work, "-n", "--configfile", str(edited))
    assert rc == 0, out
    jobs = jobs_to_run(out)
    assert jobs.get("train") == 1 and jobs.get("evaluate_cell") == 1 and jobs.get("aggregate") == 1, jobs
    assert "sizing=sagc" in out and "sizing=g4" not in out
    for rule in ("tiny_data", "tiny_tokenizer", "tiny_base_model", "evaluate_base"):
        assert rule not in jobs


@pytest.mark.slow
def test_a_killed_pipeline_resumes_the_cell_from_its_checkpoint(ci_run):
    """SIGKILL the whole Snakemake process group mid-cell, unlock, rerun with
    --rerun-incomplete: the cell resumes from its checkpoint and its G sequence and
    straggler flags equal those of an uninterrupted run of the same cell."""
    import os
    import signal
    import time

    work, config = ci_run
    data = yaml.safe_load(config.read_text())
    data["sizings"] = ["sagc"]
    data["train"].update(steps=24, save_steps=2)
    longer = work / "ci_longer.yaml"
    longer.write_text(yaml.safe_dump(data))
    cell = work / "results/ci/train/tiny-llama/grpo/sagc/seed0"

    target = "results/ci/train/tiny-llama/grpo/sagc/seed0/done.json"  # before --configfile (nargs=+)
    cmd = [sys.executable, "-m", "snakemake", target, "--directory", str(work), "--cores", "2",
           "--configfile", str(longer)]
    started = time.time()
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = started + 600

    def fresh_checkpoints():  # the 4-step run of the fixture left its own behind
        return [p for p in (cell / "checkpoints").glob("checkpoint-*/sagc_state.json")
                if p.stat().st_mtime > started]

    while not fresh_checkpoints():
        assert proc.poll() is None, "the pipeline ended before any checkpoint was written"
        assert time.time() < deadline
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (cell / "done.json").exists(), "the cell finished before the kill"

    rc, out = snakemake(work, "--unlock", "--configfile", str(longer))
    assert rc == 0, out
    rc, out = snakemake(work, target, "--cores", "2", "--rerun-incomplete", "--configfile", str(longer))
    assert rc == 0, out
    resumed = json.loads((cell / "done.json").read_text())
    assert resumed["resumed_from"] and "checkpoint-" in resumed["resumed_from"]

    # The uninterrupted reference: the same cell config, another output folder.
    ref_cfg = json.loads((cell / "cell.json").read_text())
    ref_cfg["output_dir"] = str(work / "reference")
    ref_cfg["wandb"]["dir"] = str(work / "reference" / "wandb")
    (work / "reference.json").write_text(json.dumps(ref_cfg))
    ref = subprocess.run([sys.executable, "-m", "sagc.train", "--config", str(work / "reference.json")],
                         cwd=work, capture_output=True, text=True, timeout=600)
    assert ref.returncode == 0, ref.stderr[-3000:]
    want = json.loads((work / "reference" / "done.json").read_text())
    assert resumed["group_sizes"] == want["group_sizes"]
    assert resumed["stragglers"] == want["stragglers"]
