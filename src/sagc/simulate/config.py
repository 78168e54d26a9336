"""Simulator config models; a bad or unknown key raises ``ValueError`` naming it (``lengths.sigma``).
The models they parametrise: docs/controller.md ("The simulator's models")."""

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import ConfigDict, Field, PlainValidator, field_validator, model_validator

from sagc.config_models import Expect, Flag, NonNegativeInt, Number, OneOf, PositiveInt, Section, Text
from sagc.controller import SAGCConfig, parse_sizing


def _check_clip(lengths):
    if lengths.max_tokens < lengths.min_tokens:
        raise ValueError(
            f"lengths.max_tokens ({lengths.max_tokens}) must be >= lengths.min_tokens ({lengths.min_tokens})"
        )
    return lengths


class ThroughputConfig(Section):
    """Step-time model, ``step = overhead + prefill + decode + train`` (seconds); defaults
    assume one H200 running a 3B model (formulas and numbers: docs/controller.md)."""

    section_key = "throughput"
    decode_step_s: Number(ge=0.0) = 0.010
    decode_token_s: Number(ge=0.0) = 5e-5
    prefill_token_s: Number(ge=0.0) = 2e-6
    train_token_s: Number(ge=0.0) = 7e-5
    step_overhead_s: Number(ge=0.0) = 3.0
    prompt_tokens: NonNegativeInt = 200
    decode_batching: OneOf(("continuous", "static")) = "continuous"
    train_padding: Flag = True


class ParametricLengthConfig(Section):
    """A lognormal body with a Pareto tail, both scaled by a per-prompt median that drifts
    over training; clipped to ``[min_tokens, max_tokens]`` (docs/controller.md)."""

    section_key = "lengths"
    median_start: Number(gt=0.0) = 500.0
    median_end: Number(gt=0.0) = 1500.0
    sigma: Number(ge=0.0) = 0.35
    prompt_sigma: Number(ge=0.0) = 0.3
    tail_prob_start: Number(ge=0.0, le=1.0) = 0.01
    tail_prob_end: Number(ge=0.0, le=1.0) = 0.03
    tail_min: Number(ge=1.0) = Field(2.0, description="a multiple of the median")
    tail_alpha: Number(gt=0.0) = 1.5
    min_tokens: NonNegativeInt = 1
    max_tokens: PositiveInt = 8192

    @model_validator(mode="after")
    def _check_clip(self) -> "ParametricLengthConfig":
        return _check_clip(self)


class RealRunLengthConfig(Section):
    """Stationary lengths with a real DAPO run's tail (docs/history/2026-12-03-real-run-lengths.md):
    ``L = scale * exp(prompt_sigma * z_p + c_pj + sigma * z_pj)``, ``c_pj`` a short answer, a runaway or 0."""

    section_key = "lengths"
    scale: Number(gt=0.0) = Field(767.0, description="median of the body, tokens")
    sigma: Number(ge=0.0) = Field(0.50, description="sd of log length of one prompt's completions, per component")
    prompt_sigma: Number(ge=0.0) = Field(0.24, description="sd of the prompts' log scales")
    short_prob: Number(ge=0.0, le=1.0) = 0.05
    short_scale: Number(gt=0.0) = Field(0.06, description="a short answer's scale, a multiple of the body's")
    long_prob: Number(ge=0.0, le=1.0) = 0.04
    long_scale: Number(gt=0.0) = Field(3.8, description="a runaway's scale, a multiple of the body's")
    min_tokens: NonNegativeInt = 1
    max_tokens: PositiveInt = 16384

    @model_validator(mode="after")
    def _check(self) -> "RealRunLengthConfig":
        if self.short_prob + self.long_prob > 1.0:
            raise ValueError(
                f"lengths.short_prob + lengths.long_prob must be <= 1, got {self.short_prob} + {self.long_prob}"
            )
        return _check_clip(self)


class ReplayConfig(Section):
    """Replay of a recorded ``lengths.jsonl``: ``cycle`` starts over at its end; ``upsample``
    draws extra rollouts from the prompt's ``group`` or the whole ``step``."""

    section_key = "lengths"
    trace: Text = Field(description="the lengths.jsonl file to replay")
    cycle: Flag = False
    upsample: OneOf(("group", "step")) = "group"


LENGTH_CONFIGS = {"parametric": ParametricLengthConfig, "replay": ReplayConfig, "real_run": RealRunLengthConfig}


