"""Calibration against the paper's headline (G=16 straggles in 99.6% of steps, SAGC in 43.4%,
29.5 h vs 16.0 h): a grid search over the length model's shape and ``delta`` (objective and
limits: docs/controller.md, "Calibrating the simulator to the paper")."""

from __future__ import annotations

import itertools
import math
from typing import Any

from sagc.controller import SAGCConfig
from sagc.simulate.config import ParametricLengthConfig, SimConfig
from sagc.simulate.engine import make_source, simulate, summary_table
from sagc.simulate.sources import CachedSource

PAPER = {"straggler_rate_g16": 0.996, "straggler_rate_sagc": 0.434, "hours_g16": 29.5, "hours_sagc": 16.0}
PAPER_SPEEDUP = PAPER["hours_g16"] / PAPER["hours_sagc"]

#: The searched grid (a product): small enough to run in seconds at 1,000 steps.
GRID = {
    "sigma": (0.25, 0.3, 0.35, 0.4),
    "prompt_sigma": (0.0, 0.15, 0.3),
    "tail_prob_end": (0.005, 0.02, 0.05),
    "delta": (0.1, 0.2, 0.3),
}
#: What the result reports of each sizing at the paper's scale.
_AT_SCALE = ("straggler_rate", "total_hours", "mean_group_size", "padding_efficiency")


def loss(r16: float, r_sagc: float, speedup: float) -> float:
    return (
        ((r16 - PAPER["straggler_rate_g16"]) / 0.01) ** 2
        + ((r_sagc - PAPER["straggler_rate_sagc"]) / 0.05) ** 2
        + (math.log(speedup / PAPER_SPEEDUP) / 0.05) ** 2
    )


def _with(base: SimConfig, params: dict[str, float]) -> SimConfig:
    lengths = {**base.lengths.model_dump(), **{k: v for k, v in params.items() if k != "delta"}}
    sagc = {**base.sagc.to_dict(), "delta": params.get("delta", base.sagc.delta)}
    return base.replace(
        sizings=("g4", "g16", "sagc"),
        lengths=ParametricLengthConfig(**lengths),
        sagc=SAGCConfig.from_dict(sagc),
        sweep=None,
    )


def evaluate_point(base: SimConfig, params: dict[str, float], source=None) -> dict[str, Any]:
    """One grid point: its rates, SAGC's speed-up over G=16 and the loss."""
    rows = {r["sizing"]: r for r in summary_table(simulate(_with(base, params), source=source))}
    r16, rs, sp = rows["g16"]["straggler_rate"], rows["sagc"]["straggler_rate"], rows["sagc"]["speedup_vs_g16"]
    return {
        "params": dict(params),
        "straggler_rate_g4": rows["g4"]["straggler_rate"],
        "straggler_rate_g16": r16,
        "straggler_rate_sagc": rs,
        "speedup": sp,
        "mean_group_size_sagc": rows["sagc"]["mean_group_size"],
        "loss": loss(r16, rs, sp),
    }


def calibrate(base: SimConfig | None = None, grid: dict[str, tuple] | None = None) -> dict[str, Any]:
    """Grid-search the length model and delta; return the best point, the paper's targets,
    hours at the step count that puts fixed G=16 at 29.5 h, and every point tried."""
    base = base if base is not None else SimConfig()
    if base.source != "parametric":
        raise ValueError("calibration needs source: parametric (a replay has no shape to fit)")
    grid = grid if grid is not None else GRID
    unknown = set(grid) - set(GRID)
    if unknown:
        raise ValueError(f"calibration grid: unknown parameter(s) {sorted(unknown)}; known: {sorted(GRID)}")
    points = []
    shape_keys = [k for k in grid if k != "delta"]
    for shape in itertools.product(*(grid[k] for k in shape_keys)):
        shape_params = dict(zip(shape_keys, shape))
        # One pool per length shape: the delta values reuse it.
        cfg = _with(base, shape_params)
        src, steps = make_source(cfg)
        cached = CachedSource(src, steps, cfg.pool_width)
        for d in grid.get("delta", (base.sagc.delta,)):
            points.append(evaluate_point(base, {**shape_params, "delta": d}, source=cached))
    points.sort(key=lambda p: p["loss"])
    best = points[0]

    # Absolute hours: the step count at which fixed G=16 takes the paper's 29.5 h.
    cfg = _with(base, best["params"])
    rows = {r["sizing"]: r for r in summary_table(simulate(cfg))}
    steps_for_paper = max(1, round(PAPER["hours_g16"] * 3600.0 / rows["g16"]["mean_step_s"]))
    scaled = {r["sizing"]: r for r in summary_table(simulate(cfg.replace(steps=steps_for_paper)))}
    return {
        "paper": {**PAPER, "speedup": PAPER_SPEEDUP},
        "best": best,
        "base_steps": base.steps,
        "steps_for_paper_hours": steps_for_paper,
        "at_paper_scale": {name: {k: r[k] for k in _AT_SCALE} for name, r in scaled.items()},
        "calibrated_config": cfg.replace(steps=steps_for_paper, sizings=base.sizings).to_dict(),
        # The closest point that keeps the paper's "G=16 straggles nearly always" claim.
        "best_with_r16_at_least_0.99": next((p for p in points if p["straggler_rate_g16"] >= 0.99), None),
        "bound_r4_given_r16": 1.0 - (1.0 - best["straggler_rate_g16"]) ** 0.25,
        "points": points,
    }
