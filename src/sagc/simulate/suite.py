"""How fast each controller variant meets its straggler budget: a suite of length worlds.

Every world is run for many seeds at each run length (16 and 64 steps by default, the
lengths of the tiny world's training cells and of a longer run). In one seed all
controllers and all fixed sizes see the same length pool (common random numbers, see
``sagc.simulate.sources``), and seed s draws a fresh pool and seeds every controller with s.

Worlds (``prompts`` prompts per step; straggler risks p(G) measured at tau = 2.5):

- ``binding``: stationary lengths whose budget binds between G = 4 and G = 8
  (p(4), p(8), p(16) ~ 0.18, 0.34, 0.55 against delta = 0.3);
- ``generous``: every G meets the budget (p(16) ~ 0.07): the right answer is the largest G;
- ``infeasible``: even G = 4 straggles in more than half the steps (p(4) ~ 0.56): the
  best is G = 4;
- ``drift``: lengths triple over the run and runaways grow from none to 3% of rollouts,
  so the feasible G falls from 16 to 4 within the run;
- ``replay:<name>``: a recorded ``lengths.jsonl`` (one per path given), resampled per seed.

Metrics per controller (each run, then mean and 95% t-interval over seeds):

- ``settle_step``: the first step after which the running straggler rate (stragglers so
  far / steps so far) stays <= delta + 0.05 until the end; a run that ends above counts as
  ``steps + 1`` (not settled within the run); ``settled`` is the share that did settle;
- ``regret_rollouts``: rollouts of the best static G under the budget in hindsight minus the
  controller's, over the run (the largest candidate G whose realised rate on this seed's
  pool is <= delta, or the smallest candidate if none is): positive = fewer samples than the
  best feasible static choice, negative = more (usually by overspending the budget);
- ``violation``: max(0, straggler rate - delta) over the run;
- ``straggler_rate``, ``second_half_rate`` (steps after the first half), ``mean_group_size``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from sagc.controller import SAGCConfig, fixed_group_size, make_group_sizer, parse_sizing
from sagc.simulate.config import ParametricLengthConfig, ReplayConfig, SimConfig
from sagc.simulate.engine import make_source, simulate
from sagc.simulate.sources import CachedSource

#: Margin over delta within which a run counts as settled (and a 16-step run must end).
SETTLE_MARGIN = 0.05

#: The pipeline config whose controller the suite studies: the default grid's, read from it.
GRID_CONFIG = Path(__file__).resolve().parents[3] / "configs" / "default.yaml"
#: The keys of its ``sagc`` block the suite takes (the others: ``SAGCConfig``'s defaults).
BASE_KEYS = ("candidates", "tau", "delta", "eta")


def base_sagc(config: str | Path = GRID_CONFIG) -> dict[str, Any]:
    """The controller's base settings: ``BASE_KEYS`` of the ``sagc`` block of ``config``."""
    import yaml

    path = Path(config)
    if not path.is_file():
        raise ValueError(f"the suite's controller settings come from a pipeline config; {path} does not "
                         "exist (pass --grid-config)")
    block = (yaml.safe_load(path.read_text()) or {}).get("sagc") or {}
    missing = [k for k in BASE_KEYS if k not in block]
    if missing:
        raise ValueError(f"{path}: the sagc block lacks {missing}")
    return {k: block[k] for k in BASE_KEYS}


#: The variants compared: the paper's controller, each option alone, and both.
VARIANTS: dict[str, dict[str, Any]] = {
    "sagc": {},
    "sagc-counterfactual": {"counterfactual": True},
    "sagc-constrained": {"selection": "constrained"},
    "sagc-fast": {"counterfactual": True, "selection": "constrained"},
}

#: Parametric worlds: ParametricLengthConfig keys (lengths in tokens, the tiny world's scale:
#: median ~40, cap 160). Measured risks at tau = 2.5, 4 prompts: see the module docstring.
WORLDS: dict[str, dict[str, Any]] = {
    "binding": dict(median_start=40.0, median_end=40.0, sigma=0.3, prompt_sigma=0.2,
                    tail_prob_start=0.012, tail_prob_end=0.012),
    "generous": dict(median_start=40.0, median_end=40.0, sigma=0.3, prompt_sigma=0.0,
                     tail_prob_start=0.0, tail_prob_end=0.0),
    "infeasible": dict(median_start=40.0, median_end=40.0, sigma=0.5, prompt_sigma=0.2,
                       tail_prob_start=0.02, tail_prob_end=0.02),
    "drift": dict(median_start=30.0, median_end=90.0, sigma=0.3, prompt_sigma=0.2,
                  tail_prob_start=0.0, tail_prob_end=0.03),
}  # fmt: skip
WORLD_COMMON = {"tail_min": 2.0, "tail_alpha": 1.5, "min_tokens": 1, "max_tokens": 480}

