"""Run one cell under ``accelerate launch`` and record what each rank did (a test's witness).

``accelerate launch ... rank_probe.py CELL OUT_DIR [--kill-after K] [--term-after K] [--slow R:C:S]``

Every rank trains the cell through ``sagc.train.run.run_cell`` with a ``SAGCGRPOTrainer``
subclass that only *records*: per generation round the step, G and the dataset ids of the
rows this rank generated; per generate call this rank's prompt and completion lengths; and,
after training, a digest of the rank's weights. Each rank writes ``OUT_DIR/rank<r>.json``.

``--kill-after K``: every rank SIGKILLs itself right after step K's last update (a node
lost mid-run). ``--term-after K``: rank 0 sends SIGTERM to the launcher (what a scheduler
does at a time limit) after step K; the launcher forwards it to every rank. ``--slow R:C:S``
(repeatable): rank R's C-th generate call (from 1) takes S seconds longer (a straggling
rank); every generate call's start and end (wall clock, comparable across the ranks) is
recorded under ``generate``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import sys
import time
from pathlib import Path

from transformers import TrainerCallback

from sagc.train.config import load_config
from sagc.train.run import PREEMPTED_EXIT, Preempted, run_cell
from sagc.train.trainer import SAGCGRPOTrainer

RECORD: dict = {"rounds": [], "calls": [], "generate": []}
SLOW: dict[int, float] = {}  # this rank's generate call (from 1) -> seconds added


class Probe(SAGCGRPOTrainer):
    def _draw_rows(self, n_prompts, group_size):
        rows = super()._draw_rows(n_prompts, group_size)
        RECORD["rounds"].append(
            {"step": self.step + 1, "G": group_size, "ids": [r.get("id", r["prompt"]) for r in rows]}
        )
        return rows

    def _generate(self, prompts):
        result = super()._generate(prompts)
        if self.model.training and self._current is not None:
            RECORD["calls"].append(
                {
                    "step": self._current.step,
                    "prompt": [len(p) for p in result[0]],
                    "completion": [len(c) for c in result[1]],
                }
            )
        return result

    def train(self, *args, **kwargs):
        generate = self.model.generate  # what TRL's HF path calls, inside its timing

        def timed_generate(*a, **kw):
            start = time.time()
            result = generate(*a, **kw)
            time.sleep(SLOW.get(len(RECORD["generate"]) + 1, 0.0))
            RECORD["generate"].append({"start": start, "end": time.time()})
            return result

        self.model.generate = timed_generate
        out = super().train(*args, **kwargs)
        digest = hashlib.sha256()
        for name, tensor in sorted(self.accelerator.unwrap_model(self.model).state_dict().items()):
            digest.update(name.encode())
            digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
        RECORD["weights_sha256"] = digest.hexdigest()
        return out


class SignalAfter(TrainerCallback):
    def __init__(self, step: int, updates_per_step: int, how: str) -> None:
        self.update, self.how = step * updates_per_step, how

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step != self.update:
            return
        if self.how == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        elif int(os.environ.get("RANK", "0")) == 0:
            os.kill(os.getppid(), signal.SIGTERM)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("cell")
    parser.add_argument("out")
    parser.add_argument("--kill-after", type=int)
    parser.add_argument("--term-after", type=int)
    parser.add_argument("--slow", action="append", default=[])
    ns = parser.parse_args()
    for spec in ns.slow:
        rank, call, seconds = spec.split(":")
        if int(rank) == int(os.environ.get("RANK", "0")):
            SLOW[int(call)] = float(seconds)
    os.environ.pop("WANDB_SERVICE", None)
    cfg = load_config(ns.cell)
    upd = cfg.resolved.layout.updates_per_rollout
    callbacks = []
    if ns.kill_after:
        callbacks.append(SignalAfter(ns.kill_after, upd, "kill"))
    if ns.term_after:
        callbacks.append(SignalAfter(ns.term_after, upd, "term"))
    code = 0
    try:
        run_cell(cfg, callbacks=callbacks, trainer_cls=Probe)
    except Preempted:
        code = PREEMPTED_EXIT
    RECORD["exit"] = code
    out = Path(ns.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"rank{os.environ.get('RANK', '0')}.json").write_text(json.dumps(RECORD))
    return code


if __name__ == "__main__":
    sys.exit(main())