def _numbers(expect: str, **bounds: float) -> Any:
    """A non-empty list of finite numbers within ``bounds``, as a tuple of floats."""
    number = Annotated[float, Field(strict=True, allow_inf_nan=False, **bounds)]
    return Annotated[tuple[number, ...], Field(min_length=1), Expect(expect)]


class SweepConfig(Section):
    """The tau x delta grid of the sweep."""

    section_key = "sweep"
    tau: _numbers("a non-empty list of numbers > 1", gt=1.0) = (1.5, 2.0, 2.5, 3.0, 4.0)
    delta: _numbers("a non-empty list of numbers in (0, 1)", gt=0.0, lt=1.0) = (0.1, 0.2, 0.3, 0.4, 0.5)


def _sagc_config(value: Any) -> SAGCConfig:
    if isinstance(value, SAGCConfig):
        return value
    if not isinstance(value, Mapping):
        raise ValueError(f"sagc must be a mapping of SAGCConfig keys, got {value!r}")
    try:
        return SAGCConfig.from_dict(dict(value))
    except (TypeError, ValueError) as e:
        raise ValueError(f"sagc: {e}") from None


_Sizings = Annotated[tuple[Text, ...], Field(min_length=1), Expect("a non-empty list such as [g4, g16, sagc]")]


class SimConfig(Section):
    """A whole simulation (``prompts_per_step`` stays fixed when G changes). ``sagc``'s tau and
    scope also define the fixed-G straggler test; ``sweep`` null: no sweep."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)
    name: Text = "sim"
    seed: NonNegativeInt = 0
    steps: PositiveInt = 1000
    prompts_per_step: PositiveInt = 8
    sizings: _Sizings = ("g4", "g8", "g16", "sagc")
    source: OneOf(tuple(LENGTH_CONFIGS)) = "parametric"
    sagc: Annotated[SAGCConfig, PlainValidator(_sagc_config)] = Field(default_factory=SAGCConfig)
    lengths: ParametricLengthConfig | ReplayConfig | RealRunLengthConfig = Field(default_factory=ParametricLengthConfig)
    throughput: ThroughputConfig = Field(default_factory=ThroughputConfig)
    sweep: SweepConfig | None = None

    @model_validator(mode="before")
    @classmethod
    def _lengths_of_the_source(cls, d: Any) -> Any:
        """``lengths`` is the block of the ``source`` (``LENGTH_CONFIGS``)."""
        if not isinstance(d, Mapping):
            return d
        source = d.get("source", "parametric")
        want = LENGTH_CONFIGS.get(source, ParametricLengthConfig)  # an unknown source fails on its own key
        lengths = d.get("lengths")
        if lengths is None:
            if source == "replay":
                raise ValueError("lengths.trace is required for source: replay")
            return {**d, "lengths": want()}
        if isinstance(lengths, tuple(LENGTH_CONFIGS.values())):
            if not isinstance(lengths, want):
                raise ValueError(f"lengths must be a {want.__name__} for source {source!r}")
            return d
        return {**d, "lengths": want.from_dict(lengths)}

    @field_validator("sizings")
    @classmethod
    def _known_distinct_sizings(cls, sizings: tuple[str, ...]) -> tuple[str, ...]:
        for s in sizings:
            parse_sizing(s, key="sizings")
        if len(set(sizings)) != len(sizings):
            raise ValueError(f"sizings has duplicates: {list(sizings)}")
        return sizings

    @property
    def pool_width(self) -> int:
        """The largest G any sizing of this run can choose: rollouts drawn per prompt."""
        return max(max(parse_sizing(s).group_sizes(self.sagc)) for s in self.sizings)

    @classmethod
    def from_dict(cls, d: Any) -> "SimConfig":
        if not isinstance(d, Mapping):
            raise ValueError(f"a simulator config must be a mapping, got {type(d).__name__}")
        return super().from_dict(d)

    def to_dict(self) -> dict[str, Any]:
        dumped = self.model_dump(exclude={"sagc"})
        d = {k: self.sagc.to_dict() if k == "sagc" else dumped[k] for k in type(self).model_fields}
        d["sizings"] = list(self.sizings)
        if self.sweep is not None:
            d["sweep"] = {"tau": list(self.sweep.tau), "delta": list(self.sweep.delta)}
        return d

    def replace(self, **changes: Any) -> "SimConfig":
        """A copy with some keys changed (nested configs passed as objects or dicts)."""
        current = {name: getattr(self, name) for name in type(self).model_fields}
        return SimConfig.from_dict({**current, **changes})


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