#: Columns of the per-run metrics, in table order.
METRICS = ("settle_step", "settled", "regret_rollouts", "violation", "straggler_rate",
           "second_half_rate", "mean_group_size")  # fmt: skip


@dataclass(frozen=True)
class SuiteConfig:
    """What the suite runs: worlds x run lengths x seeds x controllers."""

    steps: tuple[int, ...] = (16, 64)
    seeds: int = 200
    prompts: int = 4
    sagc: dict[str, Any] = field(default_factory=base_sagc)
    variants: dict[str, dict[str, Any]] = field(default_factory=lambda: dict(VARIANTS))
    worlds: tuple[str, ...] = tuple(WORLDS)
    traces: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.steps or any(isinstance(s, bool) or not isinstance(s, int) or s < 2 for s in self.steps):
            raise ValueError(f"steps must be integers >= 2, got {list(self.steps)}")
        if isinstance(self.seeds, bool) or not isinstance(self.seeds, int) or self.seeds < 2:
            raise ValueError(f"seeds must be an integer >= 2 (a confidence interval needs two), got {self.seeds!r}")
        if isinstance(self.prompts, bool) or not isinstance(self.prompts, int) or self.prompts < 1:
            raise ValueError(f"prompts must be an integer >= 1, got {self.prompts!r}")
        unknown = sorted(set(self.worlds) - set(WORLDS))
        if unknown:
            raise ValueError(f"worlds: unknown world(s) {unknown}; known: {sorted(WORLDS)}")
        for name, over in self.variants.items():
            sizing = parse_sizing(name, key="variants")
            if sizing.is_fixed or sizing.policy.name != "sagc":
                raise ValueError(f"variants: {name!r} must be 'sagc' or 'sagc-<name>'")
            try:
                self.sagc_config(name)
            except ValueError as e:
                raise ValueError(f"variants.{name}: {e}") from None
        for path in self.traces:
            if not Path(path).is_file():
                raise ValueError(f"traces: lengths trace not found: {path}")

    def sagc_config(self, variant: str) -> SAGCConfig:
        return SAGCConfig.from_dict({**self.sagc, **self.variants[variant]})

    def sizer(self, name: str, base: SAGCConfig):
        """``simulate``'s sizer factory: a fixed size, or ``base`` with the variant's keys."""
        return make_group_sizer(name, {**base.to_dict(), **self.variants.get(name, {})})

    @property
    def candidates(self) -> tuple[int, ...]:
        return SAGCConfig.from_dict(dict(self.sagc)).sorted_candidates


def world_config(world: str, steps: int, seed: int, suite: SuiteConfig) -> SimConfig:
    """The simulator config of one world, run length and seed (sizings: fixed + variants)."""
    fixed = tuple(f"g{g}" for g in suite.candidates)
    common = dict(name=world, seed=seed, steps=steps, prompts_per_step=suite.prompts,
                  sizings=fixed + tuple(suite.variants), sagc=SAGCConfig.from_dict(dict(suite.sagc)))  # fmt: skip
    if world.startswith("replay:"):
        trace = world[len("replay:"):]
        return SimConfig(source="replay", lengths=ReplayConfig(trace=trace, cycle=True), **common)
    return SimConfig(lengths=ParametricLengthConfig(**{**WORLD_COMMON, **WORLDS[world]}), **common)


def settle_step(straggler: np.ndarray, delta: float, margin: float = SETTLE_MARGIN) -> int:
    """First step (1-based) from which the running rate stays <= delta + margin to the end;
    ``len + 1`` when the run ends above it."""
    running = np.cumsum(straggler) / np.arange(1, straggler.size + 1)
    above = np.flatnonzero(running > delta + margin)
    return int(above[-1]) + 2 if above.size else 1


