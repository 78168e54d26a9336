"""How fast each controller variant meets its straggler budget, over a suite of length worlds
(worlds, controllers and metrics: docs/controller.md, "The simulator suite: worlds and metrics")."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sagc.controller import SAGCConfig, fixed_group_size, make_group_sizer, parse_sizing
from sagc.simulate.config import LENGTH_CONFIGS, ReplayConfig, SimConfig
from sagc.simulate.engine import SizingResult, make_source, simulate
from sagc.simulate.sources import CachedSource

#: Margin over delta within which a run counts as settled (and a 16-step run must end).
SETTLE_MARGIN = 0.05

#: The default grid's config: the suite studies its controller (``BASE_KEYS`` of its ``sagc`` block).
GRID_CONFIG = Path(__file__).resolve().parents[3] / "configs" / "default.yaml"
BASE_KEYS = ("candidates", "tau", "eta")
#: The suite's worlds are calibrated so that this budget binds, whatever the grid's delta.
SUITE_DELTA = 0.3
#: The overlay whose blocks train the rule-based baselines.
RULES_CONFIG = GRID_CONFIG.with_name("beyond.yaml")
RULES = ("aimd", "threshold")  # sagc.controller.rules
#: The policies the suite can run (no prompt stream of their own).
SUITE_POLICIES = ("sagc",) + RULES
ORACLE = "oracle-mix"  # the rows of the oracle static mix


def _read_config(config: str | Path, whose: str) -> tuple[Path, dict[str, Any]]:
    """A pipeline config's path and mapping; ``whose`` settings it holds, for the error."""
    import yaml

    path = Path(config)
    if not path.is_file():
        raise ValueError(f"{whose} settings come from a pipeline config; {path} does not exist")
    return path, yaml.safe_load(path.read_text()) or {}


def base_sagc(config: str | Path = GRID_CONFIG) -> dict[str, Any]:
    """The controller's base settings: ``BASE_KEYS`` of the ``sagc`` block of ``config``."""
    path, data = _read_config(config, "the suite's controller")
    block = data.get("sagc") or {}
    missing = [k for k in BASE_KEYS if k not in block]
    if missing:
        raise ValueError(f"{path}: the sagc block lacks {missing}")
    return {**{k: block[k] for k in BASE_KEYS}, "delta": SUITE_DELTA}


def rule_blocks(config: str | Path = RULES_CONFIG) -> dict[str, dict[str, Any]]:
    """The rules' own blocks in the overlay ``config`` (the rest comes from ``sagc``, as in a cell)."""
    _, data = _read_config(config, "the rules'")
    return {p: dict(data.get(p) or {}) for p in RULES}


#: The variants compared: the paper's controller, each option alone, and both.
VARIANTS: dict[str, dict[str, Any]] = {
    "sagc": {},
    "sagc-counterfactual": {"counterfactual": True},
    "sagc-constrained": {"selection": "constrained"},
    "sagc-fast": {"counterfactual": True, "selection": "constrained"},
}

