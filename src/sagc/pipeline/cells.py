"""What each job of the workflow is told (training and evaluation cells, the aggregation's grid):
pure functions of the checked config, so Snakemake reruns exactly the cells whose inputs changed."""

from __future__ import annotations

import shlex
from typing import Any

from sagc.controller import SAGCConfig, measurement, parse_sizing
from sagc.evaluate.config import EvalConfig
from sagc.pipeline.evaluation import EVAL_PIPELINE_KEYS, eval_settings
from sagc.pipeline.grid import Cell, Grid
from sagc.pipeline.launch import pipeline_launch
from sagc.pipeline.memo import per_config
from sagc.pipeline.memory import auto_accumulation, grid_group_sizes, memory_plan, vllm_share
from sagc.pipeline.schema import PipelineConfig
from sagc.pipeline.world import world_of
from sagc.train.config import DeviceSection, TrainConfig


def sizing_section(config: PipelineConfig, sizing: str) -> dict[str, Any]:
    """A cell's ``sizing`` section: its name and its policy's block, variant applied."""
    parsed = parse_sizing(sizing)
    return {"name": sizing, parsed.block: parsed.cell_block(config.policy_blocks())}


def straggler_tau(config: PipelineConfig) -> float:
    """The straggler threshold of every cell: the ``sagc`` block's tau, or ``SAGCConfig``'s default."""
    return measurement(config.policy_blocks()).tau