def run_metrics(group_size: np.ndarray, straggler: np.ndarray, prompts: np.ndarray,
                best_static_rollouts: float, delta: float) -> dict[str, float]:  # fmt: skip
    """The suite's metrics of one run (arrays per step)."""
    n = straggler.size
    rate = float(straggler.mean())
    settle = settle_step(straggler, delta)
    return {
        "settle_step": float(settle),
        "settled": float(settle <= n),
        "regret_rollouts": best_static_rollouts - float((group_size * prompts).sum()),
        "violation": max(0.0, rate - delta),
        "straggler_rate": rate,
        "second_half_rate": float(straggler[n // 2 :].mean()),
        "mean_group_size": float(group_size.mean()),
    }


def run_world(world: str, steps: int, suite: SuiteConfig) -> list[dict[str, Any]]:
    """One row per (seed, sizing): the metrics of every controller and fixed size."""
    delta = SAGCConfig.from_dict(dict(suite.sagc)).delta
    rows = []
    for seed in range(suite.seeds):
        cfg = world_config(world, steps, seed, suite)
        src, n = make_source(cfg)
        pool = CachedSource(src, n, cfg.pool_width)
        results = simulate(cfg, sizer_factory=suite.sizer, source=pool)
        fixed = {fixed_group_size(name): r for name, r in results.items() if fixed_group_size(name) is not None}
        feasible = [g for g, r in fixed.items() if r.straggler.mean() <= delta]
        best = max(feasible) if feasible else min(fixed)
        best_rollouts = float((fixed[best].group_size * fixed[best]._prompts()).sum())
        for name, r in results.items():
            m = run_metrics(r.group_size, r.straggler, r._prompts(), best_rollouts, delta)
            rows.append({"world": world, "steps": int(r.steps), "seed": seed, "sizing": name,
                         "best_static_g": best, **m})  # fmt: skip
    return rows


def mean_ci(values: Sequence[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95% t-interval."""
    from scipy import stats

    x = np.asarray(values, dtype=float)
    if x.size < 2:
        return float(x.mean()), math.nan
    sem = float(x.std(ddof=1)) / math.sqrt(x.size)
    return float(x.mean()), float(stats.t.ppf(0.975, x.size - 1)) * sem


def summarize(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean and 95% CI half-width of every metric per (world, steps, sizing)."""
    keys = list(dict.fromkeys((r["world"], r["steps"], r["sizing"]) for r in rows))
    out = []
    for world, steps, sizing in keys:
        runs = [r for r in rows if (r["world"], r["steps"], r["sizing"]) == (world, steps, sizing)]
        row: dict[str, Any] = {"world": world, "steps": steps, "sizing": sizing, "seeds": len(runs)}
        for m in METRICS:
            row[m], row[f"{m}_ci95"] = mean_ci([r[m] for r in runs])
        out.append(row)
    return out


def run_suite(suite: SuiteConfig) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """All runs (one row per world, run length, seed and sizing) and their summary."""
    worlds = list(suite.worlds) + [f"replay:{p}" for p in suite.traces]
    rows = [r for w in worlds for steps in suite.steps for r in run_world(w, steps, suite)]
    return rows, summarize(rows)


# ------------------------------------------------------------------------------ output

_SHOWN = (("straggler_rate", "rate", 2), ("second_half_rate", "2nd-half rate", 2),
          ("settled", "settled", 2), ("settle_step", "settle step", 1),
          ("regret_rollouts", "regret (rollouts)", 0), ("violation", "violation", 3),
          ("mean_group_size", "mean G", 1))  # fmt: skip


def markdown_table(summary: list[dict[str, Any]], delta: float) -> str:
    """The summary as Markdown: one table per run length, mean ± 95% CI half-width."""
    parts = []
    for steps in sorted({r["steps"] for r in summary}):
        rows = [r for r in summary if r["steps"] == steps]
        head = ["world", "sizing"] + [label for _, label, _ in _SHOWN]
        lines = [f"**{steps} steps** ({rows[0]['seeds']} seeds, delta = {delta}, "
                 f"settled = running rate within delta + {SETTLE_MARGIN} from that step on)", "",
                 "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]  # fmt: skip
        for r in rows:
            cells = [r["world"], r["sizing"]]
            for key, _, digits in _SHOWN:
                ci = r[f"{key}_ci95"]
                cells.append(f"{r[key]:.{digits}f} ± {ci:.{digits}f}" if math.isfinite(ci) else f"{r[key]:.{digits}f}")
            lines.append("| " + " | ".join(cells) + " |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


def write_suite(out_dir: str | Path, rows: list[dict[str, Any]], summary: list[dict[str, Any]],
                suite: SuiteConfig) -> list[Path]:  # fmt: skip
    """``runs.csv`` (every run), ``suite.csv`` (the summary) and ``suite.md`` (the table)."""
    import pandas as pd

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(out / "runs.csv", index=False)
    pd.DataFrame(summary).to_csv(out / "suite.csv", index=False)
    delta = SAGCConfig.from_dict(dict(suite.sagc)).delta
    (out / "suite.md").write_text(markdown_table(summary, delta))
    return [out / "runs.csv", out / "suite.csv", out / "suite.md"]
