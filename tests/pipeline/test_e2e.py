"""The real pipeline, end to end, on the CI grid (configs/ci.yaml): world -> train ->
evaluate -> aggregate, then a config edit that must rerun only the affected cells.

The pipeline runs from a copy of the checkout in a folder whose name holds a space, into
a working directory whose name holds one too: every path a rule puts on a command line
must be quoted (the simulate rule's config path is absolute, inside the checkout)."""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CHECKOUT_PARTS = ("Snakefile", "workflow", "src", "configs", "envs", "profiles", "README.md")


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    """The repository's workflow and package, copied to ``.../sagc checkout/``."""
    dst = tmp_path_factory.mktemp("space") / "sagc checkout"
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", ".snakemake")
    for part in CHECKOUT_PARTS:
        src = REPO / part
        if src.is_dir():
            shutil.copytree(src, dst / part, ignore=ignore)
        else:
            dst.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / part)
    return dst


def _env(checkout: Path) -> dict:
    """The copy's package wins (the simulate rule's config path is inside it)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(checkout / "src"), *filter(None, [env.get("PYTHONPATH")])])
    env.pop("WANDB_SERVICE", None)
    return env


def snakemake(checkout, workdir, *args, timeout=1500, env=None):
    proc = subprocess.run(
        ["nice", "-n", "10", sys.executable, "-m", "snakemake", "--directory", str(workdir), *args],
        cwd=checkout,
        env={**_env(checkout), **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return proc.returncode, proc.stdout + proc.stderr


def jobs_to_run(output):
    table = output.split("Job stats:")[1] if "Job stats:" in output else ""
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}


@dataclass
class Run:
    """A finished run of the CI grid: its working directory, config and checkout."""

    work: Path
    config: Path
    checkout: Path
    output: str = ""  # what the first run printed

    def snakemake(self, *args, timeout=1500):
        return snakemake(self.checkout, self.work, *args, timeout=timeout)

    def __iter__(self):  # work, config = ci_run
        return iter((self.work, self.config))


@pytest.fixture(scope="module")
def ci_run(tmp_path_factory, checkout):
    work = tmp_path_factory.mktemp("space") / "pipeline run"
    work.mkdir()
    config = work / "ci.yaml"
    config.write_text((REPO / "configs" / "ci.yaml").read_text())
    run = Run(work, config, checkout)
    rc, out = run.snakemake("--cores", "2", "--configfile", str(config))
    if rc != 0:
        logs = "\n".join(f"--- {p}\n{p.read_text()[-3000:]}" for p in sorted((work / "results").rglob("*.log")))
        pytest.fail(f"pipeline failed:\n{out[-6000:]}\n{logs}")
    run.output = out
    return run


@pytest.mark.slow
def test_pipeline_writes_tables_and_figures(ci_run):
    work, _ = ci_run
    tables = work / "results" / "ci" / "tables"
    eff = pd.read_csv(tables / "efficiency.csv")
    assert set(eff["sizing"]) == {"g4", "sagc"}
    assert eff["straggler_rate_mean"].between(0, 1).all()
    for name in ("efficiency.md", "efficiency.tex", "downstream.md", "downstream.tex"):
        assert (tables / name).stat().st_size > 0
    # One seed is one unit: the primary family of sagc vs g4 (the largest fixed G here) and the
    # positive control are there, pooled over the 4 strata, and none has the df to be decided.
    headline = pd.read_csv(tables / "headline.csv")
    assert {"P1", "P2", "P3"} <= set(headline["id"])
    sagc = headline[headline["controller"] == "sagc"]
    assert set(sagc["reference"]) >= {"g4"}
    assert not sagc["verdict"].isin(["holds", "fails"]).any(), sagc[["id", "verdict"]]
    text = (tables / "headline.md").read_text()
    assert "Seeds [0]" in text
    assert "- tiny-llama: largest fixed G g4;" in text
    figures = work / "paper_figures" / "ci"
    for fig in (
        "straggler_rate",
        "sagc_group_size",
        "sagc_posterior",
        "reward_vs_time",
        "length_ratio",
        "accuracy_vs_length",
        "sim_sizing",
        "sim_sweep",
    ):
        assert (figures / f"{fig}.png").stat().st_size > 1000, fig
        assert (figures / f"{fig}.pdf").stat().st_size > 1000, fig
    # every cell trained, logged to its own W&B dir, and was evaluated
    for sizing in ("g4", "sagc"):
        cell = work / "results" / "ci" / "train" / "tiny-llama" / "grpo" / sizing / "seed0"
        done = json.loads((cell / "done.json").read_text())
        assert done["steps"] == 4 and len(done["group_sizes"]) == 4
        assert list((cell / "wandb").rglob("run-*.wandb"))
        assert (cell / "final" / "config.json").is_file()
        summary = json.loads(
            (work / "results" / "ci" / "eval" / "tiny-llama" / "grpo" / sizing / "seed0" / "summary.json").read_text()
        )
        assert set(summary["tasks"]) == {"tiny_arith", "tiny_arith_heldout"}
    fixed = json.loads((work / "results/ci/train/tiny-llama/grpo/g4/seed0/done.json").read_text())
    assert set(fixed["group_sizes"]) == {4}


@pytest.mark.slow
def test_each_finished_training_cell_prints_one_line(ci_run):
    """Among Snakemake's job blocks, one line per trained cell says how it went and where
    its per-step log is."""
    for sizing in ("g4", "sagc"):
        cell = f"tiny-llama/grpo/{sizing}/seed0"
        lines = [line for line in ci_run.output.splitlines() if line.startswith(f"trained {cell}:")]
        assert len(lines) == 1, ci_run.output[-3000:]
        assert re.fullmatch(
            rf"trained {cell}: 4 steps, straggler rate \d+%, mean G [\d.]+, training [\d.]+ s, job \d+ s "
            rf"\(per-step log: results/ci/logs/train/{cell}\.log\)",
            lines[0],
        ), lines[0]
        log = ci_run.work / f"results/ci/logs/train/{cell}.log"
        assert re.search(r"step 4/4 G=\d+", log.read_text()), "the per-step progress is in the job's log"


@pytest.mark.slow
def test_nothing_left_to_do_after_a_run(ci_run):
    work, config = ci_run
    rc, out = ci_run.snakemake("-n", "--configfile", str(config))
    assert rc == 0, out
    assert "Nothing to be done" in out


@pytest.mark.slow
def test_a_controller_edit_reruns_only_the_sagc_cell(ci_run):
    work, config = ci_run
    edited = work / "ci_edited.yaml"
    data = yaml.safe_load(config.read_text())
    data["sagc"]["delta"] = 0.1
    edited.write_text(yaml.safe_dump(data))
    rc, out = ci_run.snakemake("-n", "--configfile", str(edited))
    assert rc == 0, out
    jobs = jobs_to_run(out)
    assert jobs.get("train") == 1 and jobs.get("evaluate_cell") == 1 and jobs.get("aggregate") == 1, jobs
    assert "sizing=sagc" in out and "sizing=g4" not in out
    for rule in ("tiny_data", "tiny_tokenizer", "tiny_base_model", "evaluate_base"):
        assert rule not in jobs


def readme_command(comment: str) -> list[str]:
    """The command under the README comment line that contains ``comment``."""
    lines = (REPO / "README.md").read_text().splitlines()
    for i, line in enumerate(lines):
        if line.startswith("#") and comment in line:
            return shlex.split(lines[i + 1])
    raise AssertionError(f"README.md has no command commented {comment!r}")


def _without_configfile(cmd: list[str]) -> list[str]:
    assert cmd[0] == "snakemake", cmd
    args = cmd[1:]
    if "--configfile" in args:
        i = args.index("--configfile")
        del args[i : i + 2]
    return args


@pytest.mark.slow
def test_the_readme_command_for_a_config_edit_lists_nothing_without_an_edit(ci_run):
    """The README's "which jobs a config edit reruns" command answers that question:
    nothing after a finished run, only the SAGC cell after a controller edit."""
    work, config = ci_run
    args = _without_configfile(readme_command("which jobs a config edit reruns"))
    rc, out = ci_run.snakemake(*args, "--configfile", str(config))
    assert rc == 0, out
    assert "Nothing to be done" in out, out[-3000:]

    edited = work / "ci_delta.yaml"
    data = yaml.safe_load(config.read_text())
    data["sagc"]["delta"] = 0.2
    edited.write_text(yaml.safe_dump(data))
    rc, out = ci_run.snakemake(*args, "--configfile", str(edited))
    assert rc == 0, out
    jobs = jobs_to_run(out)
    assert jobs.get("train") == 1 and "sizing=sagc" in out and "sizing=g4" not in out, jobs


@pytest.mark.slow
def test_a_deleted_cell_folder_is_rebuilt(ci_run):
    """Snakemake does not remake a missing intermediate file whose downstream outputs are
    up to date; the default target names every cell's outputs so that it does."""
    work, config = ci_run
    cell = work / "results/ci/train/tiny-llama/grpo/g4/seed0"
    aside = work / "g4-aside"
    shutil.move(cell, aside)
    try:
        rc, out = ci_run.snakemake("-n", "--configfile", str(config))
    finally:
        shutil.move(aside, cell)
    assert rc == 0, out
    assert "Nothing to be done" not in out
    jobs = jobs_to_run(out)
    assert jobs.get("train") == 1 and jobs.get("evaluate_cell") == 1 and jobs.get("aggregate") == 1, jobs
    assert "sizing=g4" in out and "sizing=sagc" not in out


