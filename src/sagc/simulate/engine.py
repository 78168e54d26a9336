"""The step-time model and the simulation loop: vectorised for fixed G, or one ``GroupSizer``
call per step (same numbers; docs/controller.md, "The simulator's models")."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sagc.controller import FixedGroupSize, GroupSizer, SAGCConfig, fixed_group_size, make_group_sizer
from sagc.costs import TRAIN_TOKEN_WEIGHT, step_cost
from sagc.lengths import block_ratios
from sagc.simulate.config import SimConfig, ThroughputConfig
from sagc.simulate.sources import Block, ParametricLengths, RealRunLengths, ReplayLengths

SECONDS_PER_HOUR = 3600.0


@dataclass
class StepCosts:
    """Per-step seconds and token counts of a block of steps (arrays of equal length)."""

    rollout_s: np.ndarray
    train_s: np.ndarray
    step_s: np.ndarray
    tokens: np.ndarray  # sum(L): generated tokens
    padded_tokens: np.ndarray  # rows * max(L): the synchronous batch's footprint


def step_costs(block: np.ndarray, tp: ThroughputConfig) -> StepCosts:
    """Seconds of each step of ``block`` (steps, prompts, G) under the throughput model."""
    n, prompts, g = block.shape
    rows = prompts * g
    mx = block.reshape(n, -1).max(axis=1)
    total = block.reshape(n, -1).sum(axis=1)
    decoded = total if tp.decode_batching == "continuous" else rows * mx
    rollout = tp.prefill_token_s * rows * tp.prompt_tokens + tp.decode_step_s * mx + tp.decode_token_s * decoded
    trained = rows * (tp.prompt_tokens + mx) if tp.train_padding else rows * tp.prompt_tokens + total
    train = tp.train_token_s * trained
    return StepCosts(
        rollout_s=rollout,
        train_s=train,
        step_s=tp.step_overhead_s + rollout + train,
        tokens=total,
        padded_tokens=rows * mx,
    )


@dataclass
class SizingResult:
    """Per-step trace of one sizing over a simulated run."""

    sizing: str
    group_size: np.ndarray
    straggler: np.ndarray
    ratio: np.ndarray
    rollout_s: np.ndarray
    train_s: np.ndarray
    step_s: np.ndarray
    tokens: np.ndarray
    padded_tokens: np.ndarray
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def steps(self) -> int:
        return int(self.step_s.size)

    @property
    def decode_steps(self) -> np.ndarray:
        """Each step's decode steps: its longest completion (``padded_tokens`` = rows x it)."""
        return self.padded_tokens / (self.group_size * self._prompts())

    def cost(self, weight: float = TRAIN_TOKEN_WEIGHT) -> np.ndarray:
        """Each step's ``sagc.costs.step_cost``: decode steps plus ``weight`` x the padded
        trained tokens (as the trainer's ``cost/train_padded_tokens``)."""
        return step_cost(self.decode_steps, self.padded_tokens, weight)

    def summary(self) -> dict[str, float]:
        """The report's figures; padding efficiency is generated / padded tokens over the run."""
        total = float(self.step_s.sum())
        return {
            "sizing": self.sizing,
            "steps": self.steps,
            "straggler_rate": float(self.straggler.mean()),
            "total_hours": total / SECONDS_PER_HOUR,
            "mean_step_s": total / self.steps,
            "mean_group_size": float(self.group_size.mean()),
            "mean_log2_group_size": float(np.log2(self.group_size).mean()),
            "padding_efficiency": float(self.tokens.sum() / self.padded_tokens.sum()),
            "rollout_share": float(self.rollout_s.sum() / total),
            "rollouts": int((self.group_size * self._prompts()).sum()),
        }

    def _prompts(self) -> np.ndarray:
        return self.extra.get("prompts", np.ones_like(self.group_size))


_COSTS = ("rollout_s", "train_s", "step_s", "tokens", "padded_tokens")


def costs_by_group_size(block: Block, sizes: np.ndarray, tp: ThroughputConfig) -> dict[str, np.ndarray]:
    """Costs of every step of a block (an array or a list of per-step pools) at its own G."""
    n = len(block)
    out = {k: np.empty(n) for k in _COSTS}
    if isinstance(block, np.ndarray):
        for g in np.unique(sizes):
            idx = np.flatnonzero(sizes == g)
            c = step_costs(block[idx, :, :g], tp)
            for k in out:
                out[k][idx] = getattr(c, k)
    else:  # ragged: prompts vary per step
        for i, (pool, g) in enumerate(zip(block, sizes)):
            c = step_costs(pool[None, :, :g], tp)
            for k in out:
                out[k][i] = getattr(c, k)[0]
    return out


