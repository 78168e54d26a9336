"""W&B on a cluster: a warning at load when cluster jobs would log online, with the upload
command for offline runs (docs/cluster.md)."""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping

from sagc.pipeline.grid import Cell, Grid
from sagc.pipeline.schema import PipelineConfig

#: The offline run folders under a cell's W&B dir (``<cell>/wandb``, holding wandb's ``wandb/``).
OFFLINE_RUNS = "wandb/wandb/offline-run-*"


class WandbModeWarning(UserWarning):
    """Cluster jobs are set to log to W&B online, which needs network on the compute nodes."""


def offline_runs_glob(grid: Grid) -> str:
    """A shell glob of every offline W&B run folder of the grid's training cells."""
    return f"{grid.train_dir(Cell('*', '*', '*', '*'))}/{OFFLINE_RUNS}"  # type: ignore[arg-type]


def sync_command(config: PipelineConfig, grid: Grid) -> str:
    """The command that uploads the grid's offline runs (from a machine with network)."""
    wb = config.wandb
    flags = f"-p {wb.project} " if wb.project else ""
    flags += f"-e {wb.entity} " if wb.entity else ""
    return f"wandb sync {flags}{offline_runs_glob(grid)}"


def wandb_advice(config: PipelineConfig, grid: Grid, env: Mapping[str, str] = os.environ) -> str | None:
    """Why ``wandb.mode: online`` is risky on compute nodes and what to do instead, for the hub world
    (the executor is unknown at load) or inside a SLURM job; else None."""
    if config.wandb.mode != "online":
        return None
    if config.world != "hub" and "SLURM_JOB_ID" not in env:
        return None
    return (
        "config key 'wandb.mode' is online: a training job on a compute node without network fails "
        "when it starts its W&B run. On such a cluster set wandb.mode: offline (and wandb.source: "
        "offline, so the aggregation reads the run files), then upload the runs from a machine with "
        f"network: {sync_command(config, grid)}"
    )


def check_wandb(config: PipelineConfig, grid: Grid, env: Mapping[str, str] = os.environ) -> None:
    """``wandb_advice`` as a ``WandbModeWarning``, when there is advice to give."""
    if advice := wandb_advice(config, grid, env):
        # attributed here: Python drops a warning attributed to a Snakefile's frame
        warnings.warn(advice, WandbModeWarning, stacklevel=1)