@pytest.mark.slow
def test_the_readme_command_to_rerun_one_cell_retrains_it_from_scratch(ci_run):
    """Forcing a finished cell reruns its training from step 1 (not a zero-step resume
    from its final checkpoint), then its evaluation and the tables."""
    work, config = ci_run
    done_path = work / "results/ci/train/tiny-llama/grpo/g4/seed0/done.json"
    before = json.loads(done_path.read_text())
    tables = work / "results/ci/tables/efficiency.csv"
    tables_mtime = tables.stat().st_mtime
    target = str(done_path.relative_to(work))
    args = [
        target if a.endswith("/done.json") else a for a in _without_configfile(readme_command("one cell, from scratch"))
    ]
    assert target in args
    rc, out = ci_run.snakemake(*args, "--configfile", str(config))
    assert rc == 0, out
    after = json.loads(done_path.read_text())
    assert after["resumed_from"] is None
    assert after["steps"] == 4 and after["wallclock_s"] != before["wallclock_s"]
    assert tables.stat().st_mtime > tables_mtime, "the tables were not rebuilt"
    rc, out = ci_run.snakemake("-n", "--configfile", str(config))
    assert "Nothing to be done" in out, out[-3000:]


@pytest.mark.slow
def test_a_killed_pipeline_resumes_the_cell_from_its_checkpoint(ci_run):
    """SIGKILL the whole Snakemake process group mid-cell, unlock, rerun with
    --rerun-incomplete: the cell resumes from its checkpoint and its G sequence and
    straggler flags equal those of an uninterrupted run of the same cell."""
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
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        target,
        "--directory",
        str(work),
        "--cores",
        "2",
        "--configfile",
        str(longer),
    ]
    started = time.time()
    proc = subprocess.Popen(
        cmd,
        cwd=ci_run.checkout,
        env=_env(ci_run.checkout),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = started + 600

    def fresh_checkpoints():  # the 4-step run of the fixture left its own behind
        return [p for p in (cell / "checkpoints").glob("checkpoint-*/sagc_state.json") if p.stat().st_mtime > started]

    while not fresh_checkpoints():
        assert proc.poll() is None, "the pipeline ended before any checkpoint was written"
        assert time.time() < deadline
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (cell / "done.json").exists(), "the cell finished before the kill"

    rc, out = ci_run.snakemake("--unlock", "--configfile", str(longer))
    assert rc == 0, out
    rc, out = ci_run.snakemake(target, "--cores", "2", "--rerun-incomplete", "--configfile", str(longer))
    assert rc == 0, out
    resumed = json.loads((cell / "done.json").read_text())
    assert resumed["resumed_from"] and "checkpoint-" in resumed["resumed_from"]

    # The uninterrupted reference: the same cell config, another output folder.
    ref_cfg = json.loads((cell / "cell.json").read_text())
    ref_cfg["output_dir"] = str(work / "reference")
    ref_cfg["wandb"]["dir"] = str(work / "reference" / "wandb")
    (work / "reference.json").write_text(json.dumps(ref_cfg))
    ref = subprocess.run(
        [sys.executable, "-m", "sagc.train", "--config", str(work / "reference.json")],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert ref.returncode == 0, ref.stderr[-3000:]
    want = json.loads((work / "reference" / "done.json").read_text())
    assert resumed["group_sizes"] == want["group_sizes"]
    assert resumed["stragglers"] == want["stragglers"]


@pytest.mark.slow
def test_a_rollout_budget_config_trains(ci_run):
    """``train.rollout_budget`` instead of ``train.prompts_per_step``: the pipeline accepts
    the config, and the cell trains with P = budget / G prompts at every step."""
    work, config = ci_run
    data = yaml.safe_load(config.read_text())
    del data["train"]["prompts_per_step"]
    data["train"]["rollout_budget"] = 8  # candidates 2, 4, 8 -> 4, 2, 1 prompts
    data["sizings"] = ["sagc"]
    budget = work / "ci_budget.yaml"
    budget.write_text(yaml.safe_dump(data))
    target = "results/ci/train/tiny-llama/grpo/sagc/seed0/done.json"  # before --configfile (nargs=+)
    rc, out = ci_run.snakemake(target, "--cores", "2", "--configfile", str(budget))
    assert rc == 0, out[-4000:]
    cell = json.loads((work / target).parent.joinpath("cell.json").read_text())
    assert cell["train"]["rollout_budget"] == 8 and "prompts_per_step" not in cell["train"]
    done = json.loads((work / target).read_text())
    assert done["steps"] == data["train"]["steps"]
    assert [h["prompts"] * h["group_size"] for h in done["history"]] == [8] * done["steps"]
    assert [h["rollouts"] for h in done["history"]] == [8] * done["steps"]


@pytest.mark.slow
def test_a_two_process_cell_trains_stops_on_slurms_warning_and_resumes(ci_run):
    """A cell of 2 processes (launch.processes_per_node: 2, gloo on this CPU) through the
    pipeline: SIGUSR1 to every process of the run, as SLURM's --signal does to a job step,
    stops it after a checkpoint; the rerun resumes there and finishes."""
    import signal
    import time

    work, config = ci_run
    data = yaml.safe_load(config.read_text())
    data["sizings"] = ["sagc"]
    data["launch"] = {"processes_per_node": 2}
    data["train"].update(steps=30, save_steps=2)
    two = work / "ci_two.yaml"
    two.write_text(yaml.safe_dump(data))
    cell = work / "results/ci/train/tiny-llama/grpo/sagc/seed0"
    log = work / "results/ci/logs/train/tiny-llama/grpo/sagc/seed0.log"
    target = "results/ci/train/tiny-llama/grpo/sagc/seed0/done.json"  # before --configfile (nargs=+)
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        target,
        "--directory",
        str(work),
        "--cores",
        "2",
        "--configfile",
        str(two),
    ]
    started = time.time()
    proc = subprocess.Popen(
        cmd,
        cwd=ci_run.checkout,
        env=_env(ci_run.checkout),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    deadline = started + 600
    while not [p for p in (cell / "checkpoints").glob("checkpoint-*/sagc_state.json") if p.stat().st_mtime > started]:
        assert proc.poll() is None, proc.communicate()[0][-4000:]
        assert time.time() < deadline
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGUSR1)
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode != 0, "the stopped job is reported as not done (Snakemake's retries rerun it)"
    assert not (cell / "done.json").exists()
    text = log.read_text()
    assert re.search(
        r"^launch: accelerate launch .*--num_processes 2 --num_machines 1 .*-m sagc\.train --config "
        r"results/ci/train/tiny-llama/grpo/sagc/seed0/cell\.json$",
        text,
        re.M,
    ), text[-3000:]
    assert json.loads((cell / "cell.json").read_text())["launch"] == {"processes_per_node": 2}

    rc, out = ci_run.snakemake(target, "--cores", "2", "--rerun-incomplete", "--configfile", str(two))
    assert rc == 0, out[-4000:]
    done = json.loads((cell / "done.json").read_text())
    assert done["steps"] == 30 and done["resumed_from"] and "checkpoint-" in done["resumed_from"]
    assert re.search(r"^trained tiny-llama/grpo/sagc/seed0: 30 steps", out, re.M)
