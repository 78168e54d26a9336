"""One rank of a cell, started by ``tests/train/test_preemption.py`` as ``srun`` starts a task.

``preempt_probe.py CELL STOP_AFTER SLOW_S``: trains ``CELL`` through
``sagc.train.run.run_cell``; every rank sends itself SIGTERM after step ``STOP_AFTER``'s
last update (SLURM signals every task). Rank 0's work after the last step is slowed by
``SLOW_S`` each: its ``sagc_state.json`` write (the tail of a 36 GB save) and its W&B
run's finish, after which it writes ``rank0-finished`` into the working directory. Exits
as ``sagc.train.run.run_job`` does: 75 when preempted.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from transformers import TrainerCallback

import sagc.train.trainer as trainer_module
from sagc.train.config import load_config
from sagc.train.run import PREEMPTED_EXIT, Preempted, run_cell
from sagc.train.wandb_log import StepLogger


class TermAfter(TrainerCallback):
    def __init__(self, update: int) -> None:
        self.update = update

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.update:
            os.kill(os.getpid(), signal.SIGTERM)


def main() -> int:
    cell, stop_after, slow_s = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    write_state = trainer_module.write_state

    def slow_write(checkpoint, state):
        time.sleep(slow_s)
        return write_state(checkpoint, state)

    trainer_module.write_state = slow_write
    finish = StepLogger.finish

    def slow_finish(self, *args, **kwargs):
        time.sleep(slow_s)
        finish(self, *args, **kwargs)
        Path("rank0-finished").write_text("finished\n")

    StepLogger.finish = slow_finish
    os.environ.pop("WANDB_SERVICE", None)
    cfg = load_config(cell)
    try:
        run_cell(cfg, callbacks=[TermAfter(stop_after * cfg.resolved.layout.updates_per_rollout)])
    except Preempted:
        return PREEMPTED_EXIT
    return 0


if __name__ == "__main__":
    sys.exit(main())
