"""What the pipeline config's ``evaluate`` block asks for: settings, staged benchmarks, size."""

from __future__ import annotations

from typing import Any

from sagc.evaluate.config import EvalSettings
from sagc.evaluate.taskcfg import describe_plan, evaluation_plan, task_benchmarks, world_tasks
from sagc.pipeline.grid import Grid
from sagc.pipeline.schema import PipelineConfig

#: Keys of the evaluate block that choose which jobs run, not how one evaluates.
EVAL_PIPELINE_KEYS = ("base_models",)


def eval_settings(config: PipelineConfig) -> dict[str, Any]:
    """The evaluate block as stated; without ``tasks``, every packaged task of the config's world."""
    ev = config.stated("evaluate")
    if "tasks" not in ev:  # not setdefault: the world's task files are read only when needed
        ev["tasks"] = world_tasks(config.world)
    return ev


def staged_benchmarks(config: PipelineConfig) -> list[str]:
    """The benchmarks the hub world stages: those the evaluated tasks read, in task order."""
    return task_benchmarks(list(eval_settings(config)["tasks"]))


def evaluation_plan_line(config: PipelineConfig, grid: Grid) -> str:
    """The dry run's line on the evaluation's size: evaluated models x problems x samples x cap."""
    ev = eval_settings(config)
    settings = EvalSettings.from_dict({k: v for k, v in ev.items() if k not in EVAL_PIPELINE_KEYS})
    models = len(list(grid.cells())) + (len(grid.models) if config.evaluate.base_models else 0)
    return describe_plan(evaluation_plan(list(settings.tasks), settings.generation, settings.limit), models)
