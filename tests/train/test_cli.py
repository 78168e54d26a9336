"""The cell entry point end to end: W&B offline run file, outputs, kill-and-resume."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sagc import metrics as M
from sagc.train.config import TrainConfig

pytestmark = pytest.mark.slow

SRC = str(Path(__file__).resolve().parents[2] / "src")


def read_offline_history(run_file: Path) -> list[dict]:
    """History rows of an offline ``run-*.wandb`` file, via wandb's own record reader."""
    out = subprocess.run(
        ["wandb", "leet", "inspect", "--json", str(run_file)], check=True, capture_output=True, text=True, timeout=120
    ).stdout
    rows = []
    for line in out.splitlines():
        rec = json.loads(line)
        if rec.get("type") == "history":
            rows.append(rec["history"]["item"])
    return rows


def run_files(out: Path) -> list[Path]:
    return sorted((out / "wandb").rglob("run-*.wandb"))


def test_wandb_run_holds_the_documented_metrics(make_cell, tmp_path):
    from sagc.train.run import run_cell

    out = tmp_path / "cell"
    cfg = TrainConfig.from_dict(make_cell(out, steps=3, save_steps=2, sagc={"candidates": [4, 8, 16], "eta": 2.0}))
    done = run_cell(cfg)

    files = run_files(out)
    assert len(files) == 1
    rows = read_offline_history(files[0])
    assert [r[M.STEP] for r in rows] == [1, 2, 3]
    for r in rows:
        missing = [k for k in M.REQUIRED if k not in r]
        assert not missing, f"step {r.get(M.STEP)} lacks {missing}"
        assert M.LAMBDA in r and M.LOSS in r
        for g in (4, 8, 16):
            assert 0.0 < r[M.posterior_mean_key(g)] < 1.0
        assert r[M.N_ROLLOUTS] == r[M.N_PROMPTS] * r[M.GROUP_SIZE]
        assert r[M.LENGTH_MAX] <= 24 and 0 < r[M.PADDING_EFFICIENCY] <= 1
        assert 0 < r[M.ROLLOUT_SECONDS] < r[M.STEP_SECONDS]
    assert [r[M.GROUP_SIZE] for r in rows] == done["group_sizes"]
    wall = [r[M.WALLCLOCK_SECONDS] for r in rows]
    assert wall == sorted(wall) and wall[-1] == pytest.approx(done["wallclock_s"])

    # Outputs the evaluation and the aggregation rely on.
    final = out / "final"
    assert (final / "config.json").is_file() and (final / "tokenizer.json").is_file()
    from sagc.tiny.tokenizer import load_tokenizer

    assert load_tokenizer(final).eos_token == "<|endoftext|>"
    assert done["steps"] == 3 and len(done["history"]) == 3
    assert 0.0 <= done["straggler_rate"] <= 1.0 and done["mean_group_size"] >= 4
    ckpts = sorted(p.name for p in (out / "checkpoints").glob("checkpoint-*"))
    assert ckpts == ["checkpoint-2", "checkpoint-3"]  # save_total_limit=2; final one at the end
    assert (out / "checkpoints" / "checkpoint-2" / "sagc_state.json").is_file()
    # Running the same command again is a no-op: the cell is done.
    assert run_cell(cfg)["history"] == done["history"]