def _run(source, steps: int, width: int, tp: ThroughputConfig, sizes_of) -> dict[str, Any]:
    """The group sizes ``sizes_of(block)`` picks, the costs and (in ``extra``) the prompts of
    every step of ``source``, concatenated."""
    parts: dict[str, list] = {k: [] for k in ("group_size", *_COSTS, "prompts")}
    for _, block in source.blocks(steps, width):
        sizes = sizes_of(block)
        parts["group_size"].append(sizes)
        for k, v in costs_by_group_size(block, sizes, tp).items():
            parts[k].append(v)
        parts["prompts"].append([p.shape[0] for p in block])
    run = {k: np.concatenate(v) for k, v in parts.items()}
    run["extra"] = {"prompts": run.pop("prompts")}
    return run


def run_fixed(g: int, source, steps: int, width: int, tp: ThroughputConfig, tau: float, scope: str) -> SizingResult:
    """Fixed G, vectorised; straggler flags as ``FixedGroupSize.observe`` computes them."""
    ratios = []

    def sizes_of(block: Block) -> np.ndarray:
        if isinstance(block, np.ndarray):
            ratios.append(block_ratios(block[:, :, :g], scope))
        else:
            ratios.append(np.array([block_ratios(p[None, :, :g], scope)[0] for p in block]))
        return np.full(len(block), g)

    run = _run(source, steps, width, tp, sizes_of)
    ratio = np.concatenate(ratios)
    return SizingResult(sizing=f"g{g}", straggler=ratio > tau, ratio=ratio, **run)


def run_controller(
    sizer: GroupSizer, source, steps: int, width: int, tp: ThroughputConfig, name: str | None = None
) -> SizingResult:
    """Any group sizer, one ``next_group_size`` / ``observe`` pair per step."""
    if sizer.max_group_size > width:
        raise ValueError(f"the sizer can choose G={sizer.max_group_size} but the length pool is {width} wide")
    flags, ratios = [], []

    def sizes_of(block: Block) -> np.ndarray:
        sizes = np.empty(len(block), dtype=int)
        for i in range(sizes.size):
            sizes[i] = sizer.next_group_size()
            rec = sizer.observe(block[i][:, : sizes[i]])
            flags.append(rec.straggler)
            ratios.append(rec.ratio)
        return sizes

    run = _run(source, steps, width, tp, sizes_of)
    straggler, ratio = np.asarray(flags, dtype=bool), np.asarray(ratios, dtype=float)
    return SizingResult(sizing=name or type(sizer).__name__, straggler=straggler, ratio=ratio, **run)


def make_source(cfg: SimConfig):
    """The length source of a config and the number of steps it will run."""
    if cfg.source in ("parametric", "real_run"):
        model = ParametricLengths if cfg.source == "parametric" else RealRunLengths
        return model(cfg.lengths, cfg.steps, cfg.prompts_per_step, cfg.seed), cfg.steps
    src = ReplayLengths(cfg.lengths.trace, cfg.lengths, seed=cfg.seed)
    return src, src.n_steps(cfg.steps)


def simulate(
    cfg: SimConfig,
    sizer_factory: Callable[[str, SAGCConfig], GroupSizer] | None = None,
    fast_fixed: bool = True,
    source=None,
) -> dict[str, SizingResult]:
    """Run every sizing of ``cfg`` on the same length pool; results keyed by sizing name.
    ``sizer_factory(sizing, sagc_config)`` builds each policy (default: the sizing registry);
    the controller's seed is ``sagc.seed + cfg.seed``."""
    if source is None:
        source, steps = make_source(cfg)
    else:
        steps = source.n_steps(cfg.steps) if hasattr(source, "n_steps") else cfg.steps
    width = cfg.pool_width
    factory = sizer_factory or make_group_sizer
    sagc_cfg = SAGCConfig.from_dict({**cfg.sagc.to_dict(), "seed": cfg.sagc.seed + cfg.seed})
    results: dict[str, SizingResult] = {}
    for name in cfg.sizings:
        sizer = factory(name, sagc_cfg)
        if fast_fixed and isinstance(sizer, FixedGroupSize):
            results[name] = run_fixed(
                sizer.group_size, source, steps, width, cfg.throughput, sagc_cfg.tau, sagc_cfg.scope
            )
        else:
            results[name] = run_controller(sizer, source, steps, width, cfg.throughput, name)
    return results


def summary_table(results: dict[str, SizingResult]) -> list[dict[str, Any]]:
    """One row per sizing with, for every fixed G simulated, the speed-up against it
    (``speedup_vs_g<N>`` = T_gN / T, ``time_saved_vs_g<N>`` = 1 - T / T_gN)."""
    rows = [r.summary() for r in results.values()]
    fixed = {name: r.summary()["total_hours"] for name, r in results.items() if fixed_group_size(name) is not None}
    for row in rows:
        for name, hours in sorted(fixed.items(), key=lambda kv: fixed_group_size(kv[0])):
            row[f"speedup_vs_{name}"] = hours / row["total_hours"]
            row[f"time_saved_vs_{name}"] = 1.0 - row["total_hours"] / hours
    return rows
