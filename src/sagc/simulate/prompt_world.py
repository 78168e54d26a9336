"""Prompt-aware control in the simulator: a fixed set of prompts with their own lengths, visited
for several epochs, parametric (``PromptWorld``) or replayed (``PromptReplay``); the worlds and
what is reported: docs/prompt-aware.md, "Prompt worlds in the simulator"."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sagc.controller import GroupSizer, parse_sizing
from sagc.prompts import PromptStream
from sagc.simulate.config import ParametricLengthConfig, ThroughputConfig
from sagc.simulate.engine import SizingResult, costs_by_group_size
from sagc.simulate.suite import VARIANTS, base_sagc, mean_ci, table_cell, table_lines, write_outputs
from sagc.trace import TraceStep, read_trace

#: The suite's tiny-world scale with prompt scales spread wider than the tiny world's (sd of
#: log 0.5 vs ~0.25): what tail batching needs to matter.
HETERO = dict(median_start=40.0, median_end=40.0, sigma=0.3, prompt_sigma=0.5,
              tail_prob_start=0.01, tail_prob_end=0.01, tail_min=2.0, tail_alpha=1.5,
              min_tokens=1, max_tokens=480)  # fmt: skip

#: Rollouts drawn per prompt visit; a G takes the first G, so G = 4 sees a subset of G = 16.
WIDTH = 16


@dataclass(frozen=True)
class PromptWorldConfig:
    """A prompt-heterogeneous world; ``lengths`` are ``ParametricLengthConfig`` keys."""

    n_prompts: int = 64
    tail_coupling: float = 0.0
    feature_corr: float = 0.6
    log_tokens: float = 4.0
    token_sd: float = 0.4
    lengths: dict[str, Any] = field(default_factory=lambda: dict(HETERO))

    def __post_init__(self) -> None:
        if isinstance(self.n_prompts, bool) or not isinstance(self.n_prompts, int) or self.n_prompts < 2:
            raise ValueError(f"world.n_prompts must be an integer >= 2, got {self.n_prompts!r}")
        k = self.tail_coupling
        if isinstance(k, bool) or not isinstance(k, (int, float)) or not 0.0 <= k <= 3.0:
            raise ValueError(f"world.tail_coupling must lie in [0, 3], got {self.tail_coupling!r}")
        if not isinstance(self.feature_corr, (int, float)) or not -1.0 <= self.feature_corr <= 1.0:
            raise ValueError(f"world.feature_corr must lie in [-1, 1], got {self.feature_corr!r}")
        ParametricLengthConfig.from_dict(self.lengths)  # raises naming lengths.<key>


class PromptWorld:
    """Lengths of prompt visits in a ``PromptWorldConfig`` world, seeded."""

    def __init__(self, cfg: PromptWorldConfig, total_steps: int, seed: int) -> None:
        self.cfg = cfg
        self.lengths_cfg = ParametricLengthConfig.from_dict(cfg.lengths)
        self.total_steps = int(total_steps)
        self.seed = int(seed)
        self.n = cfg.n_prompts
        rng = np.random.default_rng([self.seed, 1 << 30])
        unit = rng.standard_normal(self.n)
        self.log_scale = self.lengths_cfg.prompt_sigma * unit
        k = cfg.tail_coupling  # a mean-one log-normal multiplier of the runaway probability
        self.tail_factor = np.exp(k * unit - k * k / 2.0)
        r = cfg.feature_corr
        token_z = r * unit + math.sqrt(max(0.0, 1.0 - r * r)) * rng.standard_normal(self.n)
        self.tokens = np.maximum(1, np.rint(np.exp(cfg.log_tokens + cfg.token_sd * token_z))).astype(int)

    def features(self) -> np.ndarray:
        """``[1, log(tokens)]`` per prompt: what a trainer knows before any rollout."""
        return np.c_[np.ones(self.n), np.log(self.tokens)]

    def lengths(self, step: int, prompt: int, visit: int, g: int) -> np.ndarray:
        """The ``g`` rollout lengths of the ``visit``-th visit of ``prompt`` at ``step``."""
        c = self.lengths_cfg
        frac = step / (self.total_steps - 1) if self.total_steps > 1 else 0.0
        median = c.median_start * (c.median_end / c.median_start) ** frac
        q = min(1.0, (c.tail_prob_start + frac * (c.tail_prob_end - c.tail_prob_start)) * self.tail_factor[prompt])
        if g > WIDTH:
            raise ValueError(f"G={g} is wider than the pool ({WIDTH} rollouts per visit)")
        rng = np.random.default_rng([self.seed, prompt, visit])
        z, u = rng.standard_normal(WIDTH)[:g], rng.random(WIDTH)[:g]
        scale = median * math.exp(self.log_scale[prompt])
        out = scale * np.exp(c.sigma * z)
        tail = u < q
        if tail.any():
            v = np.minimum(u[tail] / q, 1.0 - 1e-12)
            out[tail] = scale * c.tail_min * (1.0 - v) ** (-1.0 / c.tail_alpha)
        return np.clip(np.rint(out), c.min_tokens, c.max_tokens)


class PromptReplay:
    """A recorded trace with prompt ids (renumbered in order of first appearance): visit ``v`` of
    prompt ``i`` replays its group ``v mod (groups of i)`` in a seeded order, bootstrapped when G
    exceeds it. No features: the trace has no prompt text."""

    def __init__(self, trace: Sequence[TraceStep] | str, seed: int = 0) -> None:
        steps = read_trace(trace) if isinstance(trace, str) else list(trace)
        groups: dict[int, list[np.ndarray]] = {}
        for s in steps:
            if s.prompts is None:
                raise ValueError(f"trace step {s.step} has no 'prompts' key (written before prompt ids were recorded)")
            for pid, grp in zip(s.prompts, s.lengths):
                groups.setdefault(int(pid), []).append(np.asarray(grp, dtype=float))
        self.groups = list(groups.values())
        self.n = len(self.groups)
        self.seed = int(seed)

    def features(self) -> None:
        return None

    def lengths(self, step: int, prompt: int, visit: int, g: int) -> np.ndarray:
        recorded = self.groups[prompt]
        grp = recorded[visit % len(recorded)]
        rng = np.random.default_rng([self.seed, prompt, visit])
        out = grp[rng.permutation(grp.size)][:g]
        if g > grp.size:
            out = np.concatenate([out, grp[rng.integers(0, grp.size, g - grp.size)]])
        return out


@dataclass(frozen=True)
class Arm:
    """One policy: a registry sizing (default: ``name``) built as a grid cell of that name;
    ``stream`` names another sizing whose prompt stream it draws from (an ablation)."""

    name: str
    sizing: str | None = None
    stream: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "sizing", self.sizing or self.name)


#: Named like the grid's cells; ``sagc-fast-tail`` runs one SAGC over the tail-batched rounds,
#: without a posterior per round kind.
POLICIES = (
    Arm("g16"), Arm("g8"), Arm("g4"), Arm("sagc"), Arm("sagc-fast"),
    Arm("sagc-prompt-g16"), Arm("sagc-prompt-g8"),
    Arm("sagc-fast-tail", "sagc-fast", stream="sagc-prompt"),
    Arm("sagc-prompt"), Arm("sagc-prompt-fast"),
)  # fmt: skip

#: The variants the arms name, in a pipeline config's variants blocks (configs/prompt.yaml).
VARIANT_BLOCKS = {
    "sagc_variants": {"fast": VARIANTS["sagc-fast"]},
    "sagc_prompt_variants": {"fast": VARIANTS["sagc-fast"], "g16": {"group_size": 16}, "g8": {"group_size": 8}},
}


def build(arm: Arm, world, base: PromptStream, blocks: dict[str, Any]) -> tuple[GroupSizer, PromptStream]:
    """An arm's (group sizer, prompt stream over ``base``), seeded as the trainer builds a cell's;
    ``blocks``: a pipeline config's ``sagc``, ``sagc_prompt`` and variants blocks."""

    def sizer_of(name: str) -> GroupSizer:
        parsed = parse_sizing(name)
        return parsed.build(parsed.cell_block(blocks), seed=base.seed)

    sizer = sizer_of(arm.sizing)
    source = sizer if arm.stream is None else sizer_of(arm.stream)
    return sizer, source.prompt_stream(base, features=world.features())


