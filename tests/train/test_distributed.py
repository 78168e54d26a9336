"""A cell on two processes (``accelerate launch``, gloo on CPU): one step, as one process takes it.

Every run here is real: two trainer processes joined by torch.distributed, launched the way
the pipeline launches a multi-GPU cell. ``rank_probe.py`` records what each rank generated.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sagc import metrics as M
from sagc.train.run import PREEMPTED_EXIT

from .test_cli import read_offline_history, run_files

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PROBE = Path(__file__).with_name("rank_probe.py")
PORTS = iter(range(29611, 29700))


def launch(
    cell: dict, tmp: Path, name: str, *extra: str, processes: int = 2
) -> tuple[subprocess.CompletedProcess, list]:
    """Train ``cell`` on ``processes`` ranks; return the launcher's result and each rank's record."""
    path = tmp / f"{name}.json"
    path.write_text(json.dumps({**cell, "launch": {"processes_per_node": processes}}))
    probe_out = tmp / f"{name}-probe"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "OMP_NUM_THREADS": "1",
        "TORCH_ELASTIC_SHUTDOWN_TIMEOUT": "300",
    }
    env.pop("WANDB_SERVICE", None)
    if processes == 1:
        cmd = [sys.executable, str(PROBE)]
    else:
        cmd = [
            sys.executable,
            "-m",
            "accelerate.commands.launch",
            "--multi_gpu",
            "--num_processes",
            str(processes),
            "--num_machines",
            "1",
            "--main_process_port",
            str(next(PORTS)),
            str(PROBE),
        ]
    done = subprocess.run(
        [*cmd, str(path), str(probe_out), *extra], cwd=tmp, env=env, capture_output=True, text=True, timeout=600
    )
    ranks = [
        json.loads((probe_out / f"rank{r}.json").read_text())
        for r in range(processes)
        if (probe_out / f"rank{r}.json").is_file()
    ]
    return done, ranks


def done_json(cell: dict) -> dict:
    return json.loads((Path(cell["output_dir"]) / "done.json").read_text())


def trace(cell: dict) -> list[dict]:
    return [json.loads(line) for line in (Path(cell["output_dir"]) / "lengths.jsonl").read_text().splitlines()]


def recomputed_costs(ranks: list[dict], step: int) -> dict:
    """A step's decode cost from each rank's own generate calls, put together by hand: call
    i of the step is rank 0's call i followed by rank 1's."""
    calls = [[c for c in r["calls"] if c["step"] == step] for r in ranks]
    assert len({len(c) for c in calls}) == 1, "the ranks made different numbers of generate calls"
    decode = padded = prompt_padding = 0
    for per_rank in zip(*calls):
        completion = [n for c in per_rank for n in c["completion"]]
        prompt = [n for c in per_rank for n in c["prompt"]]
        decode += max(completion)
        padded += len(completion) * max(completion)
        prompt_padding += sum(max(prompt) - n for n in prompt)
    return {
        "decode_steps": decode,
        "padded_tokens": padded,
        "prompt_padding": prompt_padding,
        "generate_calls": len(calls[0]),
    }


@pytest.fixture(scope="module")
def grpo_runs(train_world, tmp_path_factory):
    """The same GRPO + SAGC cell on 2 processes and on 1."""
    from .conftest import cell_dict

    tmp = tmp_path_factory.mktemp("dist_grpo")
    cells = {
        n: cell_dict(train_world, tmp / f"p{n}", algorithm="grpo", steps=4, prompts=4, save_steps=2) for n in (1, 2)
    }
    results = {n: launch(cells[n], tmp, f"p{n}", processes=n) for n in (1, 2)}
    for res, _ in results.values():
        assert res.returncode == 0, res.stderr[-4000:]
    return cells, results


def test_two_ranks_take_one_step_together(grpo_runs):
    cells, results = grpo_runs
    ranks = results[2][1]
    assert len(ranks) == 2
    done = done_json(cells[2])
    # The same G on every rank at every step, and the G the run logged.
    for r in ranks:
        per_step = {}
        for rnd in r["rounds"]:
            per_step.setdefault(rnd["step"], set()).add(rnd["G"])
        assert [per_step[s] for s in sorted(per_step)] == [{g} for g in done["group_sizes"]]
    # Each rank holds whole, distinct groups; together they are the one-process prompt order.
    one_process = [step["prompts"] for step in trace(cells[1])]
    for step, prompts in enumerate(one_process, start=1):
        rows = [[rnd["ids"] for rnd in r["rounds"] if rnd["step"] == step] for r in ranks]
        assert all(len(x) == 1 for x in rows)
        g = done["group_sizes"][step - 1]
        groups = [x[0][i : i + g] for x in rows for i in range(0, len(x[0]), g)]
        assert all(len(set(grp)) == 1 for grp in groups), "a group was split across ranks"
        by_rank = [[grp[0] for grp in groups[: len(groups) // 2]], [grp[0] for grp in groups[len(groups) // 2 :]]]
        assert not set(by_rank[0]) & set(by_rank[1])
        assert by_rank[0] + by_rank[1] == prompts
    assert [step["prompts"] for step in trace(cells[2])] == one_process
    # DDP kept the ranks' weights identical.
    assert ranks[0]["weights_sha256"] == ranks[1]["weights_sha256"]


def test_two_rank_costs_are_the_one_process_definition_of_the_gathered_rows(grpo_runs):
    cells, results = grpo_runs
    ranks = results[2][1]
    history = done_json(cells[2])["history"]
    for h in history:
        want = recomputed_costs(ranks, h["step"])
        assert {k: h[k] for k in want} == want, f"step {h['step']}"
        # The controller saw every rank's rows: P x G lengths per step.
        assert h["rollouts"] == h["prompts"] * h["group_size"]
    steps = trace(cells[2])
    for h, t in zip(history, steps):
        assert sum(len(g) for g in t["lengths"]) == h["rollouts"]


def test_rank_zero_alone_logs_and_holds_every_step(grpo_runs):
    cells, _ = grpo_runs
    out = Path(cells[2]["output_dir"])
    files = run_files(out)
    assert len(files) == 1, files  # one W&B run: rank 1 started none
    rows = read_offline_history(files[0])
    assert [r[M.STEP] for r in rows] == [1, 2, 3, 4]
    assert [r[M.GROUP_SIZE] for r in rows] == done_json(cells[2])["group_sizes"]


@pytest.fixture(scope="module")
def dapo_cell(train_world, tmp_path_factory):
    from .conftest import cell_dict

    tmp = tmp_path_factory.mktemp("dist_dapo")
    return tmp, lambda name: cell_dict(train_world, tmp / name, algorithm="dapo", steps=5, prompts=4, save_steps=1)


@pytest.fixture(scope="module")
def dapo_uninterrupted(dapo_cell):
    tmp, make = dapo_cell
    cell = make("whole")
    res, ranks = launch(cell, tmp, "whole")
    assert res.returncode == 0, res.stderr[-4000:]
    return cell, ranks


def test_two_rank_dapo_agrees_on_every_refill_round(dapo_uninterrupted):
    cell, ranks = dapo_uninterrupted
    done = done_json(cell)
    rounds = [[(rnd["step"], rnd["G"], len(rnd["ids"])) for rnd in r["rounds"]] for r in ranks]
    assert rounds[0] == rounds[1]  # same rounds, same G, same share of rows
    per_step = {}
    for step, _g, _n in rounds[0]:
        per_step[step] = per_step.get(step, 0) + 1
    assert [per_step[h["step"]] - 1 for h in done["history"]] == [h["ds_rounds"] for h in done["history"]]
    # The refill rounds drew fresh prompts, the same ones one process would: every round's
    # rows on rank 0 then rank 1 are that round's prompts of the trace, in order.
    assert sum(h["ds_rounds"] for h in done["history"]) > 0, "no refill round: the test checks nothing"
    for step in trace(cell):
        per_rank = [[x["ids"] for x in r["rounds"] if x["step"] == step["step"]] for r in ranks]
        ids = []
        for shares in zip(*per_rank):  # one round: rank 0's rows, then rank 1's
            rows = [i for share in shares for i in share]
            ids.extend(rows[:: step["group_size"]])
        assert ids == step["prompts"]
    for h in done["history"]:
        assert {k: h[k] for k in ("decode_steps", "padded_tokens")} == {
            k: v for k, v in recomputed_costs(ranks, h["step"]).items() if k in ("decode_steps", "padded_tokens")
        }
    assert ranks[0]["weights_sha256"] == ranks[1]["weights_sha256"]


def test_sigkill_of_both_ranks_then_resume_gives_the_same_g_sequence(dapo_cell, dapo_uninterrupted):
    tmp, make = dapo_cell
    whole, _ = dapo_uninterrupted
    cell = make("killed")
    killed, _ = launch(cell, tmp, "killed", "--kill-after", "3")
    assert killed.returncode != 0
    assert not (Path(cell["output_dir"]) / "done.json").exists()
    resumed, _ = launch(cell, tmp, "killed")
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    got = done_json(cell)
    # Killed after step 3's last update, before its checkpoint: step 2's (2 updates per step).
    assert got["resumed_from"].endswith("checkpoint-4")
    assert got["group_sizes"] == done_json(whole)["group_sizes"]
    assert [h["decode_steps"] for h in got["history"]] == [h["decode_steps"] for h in done_json(whole)["history"]]


def test_sigterm_checkpoints_at_the_step_boundary_and_the_rerun_matches(dapo_cell, dapo_uninterrupted):
    tmp, make = dapo_cell
    whole, _ = dapo_uninterrupted
    cell = make("termed")
    termed, ranks = launch(cell, tmp, "termed", "--term-after", "2")
    out = Path(cell["output_dir"])
    # The launcher forwarded the signal; each rank stopped as preempted (it ends on the
    # signal itself: its status says only "failed", which the profile retries).
    assert termed.returncode != 0, termed.stderr[-3000:]
    assert [r["exit"] for r in ranks] == [PREEMPTED_EXIT, PREEMPTED_EXIT], termed.stderr[-3000:]
    assert not (out / "done.json").exists()
    # The step that was running when the signal came finished and was checkpointed whole.
    state = json.loads(
        max((out / "checkpoints").glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
        .joinpath("sagc_state.json")
        .read_text()
    )
    stopped_at = state["step"]
    assert stopped_at in (2, 3) and len(state["steps"]) == stopped_at
    resumed, _ = launch(cell, tmp, "termed")
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    got = done_json(cell)
    assert got["resumed_from"].endswith(f"checkpoint-{2 * stopped_at}")
    assert got["group_sizes"] == done_json(whole)["group_sizes"]
    assert [h["decode_steps"] for h in got["history"]] == [h["decode_steps"] for h in done_json(whole)["history"]]


def test_a_job_started_with_the_wrong_number_of_processes_is_refused(train_world, tmp_path):
    from .conftest import cell_dict

    cell = cell_dict(train_world, tmp_path / "c", steps=2, prompts=4)
    path = tmp_path / "c.json"
    path.write_text(json.dumps({**cell, "launch": {"processes_per_node": 2}}))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    res = subprocess.run(
        [sys.executable, "-m", "sagc.train", "--config", str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 2
    assert "laid out for 2 processes" in res.stderr and "accelerate launch --num_processes 2" in res.stderr


def test_the_signal_handler_asks_for_a_stop_and_nothing_more(tmp_path):
    """SIGUSR1 and SIGTERM, repeated too (a rank gets the scheduler's signal and the
    launcher's copy), only ask the trainer to stop; outside training the defaults are back."""
    script = tmp_path / "sig.py"
    script.write_text(
        "import os, signal, time\n"
        "from sagc.train.run import stop_on_signals\n"
        "class T:\n"
        "    stop_signal = None\n"
        "    def request_stop(self, s):\n"
        "        self.stop_signal = s\n"
        "t = T()\n"
        "with stop_on_signals(t):\n"
        "    os.kill(os.getpid(), signal.SIGUSR1); time.sleep(0.2)\n"
        "    assert t.stop_signal == signal.SIGUSR1\n"
        "    os.kill(os.getpid(), signal.SIGTERM); time.sleep(0.2)\n"
        "    os.kill(os.getpid(), signal.SIGTERM); time.sleep(0.2)\n"
        "    assert t.stop_signal == signal.SIGTERM\n"
        "print('asked', flush=True)\n"
        "os.kill(os.getpid(), signal.SIGTERM); time.sleep(5)\n"
        "print('survived')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    res = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert res.stdout.strip() == "asked", res.stderr
    assert res.returncode == -signal.SIGTERM
