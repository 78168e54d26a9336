"""What the workflow prints about training when it loads: launches, memory plans, stop timing."""

from __future__ import annotations

import os
import warnings
from typing import Any

from sagc.pipeline.cells import resolved_cell
from sagc.pipeline.launch import (
    CELL_FILE,
    PreemptionWarning,
    cell_launch,
    cell_uses_cpu,
    command,
    stop_problems,
    stop_warning_s,
)
from sagc.pipeline.memory import card_gib, margins
from sagc.pipeline.schema import PipelineConfig


def train_lines(config: PipelineConfig, grid: Any, *, repo: str | os.PathLike, cpus_per_node: int) -> list[str]:
    """How each multi-process model's cells run, the memory lines, and what a stop needs (a
    ``PreemptionWarning`` per problem)."""
    for problem in stop_problems(config):
        warnings.warn(problem, PreemptionWarning, stacklevel=2)
    lines = []
    for model in grid.models:
        cell_id = next(c for c in grid.cells() if c.model == model)
        cell = resolved_cell(config, cell_id)[0]
        launch = cell_launch(cell)
        if launch.processes == 1:
            continue
        units = "CPU processes (gloo)" if cell_uses_cpu(cell) else "GPUs"
        where = f"{launch.nodes} nodes x {launch.processes_per_node}" if launch.nodes > 1 else f"{launch.processes}"
        cmd = command(cell, f"{cell['output_dir']}/{CELL_FILE}", repo=repo, cpus_per_node=cpus_per_node)
        lines.append(f"train: each {model} cell on {where} {units}, {launch.strategy}; {cell_id.id}: {cmd}")
    lines.extend(memory_lines(config, grid))
    step, save, warning = config.launch.stop_step_s, config.launch.stop_save_s, stop_warning_s(config)
    lines.append(
        f"stop: SLURM warns a train job {warning} s before its time limit (--signal=USR1@{warning}: "
        f"launch.stop_step_s {step} + launch.stop_save_s {save}); its trainers finish the step, "
        "checkpoint and exit 75"
    )
    return lines


def memory_lines(config: PipelineConfig, grid: Any) -> list[str]:
    """Each model x algorithm's peak per phase against the card (one cell of each: all train in
    passes of one size); nothing without a card."""
    if card_gib(config) is None:
        return []
    lines, seen = [], set()
    for cell in grid.cells():
        if (cell.model, cell.algorithm) in seen:
            continue
        seen.add((cell.model, cell.algorithm))
        plan = resolved_cell(config, cell)[0]["resolved"]["memory"]
        source = margins(config, cell.model).source
        lines.append(
            f"memory: {cell.model} {cell.algorithm}, {plan['rows_per_pass']} rows x "
            f"{plan['tokens_per_row']} tokens a pass, vLLM share {plan['vllm_share']}: generating "
            f"{plan['generating_gib']}, scoring {plan['scoring_gib']}, loss pass {plan['loss_pass_gib']} "
            f"of {plan['card_gib']} GiB per card ({source} margins)"
        )
    return lines