def run_policy(sizer, stream, world, steps: int, prompts: int, tp: ThroughputConfig, name: str) -> SizingResult:
    """``steps`` synchronous steps of ``prompts`` prompts; lengths per prompt visit."""
    visits = np.zeros(world.n, dtype=int)
    blocks, sizes, flags, ratios, long_rounds = [], [], [], [], []
    for t in range(steps):
        g = sizer.next_group_size()
        idx = stream.take(prompts)
        long_rounds.append(stream.round_long)  # the kind of the round just drawn (the trainer reads it so)
        block = np.stack([world.lengths(t, i, visits[i], g) for i in idx])
        visits[idx] += 1
        rec = sizer.observe(block)
        stream.observe(idx, block)
        blocks.append(block)
        sizes.append(g)
        flags.append(rec.straggler)
        ratios.append(rec.ratio)
    sizes = np.asarray(sizes)
    extra = {"prompts": np.full(steps, prompts), "long_round": np.asarray(long_rounds, dtype=bool)}
    return SizingResult(sizing=name, group_size=sizes, straggler=np.asarray(flags, dtype=bool),
                        ratio=np.asarray(ratios), **costs_by_group_size(blocks, sizes, tp), extra=extra)  # fmt: skip


#: The eta the prompt-aware study's tables were measured with.
PROMPT_ETA = 2.0