KILL_SCRIPT = textwrap.dedent("""
    import os, signal, sys
    from transformers import TrainerCallback
    from sagc.train.config import load_config
    from sagc.train.run import run_cell

    class KillAfter(TrainerCallback):
        # SIGKILL the process right after step K's update: no cleanup, like a preempted job.
        def __init__(self, step, updates_per_step):
            self.update = step * updates_per_step
        def on_step_end(self, args, state, control, **kw):
            if state.global_step == self.update:
                os.kill(os.getpid(), signal.SIGKILL)

    os.environ.pop("WANDB_SERVICE", None)
    run_cell(load_config(sys.argv[1]), callbacks=[KillAfter(int(sys.argv[2]), int(sys.argv[3]))])
""")


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", ""), "OMP_NUM_THREADS": "1"}
    env.pop("WANDB_SERVICE", None)  # set by the in-process run above; each job owns its service
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_kill_and_resume_gives_the_identical_g_sequence(make_cell, tmp_path):
    """DAPO + SAGC (two updates per step, dynamic sampling): killed (SIGKILL) after step 3
    with the last checkpoint at step 2, restarted with the same command, the run matches an
    uninterrupted one step by step."""
    from sagc.train.run import run_cell

    kw = dict(algorithm="dapo", sizing="sagc", steps=4, save_steps=2, sagc={"candidates": [4, 8, 16], "eta": 2.0})
    cut_cfg = make_cell(tmp_path / "cut", **kw)
    (tmp_path / "cut.yaml").write_text(json.dumps(cut_cfg))  # JSON is valid YAML: tests the YAML path
    (tmp_path / "kill.py").write_text(KILL_SCRIPT)

    run_cell(TrainConfig.from_dict(make_cell(tmp_path / "ref", **kw)))  # uninterrupted, in-process
    killed = _run(["kill.py", "cut.yaml", "3", "2"], tmp_path)
    assert killed.returncode == -9, killed.stderr[-3000:]
    cut = tmp_path / "cut"
    assert not (cut / "done.json").exists()
    assert sorted(p.name for p in (cut / "checkpoints").glob("checkpoint-*")) == ["checkpoint-4"]
    resumed = _run(["-m", "sagc.train", "--config", "cut.yaml"], tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]

    want = json.loads((tmp_path / "ref" / "done.json").read_text())
    got = json.loads((cut / "done.json").read_text())
    assert got["resumed_from"].endswith("checkpoint-4")
    assert got["group_sizes"] == want["group_sizes"]
    assert len(set(want["group_sizes"])) >= 2  # a sequence worth comparing
    for key in ("straggler", "ratio", "length_max", "reward_mean", "ds_rounds", "ds_dropped_groups"):
        assert [h[key] for h in got["history"]] == [h[key] for h in want["history"]], key

    # The lengths trace (what the simulator replays) survives the kill too, step for step.
    from sagc.trace import read_trace

    def trace(folder):
        return [
            (t.step, t.group_size, [g.tolist() for g in t.lengths], t.straggler)
            for t in read_trace(folder / "lengths.jsonl")
        ]

    assert trace(cut) == trace(tmp_path / "ref")
    assert [t[1] for t in trace(cut)] == want["group_sizes"]
    assert [t[3] for t in trace(cut)] == want["stragglers"]

    # W&B: one run id, two segments. The killed one holds what wandb-core had flushed
    # (possibly nothing); the resumed one re-logs the checkpointed steps, then 3..5.
    files = run_files(cut)
    assert len(files) == 2 and len({f.stem.rsplit("-", 1)[-1] for f in files}) == 1
    first, second = (read_offline_history(f) for f in files)
    assert {r[M.STEP] for r in first} <= {1, 2, 3}
    assert [r[M.STEP] for r in second] == [1, 2, 3, 4]
    assert [r[M.GROUP_SIZE] for r in second] == want["group_sizes"]
    ref_rows = read_offline_history(run_files(tmp_path / "ref")[0])
    for a, b in zip(second, ref_rows):
        for k in (M.GROUP_SIZE, M.STRAGGLER, M.LENGTH_RATIO, M.LAMBDA, M.TOKENS_GENERATED, M.REWARD_MEAN):
            assert a[k] == b[k], (a[M.STEP], k)


def test_a_changed_config_does_not_resume_another_configs_checkpoints(make_cell, tmp_path):
    """Rerunning a cell with other settings (what Snakemake's params trigger does) must
    train from scratch, not resume the previous config's checkpoints or reuse its done.json."""
    from sagc.train.run import run_cell

    first = run_cell(TrainConfig.from_dict(make_cell(tmp_path / "cell", steps=2, save_steps=2)))
    assert first["resumed_from"] is None
    again = run_cell(TrainConfig.from_dict(make_cell(tmp_path / "cell", steps=2, save_steps=2)))
    assert again == first, "the same config finds its done.json"
    changed = run_cell(TrainConfig.from_dict(make_cell(tmp_path / "cell", steps=4, save_steps=2)))
    assert changed["resumed_from"] is None and changed["steps"] == 4
    assert changed["config_fingerprint"] != first["config_fingerprint"]


