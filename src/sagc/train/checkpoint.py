"""The trainer's checkpoint I/O: ``sagc_state.json`` beside TRL's files in each checkpoint.

TRL saves and restores the weights, optimizer, scheduler and RNG; the trainer adds its own
state (the sizer's, RNG included; the prompt stream's position; the cumulative times; the
step records, ``sagc.train.records``) in ``sagc_state.json``, written last and atomically:
its presence marks a checkpoint complete (a kill during the write leaves the previous
checkpoint the newest complete one). Checkpoints only fall on step boundaries, so a resumed
run regenerates exactly the rollouts the killed one would have.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sagc.io import atomic_write_text

STATE_FILE = "sagc_state.json"
#: 3: step records time the generation call's post-processing apart (``post_s``);
#: 2: the step records in one form (``steps``); 1 kept history, rows and trace apart.
STATE_VERSION = 3


def write_state(checkpoint: str | Path, state: dict[str, Any]) -> Path:
    """Write the trainer's state into a checkpoint folder TRL has just saved."""
    return atomic_write_text(Path(checkpoint) / STATE_FILE, json.dumps({"version": STATE_VERSION, **state}))


def read_state(checkpoint: str | Path) -> dict[str, Any]:
    """The trainer's state of a checkpoint; ``ValueError`` when absent or of another version."""
    path = Path(checkpoint) / STATE_FILE
    if not path.is_file():
        raise ValueError(f"checkpoint {checkpoint} has no {STATE_FILE}: it was not written by "
                         "SAGCGRPOTrainer or is incomplete")
    state = json.loads(path.read_text())
    if state.get("version") != STATE_VERSION:
        raise ValueError(f"unsupported {STATE_FILE} version {state.get('version')!r} in {checkpoint} "
                         f"(this trainer writes version {STATE_VERSION}): train the cell from scratch")
    return state


def latest_complete_checkpoint(checkpoint_dir: Path) -> Path | None:
    """The newest ``checkpoint-<n>`` that holds ``sagc_state.json`` (written last)."""
    checkpoint_dir = Path(checkpoint_dir)
    if not checkpoint_dir.is_dir():
        return None
    found = []
    for d in checkpoint_dir.glob("checkpoint-*"):
        suffix = d.name.split("-", 1)[1]
        if suffix.isdigit() and (d / STATE_FILE).is_file():
            found.append((int(suffix), d))
    return max(found)[1] if found else None
