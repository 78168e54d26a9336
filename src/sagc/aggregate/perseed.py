"""One number per seed, keyed by seed (never position): a seed one side lacks drops out of a pair."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from sagc import metrics
from sagc.aggregate import paired
from sagc.aggregate.collect import CellResult
from sagc.costs import step_cost

#: The history column each registrable cost is read from (``step_cost`` is computed).
COST_COLUMNS = {"decode_steps": metrics.DECODE_STEPS, "step_cost": "cost/step_cost"}


def histories(rs: list[CellResult]) -> dict[int, pd.DataFrame]:
    """Seed -> step-sorted history of every complete cell."""
    return {r.cell.seed: r.run.history.sort_values(metrics.STEP) for r in rs if r.complete}


def steps_of(history: pd.DataFrame, which: str, last_k: int = 5) -> pd.DataFrame:
    """The steps a statistic reads: all, second_half, first_quarter, last_quarter or last_k."""
    step = pd.to_numeric(history[metrics.STEP])
    if which == "second_half":
        return history[metrics.in_second_half(step, step.max())]
    if which == "first_quarter":
        return history[step <= step.max() / 4]
    if which == "last_quarter":
        return history[step > step.max() * 3 / 4]
    if which == "last_k":
        return history.iloc[-last_k:]
    if which != "all":
        raise ValueError(f"unknown step selection {which!r}")
    return history


def seed_means(rs: list[CellResult], metric: str, which: str = "all", last_k: int = 5) -> dict[int, float]:
    """Seed -> the mean of a per-step metric over the selected steps of that seed's run."""
    out = {}
    for seed, h in histories(rs).items():
        vals = pd.to_numeric(steps_of(h, which, last_k)[metric], errors="coerce").dropna()
        if len(vals):
            out[seed] = float(vals.mean())
    return out


def _paired_steps(ref_rs, ctrl_rs, column: str, prepare=lambda h: h):
    """(seed, ref values, ctrl values) of ``column`` on the steps both runs of a seed logged."""
    ref_h, ctrl_h = histories(ref_rs), histories(ctrl_rs)
    for seed in sorted(ref_h.keys() & ctrl_h.keys()):
        a, b = paired.paired_steps(prepare(ref_h[seed]), prepare(ctrl_h[seed]), column)
        if a.size:
            yield seed, a, b


def paired_differences(ref_rs, ctrl_rs, metric: str) -> dict[int, float]:
    """Seed -> mean of (ctrl - ref) over the steps both runs of that seed logged."""
    return {seed: float(np.mean(b - a)) for seed, a, b in _paired_steps(ref_rs, ctrl_rs, metric)}


def with_costs(history: pd.DataFrame) -> pd.DataFrame:
    """The history with a ``cost/step_cost`` column (NaN where an input was not logged)."""
    if COST_COLUMNS["step_cost"] in history.columns:
        return history

    def column(name: str):
        return pd.to_numeric(history[name], errors="coerce") if name in history.columns else math.nan

    cost = step_cost(column(metrics.DECODE_STEPS), column(metrics.TRAIN_PADDED_TOKENS))
    return history.assign(**{COST_COLUMNS["step_cost"]: cost})


def paired_totals(ref_rs, ctrl_rs, metric: str) -> dict[int, tuple[float, float]]:
    """Seed -> (summed ref, summed ctrl) ``metric`` (a column or a ``COST_COLUMNS`` name) over shared steps."""
    pairs = _paired_steps(ref_rs, ctrl_rs, COST_COLUMNS.get(metric, metric), with_costs)
    return {seed: (float(a.sum()), float(b.sum())) for seed, a, b in pairs}


def cost_log_ratios(ref_rs, ctrl_rs, metric: str) -> dict[int, float]:
    """Seed -> log(summed ref cost / summed ctrl cost) (a speed-up's test scale)."""
    return {s: math.log(r / c) for s, (r, c) in paired_totals(ref_rs, ctrl_rs, metric).items() if r > 0 and c > 0}


def speedup(ref_rs, ctrl_rs, metric: str) -> paired.Interval:
    """The geometric mean over seeds of summed ref cost / summed ctrl cost (paired steps)."""
    return paired.ratio_interval(list(paired_totals(ref_rs, ctrl_rs, metric).values()))


def eval_dir(r: CellResult) -> str:
    return str(Path(r.cell.eval_summary).parent)


def accuracy_differences(ref_rs, ctrl_rs, task: str) -> dict[int, float]:
    """Seed -> mean over the problems both evaluations hold of (ctrl - ref) avg@k."""
    ref = {r.cell.seed: r for r in ref_rs if r.complete}
    ctrl = {r.cell.seed: r for r in ctrl_rs if r.complete}
    out = {}
    for seed in sorted(ref.keys() & ctrl.keys()):
        a, b = paired.paired_docs(paired.doc_scores(eval_dir(ref[seed]), task),
                                  paired.doc_scores(eval_dir(ctrl[seed]), task))  # fmt: skip
        if a.size:
            out[seed] = float(np.mean(b - a))
    return out


def mean_over_tasks(per_task: list[dict[int, float]]) -> dict[int, float]:
    """Seed -> the mean of its per-task values, for the seeds every task has."""
    if not per_task:
        return {}
    seeds = set.intersection(*(set(d) for d in per_task))
    return {s: float(np.mean([d[s] for d in per_task])) for s in sorted(seeds)}


def output_length_log_ratios(ref_rs, ctrl_rs, tasks: list[str]) -> dict[int, float]:
    """Seed -> the mean over tasks of log(ref / ctrl) evaluation output tokens."""
    ref = {r.cell.seed: r.eval for r in ref_rs if r.complete and r.eval}
    ctrl = {r.cell.seed: r.eval for r in ctrl_rs if r.complete and r.eval}
    per_task = []
    for task in tasks:
        tokens = {s: (ref[s][task]["mean_output_tokens"], ctrl[s][task]["mean_output_tokens"])
                  for s in ref.keys() & ctrl.keys() if task in ref[s] and task in ctrl[s]}  # fmt: skip
        per_task.append({s: math.log(a / b) for s, (a, b) in tokens.items() if a > 0 and b > 0})
    return mean_over_tasks(per_task)