#: ParametricLengthConfig keys at the tiny world's scale (median ~40 tokens, cap 480).
PARAMETRIC_WORLDS: dict[str, dict[str, Any]] = {
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

#: Every world: its source and its lengths block.
WORLDS: dict[str, tuple[str, dict[str, Any]]] = {
    **{name: ("parametric", {**WORLD_COMMON, **keys}) for name, keys in PARAMETRIC_WORLDS.items()},
    "real": ("real_run", {}),  # RealRunLengthConfig's defaults: the real run's tail
}

#: Columns of the per-run metrics, in table order.
METRICS = ("settle_step", "settled", "regret_rollouts", "violation", "straggler_rate",
           "second_half_rate", "mean_group_size", "utility", "utility_regret", "decode_ratio",
           "cost_ratio")  # fmt: skip
#: The cost ratios whose share of the ceiling's saving the summary adds (``<ratio>_share``).
SAVINGS = ("decode_ratio", "cost_ratio")


@dataclass(frozen=True)
class SuiteConfig:
    """What the suite runs: worlds x run lengths x seeds x controllers."""

    steps: tuple[int, ...] = (16, 64)
    seeds: int = 200
    prompts: int = 4
    sagc: dict[str, Any] = field(default_factory=base_sagc)
    variants: dict[str, dict[str, Any]] = field(default_factory=lambda: {**VARIANTS, **{r: {} for r in RULES}})
    blocks: dict[str, dict[str, Any]] = field(default_factory=rule_blocks)
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
        for name in self.variants:
            sizing = parse_sizing(name, key="variants")
            if sizing.is_fixed or sizing.policy.name not in SUITE_POLICIES:
                raise ValueError(
                    f"variants: {name!r} must be one of {list(SUITE_POLICIES)}, or one of them with '-<name>'"
                )
            try:
                self.block(name)
            except ValueError as e:
                raise ValueError(f"variants.{name}: {e}") from None
        for path in self.traces:
            if not Path(path).is_file():
                raise ValueError(f"traces: lengths trace not found: {path}")

    def block(self, name: str, base: dict[str, Any] | None = None) -> dict[str, Any]:
        """The checked block of a controller, as a grid cell's: ``base`` (default: the suite's
        ``sagc``), then its policy's block, then the variant's keys."""
        sizing = parse_sizing(name)
        block = {**(self.sagc if base is None else base), **self.blocks.get(sizing.block, {}), **self.variants[name]}
        sizing.config(block)
        return block

    def sizer(self, name: str, base: SAGCConfig):
        """``simulate``'s sizer factory: a fixed size, or the controller's block over ``base``."""
        if name not in self.variants:
            return make_group_sizer(name, base)
        return make_group_sizer(name, self.block(name, base.to_dict()))

    @property
    def config(self) -> SAGCConfig:
        """The checked base controller block (its delta is the suite's budget)."""
        return SAGCConfig.from_dict(dict(self.sagc))


def world_config(world: str, steps: int, seed: int, suite: SuiteConfig) -> SimConfig:
    """The simulator config of one world, run length and seed (sizings: fixed + variants)."""
    fixed = tuple(f"g{g}" for g in suite.config.sorted_candidates)
    common = dict(name=world, seed=seed, steps=steps, prompts_per_step=suite.prompts,
                  sizings=fixed + tuple(suite.variants), sagc=suite.config)  # fmt: skip
    if world.startswith("replay:"):
        trace = world[len("replay:") :]
        return SimConfig(source="replay", lengths=ReplayConfig(trace=trace, cycle=True), **common)
    source, keys = WORLDS[world]
    return SimConfig(source=source, lengths=LENGTH_CONFIGS[source](**keys), **common)


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


def oracle_mix(fixed: dict[int, SizingResult], delta: float) -> dict[int, float]:
    """Weights of the fixed G's mix maximising mean log2 G with mixed rate <= delta (a linear
    programme); all on the smallest G when no mix meets it."""
    from scipy.optimize import linprog

    gs = sorted(fixed)
    rates = [float(fixed[g].straggler.mean()) for g in gs]
    lp = linprog(c=[-np.log2(g) for g in gs], A_ub=[rates], b_ub=[delta], A_eq=[[1.0] * len(gs)], b_eq=[1.0],
                 bounds=(0, None), method="highs")  # fmt: skip
    if lp.status != 0:
        return {g: float(g == gs[0]) for g in gs}
    return {g: float(w) for g, w in zip(gs, lp.x)}


def cost_metrics(r: SizingResult, ref: SizingResult, ceiling: SizingResult) -> dict[str, float]:
    """Utility and cost ratios of a run against ``ref`` (the largest fixed G), and the ceiling's
    (the smallest fixed G), which the savings shares need."""
    return {
        "utility": float(np.log2(r.group_size).mean()),
        "decode_ratio": float(r.decode_steps.sum() / ref.decode_steps.sum()),
        "cost_ratio": float(r.cost().sum() / ref.cost().sum()),
        "ceiling_decode_ratio": float(ceiling.decode_steps.sum() / ref.decode_steps.sum()),
        "ceiling_cost_ratio": float(ceiling.cost().sum() / ref.cost().sum()),
    }


def run_world(world: str, steps: int, suite: SuiteConfig) -> list[dict[str, Any]]:
    """One row per (seed, sizing): the metrics of every controller and fixed size, and of
    the oracle static mix (``ORACLE``)."""
    delta = suite.config.delta
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
        ref, ceiling = fixed[max(fixed)], fixed[min(fixed)]
        costs = {name: cost_metrics(r, ref, ceiling) for name, r in results.items()}
        mix = oracle_mix(fixed, delta)
        oracle = {k: sum(w * costs[f"g{g}"][k] for g, w in mix.items()) for k in costs[ref.sizing]}
        for name, r in results.items():
            m = run_metrics(r.group_size, r.straggler, r._prompts(), best_rollouts, delta)
            rows.append({"world": world, "steps": int(r.steps), "seed": seed, "sizing": name, "best_static_g": best,
                         **m, **costs[name], "utility_regret": oracle["utility"] - costs[name]["utility"]})  # fmt: skip
        rate = sum(w * float(fixed[g].straggler.mean()) for g, w in mix.items())
        rows.append({"world": world, "steps": steps, "seed": seed, "sizing": ORACLE, "best_static_g": best,
                     **{m: math.nan for m in METRICS}, **oracle, "straggler_rate": rate,
                     "violation": max(0.0, rate - delta), "utility_regret": 0.0,
                     "mean_group_size": sum(w * g for g, w in mix.items())})  # fmt: skip
    return rows


def mean_ci(values: Sequence[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95% t-interval."""
    from scipy import stats

    x = np.asarray(values, dtype=float)
    if x.size < 2:
        return float(x.mean()), math.nan
    sem = float(x.std(ddof=1)) / math.sqrt(x.size)
    return float(x.mean()), float(stats.t.ppf(0.975, x.size - 1)) * sem


def saving_share(ratios: Sequence[float], ceiling: Sequence[float]) -> tuple[float, float]:
    """The share of the ceiling's saving reached, mean(1 - ratio) / mean(1 - ceiling ratio)
    over seeds (paired), and the half-width of its 95% bootstrap interval."""
    from scipy import stats

    saved, most = 1.0 - np.asarray(ratios, dtype=float), 1.0 - np.asarray(ceiling, dtype=float)
    share = float(saved.mean() / most.mean())
    if saved.size < 2:
        return share, math.nan
    if np.array_equal(saved, most) or not saved.any():  # the ceiling itself, the reference: exact
        return share, 0.0
    ci = stats.bootstrap(
        (saved, most),
        lambda a, b, axis: a.mean(axis) / b.mean(axis),
        paired=True,
        vectorized=True,
        n_resamples=999,
        method="percentile",
        random_state=0,
    ).confidence_interval
    return share, float(ci.high - ci.low) / 2.0


def summarize(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean and 95% CI half-width of every metric per (world, steps, sizing), and the shares
    of the ceiling's savings (``SAVINGS``)."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["world"], r["steps"], r["sizing"]), []).append(r)
    out = []
    for (world, steps, sizing), runs in groups.items():
        row: dict[str, Any] = {"world": world, "steps": steps, "sizing": sizing, "seeds": len(runs)}
        for m in METRICS:
            row[m], row[f"{m}_ci95"] = mean_ci([r[m] for r in runs]) if m in runs[0] else (math.nan, math.nan)
        for m in SAVINGS:
            if f"ceiling_{m}" in runs[0]:
                row[f"{m}_share"], row[f"{m}_share_ci95"] = saving_share(
                    [r[m] for r in runs], [r[f"ceiling_{m}"] for r in runs]
                )
        out.append(row)
    return out


def run_suite(suite: SuiteConfig) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """All runs (one row per world, run length, seed and sizing) and their summary."""
    worlds = list(suite.worlds) + [f"replay:{p}" for p in suite.traces]
    rows = [r for w in worlds for steps in suite.steps for r in run_world(w, steps, suite)]
    return rows, summarize(rows)


_SHOWN = (("straggler_rate", "rate", 2), ("second_half_rate", "2nd-half rate", 2),
          ("settled", "settled", 2), ("settle_step", "settle step", 1),
          ("regret_rollouts", "regret (rollouts)", 0), ("violation", "violation", 3),
          ("mean_group_size", "mean G", 1))  # fmt: skip


#: The cost table's columns: (summary key, label, digits).
_COSTS = (("straggler_rate", "rate", 2), ("utility", "utility (mean log2 G)", 2),
          ("utility_regret", "utility regret", 2), ("decode_ratio", "decode / g16", 3),
          ("decode_ratio_share", "share of ceiling's decode saving", 2), ("cost_ratio", "cost / g16", 3),
          ("cost_ratio_share", "share of ceiling's cost saving", 2))  # fmt: skip


def table_cell(r: dict[str, Any], key: str, digits: int) -> str:
    """``mean ± 95% half-width`` of a summary row's metric (the mean alone without an interval)."""
    ci = r.get(f"{key}_ci95", math.nan)
    return f"{r[key]:.{digits}f} ± {ci:.{digits}f}" if math.isfinite(ci) else f"{r[key]:.{digits}f}"


def table_lines(rows: list[dict[str, Any]], columns: tuple, by: str = "sizing", cell=table_cell) -> list[str]:
    """A Markdown table of summary rows: world, ``by``, then ``columns`` (key, label, digits)."""
    head = ["world", by] + [label for _, label, _ in columns]
    body = ["| " + " | ".join([r["world"], r[by]] + [cell(r, k, d) for k, _, d in columns]) + " |" for r in rows]
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head), *body]


def markdown_table(summary: list[dict[str, Any]], delta: float) -> str:
    """The summary as Markdown: the convergence table per run length, then the cost tables."""
    lengths = sorted({r["steps"] for r in summary})
    parts = []
    for steps in lengths:
        rows = [r for r in summary if r["steps"] == steps and r["sizing"] != ORACLE]
        title = (f"**{steps} steps** ({rows[0]['seeds']} seeds, delta = {delta}, "
                 f"settled = running rate within delta + {SETTLE_MARGIN} from that step on)")  # fmt: skip
        parts.append("\n".join([title, "", *table_lines(rows, _SHOWN)]))
    for steps in lengths:
        rows = [r for r in summary if r["steps"] == steps and "decode_ratio_share" in r]
        title = (f"**{steps} steps: costs** ({rows[0]['seeds']} seeds, delta = {delta}; ratios to the largest "
                 f"fixed G on the same pools; ceiling = the smallest fixed G; {ORACLE} = the best static mix "
                 "of fixed G's meeting delta in hindsight)")  # fmt: skip
        parts.append("\n".join([title, "", *table_lines(rows, _COSTS)]))
    return "\n\n".join(parts) + "\n"


def write_outputs(out_dir: str | Path, rows: list[dict[str, Any]], summary: list[dict[str, Any]], name: str,
                  table: str) -> list[Path]:  # fmt: skip
    """``runs.csv`` (every run), ``<name>.csv`` (the summary) and ``<name>.md`` (``table``)."""
    import pandas as pd

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "runs.csv", out / f"{name}.csv", out / f"{name}.md"]
    pd.DataFrame(rows).to_csv(paths[0], index=False)
    pd.DataFrame(summary).to_csv(paths[1], index=False)
    paths[2].write_text(table)
    return paths


def write_suite(out_dir: str | Path, rows: list[dict[str, Any]], summary: list[dict[str, Any]],
                suite: SuiteConfig) -> list[Path]:  # fmt: skip
    """``runs.csv`` (every run), ``suite.csv`` (the summary) and ``suite.md`` (the table)."""
    return write_outputs(out_dir, rows, summary, "suite", markdown_table(summary, suite.config.delta))
