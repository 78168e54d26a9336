"""Gather every cell's run and evaluation summary, and say what is missing (docs/aggregation.md,
"Complete, missing, damaged")."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from sagc import metrics
from sagc.aggregate.errors import DamagedRunError, RunNotFoundError
from sagc.aggregate.grid import BaseModelOutputs, CellOutputs, ResultGrid
from sagc.aggregate.reader import OfflineReader, RunData, RunReader, make_reader
from sagc.aggregate.stats import cell_stats, missing_metrics

#: Written into the cell's train_dir by the trainer when training is complete.
DONE_FILE = "done.json"

#: Numeric fields of each task in an evaluation summary (docs/architecture.md); its ``pass_at_k``
#: curve is read as ``pass_at_n``, at k = samples_per_problem.
EVAL_FIELDS = (
    "accuracy",
    "accuracy_stderr",
    "accuracy_lenient",
    "samples_per_problem",
    "mean_output_tokens",
    "truncation_rate",
    "n_samples",
)


@dataclass
class CellResult:
    cell: CellOutputs
    run: RunData | None = None
    stats: dict[str, float] | None = None
    eval: dict[str, dict[str, float]] | None = None
    missing: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.missing


@dataclass
class BaseResult:
    base: BaseModelOutputs
    eval: dict[str, dict[str, float]] | None = None
    missing: list[str] = field(default_factory=list)


@dataclass
class Collected:
    grid: ResultGrid
    cells: list[CellResult]
    base: list[BaseResult]

    def missing(self) -> dict[str, list[str]]:
        """Cell id (or ``base:<model>``) -> what is missing, for every incomplete entry."""
        out = {r.cell.id: r.missing for r in self.cells if r.missing}
        out.update({f"base:{b.base.model}": b.missing for b in self.base if b.missing})
        return out


def read_eval_summary(path: str | Path) -> dict[str, dict[str, float]]:
    """The validated ``tasks`` mapping of an evaluation summary (``ValueError`` naming the file and key)."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: evaluation summary is not valid JSON: {exc}") from exc
    if not isinstance(raw, dict) or not isinstance(raw.get("tasks"), dict) or not raw["tasks"]:
        raise ValueError(f"{path}: evaluation summary needs a non-empty object under key 'tasks'")
    tasks: dict[str, dict[str, float]] = {}
    for task, values in raw["tasks"].items():
        if not isinstance(values, dict):
            raise ValueError(f"{path}: tasks.{task} must be an object, got {values!r}")
        row = {}
        for key in EVAL_FIELDS:
            v = values.get(key)
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise ValueError(f"{path}: tasks.{task}.{key} must be a number, got {v!r}")
            row[key] = float(v)
        curve = values.get("pass_at_k")
        n = str(int(row["samples_per_problem"]))
        if not isinstance(curve, dict) or isinstance(curve.get(n), bool) or not isinstance(curve.get(n), (int, float)):
            raise ValueError(f"{path}: tasks.{task}.pass_at_k must map k={n} (samples_per_problem) to a rate")
        row["pass_at_n"] = float(curve[n])
        tasks[task] = row
    return tasks


def _collect_cell(cell: CellOutputs, reader: RunReader, grid: ResultGrid) -> CellResult:
    result = CellResult(cell)
    try:
        result.run = reader.read(cell)
    except RunNotFoundError as exc:
        result.missing.append(f"no W&B run ({exc})")
    run = result.run
    if run is not None:
        if isinstance(reader, OfflineReader):
            if not (Path(cell.train_dir) / DONE_FILE).is_file():
                result.missing.append(f"training unfinished: no {DONE_FILE} in {cell.train_dir}")
            else:
                _check_not_damaged(cell, run)
        elif not run.finished:
            result.missing.append("training unfinished: the W&B run is not in state 'finished'")
        if run.history.empty:
            result.missing.append("the W&B run has no per-step history rows")
        else:
            last = int(run.history[metrics.STEP].max())
            if cell.steps is not None and last < cell.steps:
                result.missing.append(f"training unfinished: last logged step {last} of {cell.steps}")
            lacking = missing_metrics(run.history)
            if lacking:
                result.missing.append(f"metric(s) never logged: {', '.join(lacking)}")
            else:
                result.stats = cell_stats(run.history, grid.last_k)
    _read_eval(result, cell.eval_summary)
    return result


def _read_eval(result: CellResult | BaseResult, path: Path) -> None:
    if Path(path).is_file():
        result.eval = read_eval_summary(path)
    else:
        result.missing.append(f"evaluation summary not found: {path}")


def _check_not_damaged(cell: CellOutputs, run: RunData) -> None:
    done = Path(cell.train_dir) / DONE_FILE
    try:
        steps = json.loads(done.read_text()).get("steps")
    except (OSError, json.JSONDecodeError, AttributeError):
        steps = None  # done.json's shape is the trainer's business; the count is a bonus
    logged = int(run.history[metrics.STEP].max()) if not run.history.empty else 0
    short = isinstance(steps, int) and logged < steps
    if not (run.tail_truncated or short):
        return
    end = "ends inside a record" if run.tail_truncated else "ends"
    counted = f", {steps} steps" if isinstance(steps, int) else ""
    reason = (
        f"training finished ({done}{counted}) but this file {end} after step {logged}: damage, not an unfinished run"
    )
    rerun = f"snakemake --cores all -R {done} (with the run's --configfile)"  # docs/running.md, "Rerunning"
    raise DamagedRunError(run.sources[-1], cell.id, reason, rerun)


def collect(grid: ResultGrid, reader: RunReader | None = None) -> Collected:
    """Read every cell and base model of ``grid``; missing ones are noted, never raised."""
    reader = reader if reader is not None else make_reader(grid.wandb, grid.name)
    cells = [_collect_cell(cell, reader, grid) for cell in grid.cells]
    base = [BaseResult(b) for b in grid.base]
    for res in base:
        _read_eval(res, res.base.eval_summary)
    return Collected(grid, cells, base)
