"""One W&B run per training cell, one history row per step, keyed by ``step``; a resumed job
reuses the cell's run id (``<output_dir>/wandb_run_id``).
"""

from __future__ import annotations

import os
import uuid
import warnings
from pathlib import Path
from typing import Any

RUN_ID_FILE = "wandb_run_id"


def run_id_for(output_dir: Path, resuming: bool) -> str:
    """The cell's W&B run id: reused when resuming, a fresh one for a fresh start."""
    path = Path(output_dir) / RUN_ID_FILE
    if resuming and path.is_file():
        rid = path.read_text().strip()
        if rid:
            return rid
    rid = uuid.uuid4().hex[:12]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(rid + "\n")
    return rid


class StepLogger:
    """Thin wrapper over a ``wandb`` run; ``mode="disabled"`` logs nothing (still validated)."""

    def __init__(
        self,
        *,
        mode: str,
        project: str,
        run_id: str,
        directory: Path,
        entity: str | None = None,
        group: str | None = None,
        name: str | None = None,
        config: dict | None = None,
    ) -> None:
        self.run = None
        if mode == "disabled":
            return
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        os.environ["WANDB_DIR"] = str(directory)
        os.environ.setdefault("WANDB_X_DISABLE_STATS", "true")
        os.environ.setdefault("WANDB_SILENT", "true")
        import wandb

        settings = wandb.Settings(
            x_disable_stats=True, x_disable_meta=True, x_disable_machine_info=True,
            console="off", silent=True, save_code=False,
        )  # fmt: skip
        self.run = wandb.init(
            mode=mode, project=project, entity=entity, group=group, name=name, id=run_id,
            resume="allow", dir=str(directory), config=config or {}, settings=settings,
        )  # fmt: skip

    def log(self, row: dict[str, Any], step: int) -> None:
        if self.run is not None:
            try:
                self.run.log(row, step=int(step))
            except Exception as err:
                self._lost(err)

    def finish(self, exit_code: int = 0) -> None:
        if self.run is not None:
            try:
                self.run.finish(exit_code=exit_code)
            except Exception as err:
                self._lost(err)
            self.run = None

    def _lost(self, err: Exception) -> None:
        """W&B's service went away (a scheduler's SIGTERM reaches wandb-core too): stop logging
        instead of failing; the checkpoints keep the rows and a resumed run logs them again."""
        warnings.warn(
            f"W&B logging stopped ({type(err).__name__}: {err}); the steps are kept in the "
            "checkpoints and done.json, and a resumed run logs them again",
            RuntimeWarning,
            stacklevel=3,
        )
        self.run = None
