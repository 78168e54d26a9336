"""A stop on SLURM's signal leaves a complete checkpoint on a cell of two processes, started
as ``srun --kill-on-bad-exit 1`` starts a cell on two nodes: each rank its own task, and
the first task to exit with a non-zero status ends the others at once (here: SIGKILL, no
grace). Real torch.distributed over gloo on CPU, real TRL (``preempt_probe.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sagc.train.checkpoint import STATE_FILE, latest_complete_checkpoint
from sagc.train.run import PREEMPTED_EXIT

from .conftest import cell_dict

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PROBE = Path(__file__).with_name("preempt_probe.py")
#: Rank 0's state write and W&B finish each wait this long: the other rank is done long before.
SLOW_S = 6.0


def srun_kill_on_bad_exit(cell_file: Path, tmp: Path, port: int) -> dict[int, int]:
    """Start one task per rank; when one exits non-zero, SIGKILL the rest. The exit
    status of each rank (-9: killed)."""
    procs = {}
    for rank in (0, 1):
        env = {
            **os.environ,
            "RANK": str(rank),
            "LOCAL_RANK": "0",
            "WORLD_SIZE": "2",
            "LOCAL_WORLD_SIZE": "1",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "OMP_NUM_THREADS": "1",
            "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
        }
        env.pop("WANDB_SERVICE", None)
        log = open(tmp / f"rank{rank}.log", "w")
        procs[rank] = subprocess.Popen(
            [sys.executable, str(PROBE), str(cell_file), "1", str(SLOW_S)],
            cwd=tmp,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        codes = {r: p.poll() for r, p in procs.items()}
        if any(c not in (None, 0) for c in codes.values()) or all(c is not None for c in codes.values()):
            for p in procs.values():
                if p.poll() is None:
                    p.kill()
            return {r: p.wait() for r, p in procs.items()}
        time.sleep(0.05)
    for p in procs.values():
        p.kill()
    raise AssertionError("the ranks did not end in 600 s: " + (tmp / "rank0.log").read_text()[-3000:])


def test_a_stop_on_two_tasks_leaves_a_complete_checkpoint_before_any_rank_exits(train_world, tmp_path):
    out = tmp_path / "cell"
    cell = cell_dict(train_world, out, algorithm="grpo", sizing="g4", steps=4, prompts=2, save_steps=100)
    cell["launch"] = {"processes_per_node": 2}
    cell_file = tmp_path / "cell.json"
    cell_file.write_text(json.dumps(cell))
    codes = srun_kill_on_bad_exit(cell_file, tmp_path, port=29771)
    logs = "\n".join((tmp_path / f"rank{r}.log").read_text()[-2000:] for r in (0, 1))
    # Both ranks stopped on the signal after step 1; the first to exit exited 75 and the
    # other exited 75 too, or was killed in the moment after, as srun does...
    assert PREEMPTED_EXIT in codes.values() and set(codes.values()) <= {PREEMPTED_EXIT, -9}, (codes, logs)
    # ... but only once rank 0 had completed the checkpoint and everything after it (its W&B
    # run): without the barrier rank 1 exits 2 x SLOW_S earlier and rank 0 is killed first.
    assert (tmp_path / "rank0-finished").is_file(), logs
    checkpoint = latest_complete_checkpoint(out / "checkpoints")
    assert checkpoint is not None and checkpoint.name == "checkpoint-1", logs
    state = json.loads((checkpoint / STATE_FILE).read_text())
    assert state["step"] == 1 and len(state["steps"]) == 1
    assert not (out / "done.json").exists()