@dataclass(frozen=True)
class PromptSuite:
    """Seeds x policies in one world; ``world`` builds the world of a seed."""

    world: Callable[[int], Any]
    name: str = "hetero"
    steps: int = 128
    prompts: int = 4
    seeds: int = 100
    sagc: dict[str, Any] = field(default_factory=lambda: {**base_sagc(), "eta": PROMPT_ETA})
    long_fraction: float = 0.25
    policies: tuple[Arm, ...] = POLICIES
    throughput: ThroughputConfig = field(default_factory=ThroughputConfig)
    reference: str = "g16"

    def __post_init__(self) -> None:
        if isinstance(self.seeds, bool) or not isinstance(self.seeds, int) or self.seeds < 2:
            raise ValueError(f"seeds must be an integer >= 2 (an interval needs two), got {self.seeds!r}")
        if self.reference not in {p.name for p in self.policies}:
            raise ValueError(f"reference {self.reference!r} is not one of the policies")

    def blocks(self) -> dict[str, Any]:
        """The arms' config blocks, shaped like a pipeline config's."""
        return {"sagc": self.sagc, "sagc_prompt": {"long_fraction": self.long_fraction}, **VARIANT_BLOCKS}


def run_seed(suite: PromptSuite, seed: int) -> list[dict[str, Any]]:
    """One row per policy: costs, straggler rate, mean G, and speed-ups over the reference."""
    world = suite.world(seed)
    rows = []
    for p in suite.policies:
        base = PromptStream(world.n, seed)
        sizer, stream = build(p, world, base, suite.blocks())
        r = run_policy(sizer, stream, world, suite.steps, suite.prompts, suite.throughput, p.name)
        long = r.extra["long_round"]
        tail = stream is not base  # the policy orders the prompts: rates per round kind
        rows.append({
            "world": suite.name, "seed": seed, "policy": p.name,
            "decode_steps": float(r.decode_steps.sum()),
            "step_s": float(r.step_s.sum()),
            "straggler_rate": float(r.straggler.mean()),
            "mean_group_size": float(r.group_size.mean()),
            "mean_log2_g": float(np.log2(r.group_size).mean()),
            "long_share": float(long.mean()),
            "straggler_rate_long": float(r.straggler[long].mean()) if tail and long.any() else math.nan,
            "straggler_rate_short": float(r.straggler[~long].mean()) if tail and (~long).any() else math.nan,
        })  # fmt: skip
    ref = next(r for r in rows if r["policy"] == suite.reference)
    for r in rows:
        r["decode_speedup"] = ref["decode_steps"] / r["decode_steps"]
        r["time_speedup"] = ref["step_s"] / r["step_s"]
    return rows