def test_a_forced_rerun_of_a_finished_cell_trains_from_scratch(make_cell, tmp_path):
    """``snakemake -f .../done.json`` deletes the cell's done.json and final/ and runs the
    job again. The finished run's last checkpoint is still there; resuming from it would
    train zero steps and hand back the old numbers. The rerun must train every step again."""
    import shutil

    from sagc.train.run import run_cell

    cfg = TrainConfig.from_dict(make_cell(tmp_path / "cell", sizing="g4", steps=2, save_steps=2))
    first = run_cell(cfg)
    cell = tmp_path / "cell"
    assert (cell / "checkpoints" / "checkpoint-2").is_dir()  # the finished run's last step
    (cell / "done.json").unlink()  # what snakemake -f removes before rerunning the job
    shutil.rmtree(cell / "final")

    again = run_cell(cfg)
    assert again["resumed_from"] is None
    assert again["steps"] == 2 and again["wallclock_s"] != first["wallclock_s"]
    assert (cell / "final" / "config.json").is_file()
    files = run_files(cell)
    assert len(files) == 1, "the finished run's W&B file belongs to the discarded run"
    assert [r[M.STEP] for r in read_offline_history(files[0])] == [1, 2]


def test_with_one_checkpoint_kept_a_complete_one_exists_at_every_moment(make_cell, tmp_path, monkeypatch):
    """save_total_limit 1: the old checkpoint is deleted only after the new one is complete
    (its sagc_state.json written), so a kill at any moment of a save leaves one to resume."""
    from sagc.train import trainer as trainer_module
    from sagc.train.checkpoint import latest_complete_checkpoint
    from sagc.train.run import run_cell

    out = tmp_path / "cell"
    cfg = make_cell(out, steps=4, save_steps=1, wandb_mode="disabled")
    cfg["train"]["save_total_limit"] = 1
    seen = []
    write = trainer_module.write_state

    def spy(folder, state):
        seen.append(latest_complete_checkpoint(out / "checkpoints"))  # just before the new one completes
        return write(folder, state)

    monkeypatch.setattr(trainer_module, "write_state", spy)
    run_cell(TrainConfig.from_dict(cfg))
    assert seen[0] is None  # the first save: nothing before it
    assert [p.name for p in seen[1:]] == ["checkpoint-1", "checkpoint-2", "checkpoint-3"]
    assert sorted(p.name for p in (out / "checkpoints").glob("checkpoint-*")) == ["checkpoint-4"]


TERM_SCRIPT = textwrap.dedent("""
    import os, signal, sys
    import psutil
    from transformers import TrainerCallback
    from sagc.train.config import load_config
    from sagc.train.run import PREEMPTED_EXIT, Preempted, run_cell

    class SchedulerTerm(TrainerCallback):
        # What SLURM does at scancel or preemption: SIGTERM to every process of the job,
        # W&B's service first, then the trainer.
        def on_step_end(self, args, state, control, **kw):
            if state.global_step == 2:
                for child in psutil.Process().children(recursive=True):
                    if "wandb" in child.name():
                        child.terminate()
                        child.wait(10)
                os.kill(os.getpid(), signal.SIGTERM)

    os.environ.pop("WANDB_SERVICE", None)
    try:
        run_cell(load_config(sys.argv[1]), callbacks=[SchedulerTerm()])
    except Preempted:
        sys.exit(PREEMPTED_EXIT)
""")


def test_sigterm_that_also_killed_wandb_still_checkpoints_and_resumes(make_cell, tmp_path):
    """A SIGTERM that took W&B's service down with it: the trainer still finishes the step,
    checkpoints and exits 75, and the rerun resumes from that step."""
    import yaml

    from sagc.train.run import PREEMPTED_EXIT

    out = tmp_path / "cell"
    cell = make_cell(out, steps=4, save_steps=100, sizing="g4")
    (tmp_path / "cell.yaml").write_text(yaml.safe_dump(cell))
    (tmp_path / "term.py").write_text(TERM_SCRIPT)
    termed = _run(["term.py", "cell.yaml"], tmp_path)
    assert termed.returncode == PREEMPTED_EXIT, termed.stderr[-3000:]
    assert "W&B logging stopped" in termed.stderr
    resumed = _run(["-m", "sagc.train", "--config", "cell.yaml"], tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    done = json.loads((out / "done.json").read_text())
    assert done["resumed_from"].endswith(("checkpoint-2", "checkpoint-3")) and done["steps"] == 4
