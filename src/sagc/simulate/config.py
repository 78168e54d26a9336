"""Configuration of the straggler simulator: dataclasses with validation.

Every key can come from a YAML / JSON file (``SimConfig.from_dict``); a bad value raises
``ValueError`` naming the key (``throughput.decode_step_s``, ``lengths.sigma``, ...), an
unknown key raises too, so a typo never silently falls back to a default.

The throughput defaults model *one H200 running a 3B model* (Qwen2.5-3B / Llama-3.2-3B in
bf16, vLLM colocated with the trainer). They are assumptions, not measurements; the
numbers behind them are in ``ThroughputConfig``'s docstring. Because every speed-up the
simulator reports is a ratio of two runs on the same assumptions, the ratios are far less
sensitive to them than the absolute hours.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from sagc.controller import SAGCConfig, fixed_group_size, parse_sizing

DECODE_BATCHING = ("continuous", "static")
LENGTH_SOURCES = ("parametric", "replay")
UPSAMPLE = ("group", "step")


def _number(v: Any, key: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ValueError(f"{key} must be a finite number, got {v!r}")
    return float(v)


def _positive(v: Any, key: str, allow_zero: bool = False) -> float:
    x = _number(v, key)
    if x < 0 or (x == 0 and not allow_zero):
        raise ValueError(f"{key} must be {'>= 0' if allow_zero else '> 0'}, got {v!r}")
    return x


def _integer(v: Any, key: str, minimum: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"{key} must be an integer, got {v!r}")
    if v < minimum:
        raise ValueError(f"{key} must be >= {minimum}, got {v}")
    return v


def _probability(v: Any, key: str) -> float:
    x = _number(v, key)
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"{key} must lie in [0, 1], got {v!r}")
    return x


def _from_dict(cls, d: Any, prefix: str):
    if d is None:
        return cls()
    if not isinstance(d, dict):
        raise ValueError(f"{prefix} must be a mapping, got {type(d).__name__}")
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(d) - names)
    if unknown:
        raise ValueError(f"unknown key(s) in {prefix}: {unknown} (known: {sorted(names)})")
    return cls(**d)


@dataclass(frozen=True)
class ThroughputConfig:
    """Step-time model: ``step = overhead + prefill + decode + train`` (seconds).

    - decode, continuous batching (vLLM): decode step k costs ``decode_step_s +
      decode_token_s * active_k`` with ``active_k`` the rows still generating, so the
      rollout phase costs ``decode_step_s * max(L) + decode_token_s * sum(L)``: the longest
      rollout sets the number of steps, the others only add their own tokens.
      ``static`` batching (HF ``generate``) keeps every row to the end:
      ``decode_step_s * max(L) + decode_token_s * rows * max(L)``.
    - prefill: ``prefill_token_s * rows * prompt_tokens``.
    - train: ``train_token_s`` per token of the policy forward+backward (plus the old-policy
      log-prob forward). TRL pads the batch to its longest completion, so with
      ``train_padding`` the tokens are ``rows * (prompt_tokens + max(L))``; without it,
      ``rows * prompt_tokens + sum(L)`` (a packed trainer).
    - ``step_overhead_s``: weight sync to the inference engine, reward scoring, optimizer
      step: constant per step.

    Defaults (assumptions for one H200, 3B model, bf16):
    ``decode_step_s = 0.010``: ~100 tokens/s for a lone sequence under vLLM (kernel launch
    and weight reads dominate: 6 GB of weights at 4.8 TB/s is 1.3 ms, plus scheduling);
    ``decode_token_s = 5e-5``: batched decode saturates near 20k tokens/s;
    ``prefill_token_s = 2e-6``: prefill is compute-bound and ~25x cheaper per token;
    ``train_token_s = 7e-5``: ~8 * 3e9 FLOP per token (fwd + bwd + recompute + old log-probs)
    at ~35% of the H200's ~990 bf16 TFLOP/s;
    ``step_overhead_s = 3.0``; ``prompt_tokens = 200`` (a math prompt with its template).
    """

    decode_step_s: float = 0.010
    decode_token_s: float = 5e-5
    prefill_token_s: float = 2e-6
    train_token_s: float = 7e-5
    step_overhead_s: float = 3.0
    prompt_tokens: int = 200
    decode_batching: str = "continuous"
    train_padding: bool = True

    def __post_init__(self) -> None:
        p = "throughput."
        _positive(self.decode_step_s, p + "decode_step_s", allow_zero=True)
        _positive(self.decode_token_s, p + "decode_token_s", allow_zero=True)
        _positive(self.prefill_token_s, p + "prefill_token_s", allow_zero=True)
        _positive(self.train_token_s, p + "train_token_s", allow_zero=True)
        _positive(self.step_overhead_s, p + "step_overhead_s", allow_zero=True)
        _integer(self.prompt_tokens, p + "prompt_tokens", 0)
        if self.decode_batching not in DECODE_BATCHING:
            raise ValueError(
                f"{p}decode_batching must be one of {DECODE_BATCHING}, got {self.decode_batching!r}"
            )
        if not isinstance(self.train_padding, bool):
            raise ValueError(f"{p}train_padding must be true or false, got {self.train_padding!r}")

    @classmethod
    def from_dict(cls, d: Any) -> "ThroughputConfig":
        return _from_dict(cls, d, "throughput")


@dataclass(frozen=True)
class ParametricLengthConfig:
    """A lognormal body with a Pareto tail, both scaled by a median that drifts over training.

    For training step t of T (``frac = t / (T - 1)``), prompt p and rollout j:

    - the step median grows log-linearly: ``m_t = median_start * (median_end /
      median_start) ** frac`` (chains of thought lengthen as training goes on);
    - each prompt has its own scale ``m_tp = m_t * exp(prompt_sigma * z_p)`` (some prompts
      need longer answers: this is what makes whole groups long);
    - with probability ``q_t`` (``tail_prob_start`` -> ``tail_prob_end``, linear in frac)
      the rollout is a *runaway* from the tail ``m_tp * tail_min * Pareto(tail_alpha)``
      (a repetition loop or an over-long chain of thought); otherwise it is from the body
      ``m_tp * exp(sigma * z_pj)``;
    - lengths are rounded to whole tokens and clipped to ``[min_tokens, max_tokens]``
      (``max_tokens`` is the generation cap: truncated rows are the worst stragglers).
    """

    median_start: float = 500.0
    median_end: float = 1500.0
    sigma: float = 0.35
    prompt_sigma: float = 0.3
    tail_prob_start: float = 0.01
    tail_prob_end: float = 0.03
    tail_min: float = 2.0
    tail_alpha: float = 1.5
    min_tokens: int = 1
    max_tokens: int = 8192

    def __post_init__(self) -> None:
        p = "lengths."
        _positive(self.median_start, p + "median_start")
        _positive(self.median_end, p + "median_end")
        _positive(self.sigma, p + "sigma", allow_zero=True)
        _positive(self.prompt_sigma, p + "prompt_sigma", allow_zero=True)
        _probability(self.tail_prob_start, p + "tail_prob_start")
        _probability(self.tail_prob_end, p + "tail_prob_end")
        _number(self.tail_min, p + "tail_min")
        if not self.tail_min >= 1.0:
            raise ValueError(f"{p}tail_min must be >= 1 (a multiple of the median), got {self.tail_min}")
        _positive(self.tail_alpha, p + "tail_alpha")
        _integer(self.min_tokens, p + "min_tokens", 0)
        _integer(self.max_tokens, p + "max_tokens", 1)
        if self.max_tokens < self.min_tokens:
            raise ValueError(
                f"{p}max_tokens ({self.max_tokens}) must be >= lengths.min_tokens ({self.min_tokens})"
            )

    @classmethod
    def from_dict(cls, d: Any) -> "ParametricLengthConfig":
        return _from_dict(cls, d, "lengths")


@dataclass(frozen=True)
class ReplayConfig:
    """Replay of a recorded ``lengths.jsonl`` trace (format: ``sagc.trace``).

    ``cycle``: when the simulation has more steps than the trace, start over (with fresh
    resampling draws); otherwise that is an error. ``upsample``: where the extra rollouts
    come from when a controller asks for more than were recorded per prompt: the prompt's
    own group (``group``, keeps prompt-level length correlation) or the whole step
    (``step``). Resampling cannot invent a longer rollout than any recorded one, so replay
    from the largest-G run when you can.
    """

    trace: str = ""
    cycle: bool = False
    upsample: str = "group"

    def __post_init__(self) -> None:
        if not isinstance(self.trace, str) or not self.trace:
            raise ValueError("lengths.trace must name a lengths.jsonl file for source: replay")
        if not isinstance(self.cycle, bool):
            raise ValueError(f"lengths.cycle must be true or false, got {self.cycle!r}")
        if self.upsample not in UPSAMPLE:
            raise ValueError(f"lengths.upsample must be one of {UPSAMPLE}, got {self.upsample!r}")


@dataclass(frozen=True)
class SweepConfig:
    """The tau x delta grid of the sweep (SAGC re-run for every pair, fixed G re-measured
    for every tau since the straggler test depends on it)."""

    tau: tuple[float, ...] = (1.5, 2.0, 2.5, 3.0, 4.0)
    delta: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5)

    def __post_init__(self) -> None:
        for key in ("tau", "delta"):
            vals = getattr(self, key)
            if isinstance(vals, (str, bytes)) or not hasattr(vals, "__iter__"):
                raise ValueError(f"sweep.{key} must be a list of numbers, got {vals!r}")
            vals = tuple(_number(v, f"sweep.{key}") for v in vals)
            if not vals:
                raise ValueError(f"sweep.{key} must hold at least one value")
            object.__setattr__(self, key, vals)
        if any(t <= 1.0 for t in self.tau):
            raise ValueError(f"sweep.tau values must be > 1, got {list(self.tau)}")
        if any(not 0.0 < d < 1.0 for d in self.delta):
            raise ValueError(f"sweep.delta values must lie in (0, 1), got {list(self.delta)}")

    @classmethod
    def from_dict(cls, d: Any) -> "SweepConfig":
        return _from_dict(cls, d, "sweep")


@dataclass(frozen=True)
class SimConfig:
    """A whole simulation: which sizings, how many steps, which lengths, which hardware.

    ``sizings`` uses the pipeline's names (``g4``, ``g8``, ``g16``, ``sagc``); ``sagc``
    holds ``SAGCConfig`` keys (its tau and scope also define the fixed-G straggler test).
    ``prompts_per_step`` is constant when G changes (the tiny world's convention), so a
    smaller G means a smaller synchronous batch. ``steps`` is ignored for a replay without
    ``cycle`` (the trace's length is used). ``sweep`` is optional (null: no sweep).
    """

    name: str = "sim"
    seed: int = 0
    steps: int = 1000
    prompts_per_step: int = 8
    sizings: tuple[str, ...] = ("g4", "g8", "g16", "sagc")
    source: str = "parametric"
    sagc: SAGCConfig = field(default_factory=SAGCConfig)
    lengths: ParametricLengthConfig | ReplayConfig = field(default_factory=ParametricLengthConfig)
    throughput: ThroughputConfig = field(default_factory=ThroughputConfig)
    sweep: SweepConfig | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name must be a non-empty string, got {self.name!r}")
        _integer(self.seed, "seed", 0)
        _integer(self.steps, "steps", 1)
        _integer(self.prompts_per_step, "prompts_per_step", 1)
        if isinstance(self.sizings, (str, bytes)) or not self.sizings:
            raise ValueError(f"sizings must be a non-empty list such as [g4, g16, sagc], got {self.sizings!r}")
        object.__setattr__(self, "sizings", tuple(self.sizings))
        for s in self.sizings:
            parse_sizing(s, key="sizings")
        if len(set(self.sizings)) != len(self.sizings):
            raise ValueError(f"sizings has duplicates: {list(self.sizings)}")
        if self.source not in LENGTH_SOURCES:
            raise ValueError(f"source must be one of {LENGTH_SOURCES}, got {self.source!r}")
        want = ParametricLengthConfig if self.source == "parametric" else ReplayConfig
        if not isinstance(self.lengths, want):
            raise ValueError(f"lengths must be a {want.__name__} for source {self.source!r}")

    @property
    def fixed_sizes(self) -> tuple[int, ...]:
        return tuple(g for g in map(fixed_group_size, self.sizings) if g is not None)

    @property
    def pool_width(self) -> int:
        """The largest G any sizing of this run can choose: rollouts drawn per prompt."""
        return max(max(parse_sizing(s).group_sizes(self.sagc)) for s in self.sizings)

    @classmethod
    def from_dict(cls, d: Any) -> "SimConfig":
        if not isinstance(d, dict):
            raise ValueError(f"a simulator config must be a mapping, got {type(d).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown simulator config key(s): {unknown} (known: {sorted(known)})")
        d = dict(d)
        source = d.get("source", "parametric")
        if "sagc" in d:
            sagc = d["sagc"]
            if isinstance(sagc, dict):
                try:
                    d["sagc"] = SAGCConfig.from_dict(sagc)
                except (TypeError, ValueError) as e:
                    raise ValueError(f"sagc: {e}") from e
            elif not isinstance(sagc, SAGCConfig):
                raise ValueError(f"sagc must be a mapping of SAGCConfig keys, got {sagc!r}")
        if "lengths" in d and not isinstance(d["lengths"], (ParametricLengthConfig, ReplayConfig)):
            if source == "replay":
                d["lengths"] = _from_dict(ReplayConfig, d["lengths"], "lengths")
            else:
                d["lengths"] = ParametricLengthConfig.from_dict(d["lengths"])
        elif "lengths" not in d and source == "replay":
            raise ValueError("lengths.trace is required for source: replay")
        if "throughput" in d and not isinstance(d["throughput"], ThroughputConfig):
            d["throughput"] = ThroughputConfig.from_dict(d["throughput"])
        if d.get("sweep") is not None and not isinstance(d["sweep"], SweepConfig):
            d["sweep"] = SweepConfig.from_dict(d["sweep"])
        if "sizings" in d and isinstance(d["sizings"], list):
            d["sizings"] = tuple(d["sizings"])
        return cls(**d)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["sagc"] = self.sagc.to_dict()
        d["sizings"] = list(self.sizings)
        if self.sweep is not None:
            d["sweep"] = {"tau": list(self.sweep.tau), "delta": list(self.sweep.delta)}
        return d

    def replace(self, **changes: Any) -> "SimConfig":
        """A copy with some keys changed (nested configs passed as objects or dicts)."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d.update(changes)
        return SimConfig.from_dict(d)


def load_config(path: str | Path) -> SimConfig:
    """Read a simulator config from YAML (``.yaml`` / ``.yml``) or JSON."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"simulator config file not found: {path}")
    text = path.read_text()
    if path.suffix in (".yaml", ".yml"):
        import yaml

        data = yaml.safe_load(text)
    else:
        data = json.loads(text)
    try:
        return SimConfig.from_dict(data if data is not None else {})
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from e