METRICS = ("decode_speedup", "time_speedup", "straggler_rate", "straggler_rate_short", "straggler_rate_long",
           "mean_group_size", "mean_log2_g", "long_share")  # fmt: skip


def summarize(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean and 95% t-interval half-width of every metric per (world, policy)."""
    out = []
    for world, policy in dict.fromkeys((r["world"], r["policy"]) for r in rows):
        runs = [r for r in rows if (r["world"], r["policy"]) == (world, policy)]
        row: dict[str, Any] = {"world": world, "policy": policy, "seeds": len(runs)}
        for m in METRICS:
            vals = [r[m] for r in runs if not math.isnan(r[m])]  # no long round: no long-round rate
            row[m], row[f"{m}_ci95"] = mean_ci(vals) if vals else (math.nan, math.nan)
        out.append(row)
    return out


def paired_ratio(rows: list[dict[str, Any]], a: str, b: str, metric: str = "decode_speedup") -> tuple[float, float]:
    """Mean and 95% half-width over seeds of ``metric(a) / metric(b)`` (paired by seed)."""
    by = {(r["seed"], r["policy"]): r[metric] for r in rows}
    seeds = sorted({r["seed"] for r in rows})
    return mean_ci([by[(s, a)] / by[(s, b)] for s in seeds])


def run(suite: PromptSuite) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rows = [r for s in range(suite.seeds) for r in run_seed(suite, s)]
    return rows, summarize(rows)


def markdown_table(summary: list[dict[str, Any]]) -> str:
    shown = (("decode_speedup", "decode speed-up vs g16", 2), ("time_speedup", "time speed-up vs g16", 2),
             ("straggler_rate", "straggler rate", 2), ("straggler_rate_short", "rate, short rounds", 2),
             ("straggler_rate_long", "rate, long rounds", 2), ("mean_group_size", "mean G", 1),
             ("mean_log2_g", "mean log2 G", 2), ("long_share", "long rounds", 2))  # fmt: skip

    def cell(r: dict[str, Any], key: str, digits: int) -> str:
        return "–" if math.isnan(r[key]) else table_cell(r, key, digits)

    return "\n".join(table_lines(summary, shown, by="policy", cell=cell)) + "\n"


def write(out_dir, rows: list[dict[str, Any]], summary: list[dict[str, Any]], notes: str = "") -> list:
    """``runs.csv`` (every run), ``prompt.csv`` (the summary) and ``prompt.md`` (the table)."""
    return write_outputs(out_dir, rows, summary, "prompt", markdown_table(summary) + ("\n" + notes if notes else ""))


def hetero_suite(seeds: int = 100, steps: int = 128, n_prompts: int = 64, prompt_sigma: float = 0.5,
                 feature_corr: float = 0.6, tail_coupling: float = 0.0, **kw) -> PromptSuite:  # fmt: skip
    """A prompt-heterogeneous world (the docs' tables)."""
    cfg = PromptWorldConfig(n_prompts=n_prompts, feature_corr=feature_corr, tail_coupling=tail_coupling,
                            lengths={**HETERO, "prompt_sigma": prompt_sigma})  # fmt: skip
    name = kw.pop("name", f"hetero(n={n_prompts}, sigma={prompt_sigma}, k={tail_coupling})")
    return PromptSuite(world=lambda s: PromptWorld(cfg, steps, s), name=name, steps=steps, seeds=seeds, **kw)


def replay_suite(trace: str, seeds: int = 50, steps: int = 64, **kw) -> PromptSuite:
    """A tiny-world trace with prompt ids, replayed per prompt visit."""
    steps_ = read_trace(trace)
    PromptReplay(steps_)  # raises now for a trace without prompt ids
    return PromptSuite(world=lambda s: PromptReplay(steps_, s), name=kw.pop("name", "replay"),
                       steps=steps, seeds=seeds, **kw)  # fmt: skip