def measure_prompts(config: PipelineConfig) -> int:
    """Prompts per step of the straggler measurement: ``train.prompts_per_step``, or what the
    rollout budget gives the largest G."""
    train = config.train
    if train.prompts_per_step is not None:
        return train.prompts_per_step
    return max(1, train.rollout_budget // max(grid_group_sizes(config)))


def train_cell_config(config: PipelineConfig, grid: Grid, cell: Cell) -> dict[str, Any]:
    """One training cell's ``cell.json``: its settings, resolved, with ``auto`` accumulation sized and
    the memory plan (docs/architecture.md); ``ValueError`` names what is wrong."""
    settings = cell_settings(config, grid, cell)
    if settings["train"].get("gradient_accumulation_steps") == "auto":
        settings["train"].update(auto_accumulation(config, cell.model, settings))
    resolved = TrainConfig.from_dict(settings, check_vllm=False).resolved
    plan = memory_plan(config, cell.model, resolved)
    return {**settings, "resolved": {**resolved.model_dump(), "memory": plan and plan.model_dump()}}


@per_config
def resolved_cells(config: PipelineConfig) -> dict[Cell, tuple[dict[str, Any], TrainConfig] | ValueError]:
    """Every training cell as ``(cell.json, TrainConfig)`` or the ``ValueError`` refusing it, once per parse."""
    grid = Grid.from_config(config)
    cells: dict[Cell, tuple[dict[str, Any], TrainConfig] | ValueError] = {}
    for cell in grid.cells():
        try:
            file = train_cell_config(config, grid, cell)
            cells[cell] = (file, TrainConfig.from_dict(file, check_vllm=False))
        except ValueError as err:
            cells[cell] = err
    return cells


def resolved_cell(config: PipelineConfig, cell: Cell) -> tuple[dict[str, Any], TrainConfig]:
    """``resolved_cells(config)[cell]``; ``ValueError`` when the cell is refused."""
    entry = resolved_cells(config)[cell]
    if isinstance(entry, ValueError):
        raise ValueError(str(entry))
    return entry


def cell_settings(config: PipelineConfig, grid: Grid, cell: Cell) -> dict[str, Any]:
    """A training cell's settings in ``sagc.train``'s cell format, unresolved."""
    spec = config.models[cell.model]
    out = grid.train_dir(cell)
    train = {**config.stated("train"), "seed": cell.train_seed}
    launch = pipeline_launch(config, cell.model)
    # the trainer's keys: the memory plan's own (device.memory_*) stay in the pipeline
    device = {k: v for k, v in config.stated("device").items() if k in DeviceSection.model_fields}
    if device.get("vllm_gpu_memory_utilization") == "auto":
        device["vllm_gpu_memory_utilization"] = vllm_share(config, cell.model)
    return {
        "cell": {
            "id": cell.id,
            "config_name": grid.name,
            "model": cell.model,
            "algorithm": cell.algorithm,
            "sizing": cell.sizing,
            "seed": cell.seed,
        },
        "model": {
            "path": world_of(config).base_model_path(config, grid, cell.model),
            "revision": world_of(config).base_model_revision(spec),
            "tokenizer": None,
            "trust_remote_code": spec.trust_remote_code,
        },
        "data": {"train": f"{grid.data_dir}/train.jsonl"},
        "rewards": config.stated("rewards"),
        "train": train,
        "algorithm": {"name": cell.algorithm, **config.algorithm_overrides_of(cell.algorithm)},
        "sizing": sizing_section(config, cell.sizing),
        "wandb": {
            "mode": config.wandb.mode,
            "project": config.wandb.project,
            "entity": config.wandb.entity,
            "group": grid.name,
            "name": cell.id,
            "dir": f"{out}/wandb",
        },
        "device": device,
        # only with the keys the config states: one process otherwise, as before the section
        **({"launch": launch} if launch else {}),
        "output_dir": out,
    }


def eval_cell_config(
    config: PipelineConfig, grid: Grid, target: Cell | str, threads: int | None = None
) -> dict[str, Any]:
    """One evaluation job's ``EvalConfig``; ``target``: a trained cell, or a model name for its base
    model; ``threads``: the job's, when not ``evaluate.threads``."""
    settings = {k: v for k, v in eval_settings(config).items() if k not in EVAL_PIPELINE_KEYS}
    if threads is not None:
        settings["threads"] = threads
    if isinstance(target, Cell):
        job = {"model": f"{grid.train_dir(target)}/final", "out": grid.eval_dir(target), "cell": target.id}
    else:
        job = {
            **world_of(config).base_model_eval(config, grid, target),
            "out": grid.base_eval_dir(target),
            "cell": f"{target}/base",
        }
    return EvalConfig.from_dict({**settings, **job, "data_dir": world_of(config).eval_data_dir(grid)}).model_dump(
        mode="json"
    )


def aggregate_grid(config: PipelineConfig, grid: Grid) -> dict[str, Any]:
    """The grid description ``python -m sagc.aggregate --grid`` reads (``ResultGrid``)."""
    agg, wb = config.aggregate, config.wandb
    return {
        "name": grid.name,
        "time_unit": agg.time_unit,
        "last_k": agg.last_k,
        "allow_partial": agg.allow_partial,
        "tau": straggler_tau(config),
        "wandb": {"source": wb.source, "entity": wb.entity, "project": wb.project, "group": grid.name},
        "cells": [
            {
                "id": c.id,
                "model": c.model,
                "algorithm": c.algorithm,
                "sizing": c.sizing,
                "seed": c.seed,
                "train_dir": grid.train_dir(c),
                "eval_summary": f"{grid.eval_dir(c)}/summary.json",
                "steps": config.train.steps,
            }
            for c in grid.cells()
        ],
        "base": [
            {"model": m, "eval_summary": f"{grid.base_eval_dir(m)}/summary.json"}
            for m in (grid.models if config.evaluate.base_models else ())
        ],
        "tables_dir": grid.tables_dir,
        "figures_dir": grid.figures_dir,
        "delta": SAGCConfig.from_dict(config.policy_blocks().get("sagc") or {}).delta,  # picks the best static G
        "budgets": {s: b for s in grid.sizings if (b := sizing_budget(config, s)) is not None},
        "straggler_reports": world_of(config).straggler_reports(grid),
        "claims": config.stated("claims"),
    }


def sizing_budget(config: PipelineConfig, sizing: str) -> float | None:
    """The straggler budget delta of a controller sizing (variant applied); None without one."""
    parsed = parse_sizing(sizing)
    if parsed.is_fixed:
        return None
    return getattr(parsed.config(parsed.cell_block(config.policy_blocks())), "delta", None)


def cli_flags(params: dict[str, Any]) -> str:
    """``{"n_train": 100, "fast": True}`` -> ``--fast --n-train 100``, shell-quoted, sorted by key
    (reordering a YAML file must not rerun a job)."""
    parts = []
    for key, value in sorted(params.items()):
        flag = "--" + key.replace("_", "-")
        if value is True:
            parts.append(flag)
        elif value is False or value is None:
            continue
        elif isinstance(value, (list, tuple)):
            parts.append(flag + " " + " ".join(shlex.quote(str(v)) for v in value))
        elif isinstance(value, dict):  # --repeats aime24_boxed=64,gpqa_diamond_boxed=8
            parts.append(f"{flag} " + shlex.quote(",".join(f"{k}={v}" for k, v in sorted(value.items()))))
        else:
            parts.append(f"{flag} {shlex.quote(str(value))}")
    return " ".join(parts)
