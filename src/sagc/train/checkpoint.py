"""The trainer's ``sagc_state.json`` in each checkpoint (written last: it marks the checkpoint
complete) and the resume policy (``resume_point``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sagc.io import atomic_write_text

STATE_FILE = "sagc_state.json"
#: 3: step records with ``post_s``; 2: the step records in one form; 1: history, rows, trace apart.
STATE_VERSION = 3
#: Beside the checkpoints: the config fingerprint and state version they were written by.
CONFIG_STAMP = "config_fingerprint"

log = logging.getLogger("sagc.train")


def write_state(checkpoint: str | Path, state: dict[str, Any]) -> Path:
    """Write the trainer's state into a checkpoint folder TRL has just saved."""
    return atomic_write_text(Path(checkpoint) / STATE_FILE, json.dumps({"version": STATE_VERSION, **state}))


def checkpoint_complete(trainer: Any) -> None:
    """A barrier on a stop: no rank exits before rank 0 has completed the checkpoint (``srun
    --kill-on-bad-exit`` would kill rank 0 when the first rank exits 75)."""
    if trainer.accelerator.num_processes > 1:
        trainer.accelerator.wait_for_everyone()


def read_state(checkpoint: str | Path) -> dict[str, Any]:
    """The trainer's state of a checkpoint; ``ValueError`` when absent or of another version."""
    path = Path(checkpoint) / STATE_FILE
    if not path.is_file():
        raise ValueError(
            f"checkpoint {checkpoint} has no {STATE_FILE}: it was not written by SAGCGRPOTrainer or is incomplete"
        )
    state = json.loads(path.read_text())
    if state.get("version") != STATE_VERSION:
        raise ValueError(
            f"unsupported {STATE_FILE} version {state.get('version')!r} in {checkpoint} "
            f"(this trainer writes version {STATE_VERSION}): train the cell from scratch"
        )
    return state


def latest_complete_checkpoint(checkpoint_dir: Path) -> Path | None:
    """The newest ``checkpoint-<n>`` that holds ``sagc_state.json``."""
    checkpoint_dir = Path(checkpoint_dir)
    if not checkpoint_dir.is_dir():
        return None
    found = []
    for d in checkpoint_dir.glob("checkpoint-*"):
        suffix = d.name.split("-", 1)[1]
        if suffix.isdigit() and (d / STATE_FILE).is_file():
            found.append((int(suffix), d))
    return max(found)[1] if found else None


def config_fingerprint(cfg: Any) -> str:
    """A digest of the whole resolved cell config (checkpoints and done.json are reused only by it)."""
    import hashlib

    return hashlib.sha256(json.dumps(cfg.to_dict(), sort_keys=True, default=str).encode()).hexdigest()[:16]


def discard_stale_checkpoints(checkpoint_dir: Path, fingerprint: str) -> None:
    """Remove checkpoints of another config or state format, and stamp the folder with this one."""
    import shutil

    stamp = checkpoint_dir / CONFIG_STAMP
    expected = f"{fingerprint} sagc_state-v{STATE_VERSION}"
    if checkpoint_dir.is_dir() and any(checkpoint_dir.glob("checkpoint-*")):
        if not stamp.is_file() or stamp.read_text().strip() != expected:
            log.warning(
                "checkpoints in %s belong to another config of this cell (or an older "
                "checkpoint format): starting fresh",
                checkpoint_dir,
            )
            shutil.rmtree(checkpoint_dir)
    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    stamp.write_text(expected + "\n")


def is_final_checkpoint(checkpoint: Path) -> bool:
    """True when ``checkpoint`` was saved at the last step of its run."""
    state_path = Path(checkpoint) / "trainer_state.json"
    if not state_path.is_file():
        return False
    state = json.loads(state_path.read_text())
    return 0 < int(state.get("max_steps", 0)) <= int(state.get("global_step", 0))


def resume_point(out: Path, fingerprint: str, cell_id: str, leftovers: Sequence[Path] = ()) -> Path | None:
    """The checkpoint an interrupted run of this config resumes from, or ``None`` to train
    from scratch: a finished run found without its ``done.json`` (a forced rerun) loses its
    checkpoints and ``leftovers`` and starts over."""
    import shutil

    checkpoint_dir = out / "checkpoints"
    discard_stale_checkpoints(checkpoint_dir, fingerprint)
    checkpoint = latest_complete_checkpoint(checkpoint_dir)
    if checkpoint is None or not is_final_checkpoint(checkpoint):
        return checkpoint
    log.warning(
        "cell %s: %s is the last step of a finished run whose done.json is gone "
        "(a forced rerun): training again from scratch",
        cell_id,
        checkpoint,
    )
    shutil.rmtree(checkpoint_dir)
    for path in map(Path, leftovers):
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    discard_stale_checkpoints(checkpoint_dir, fingerprint)
    return None
