"""Rule-based group sizings ``aimd`` and ``threshold``: how much of SAGC a few-line rule
gets (docs/controller.md, "The rule-based baselines").
"""

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from typing import Annotated, Any

from pydantic import Field

from sagc.config_models import Number, PositiveInt
from sagc.controller.sagc import STATE_VERSION, SAGCConfig, StepRecord, _CandidateSizer, state_int, state_number
from sagc.settings import block_model, check, declared

_SAGC = declared(SAGCConfig)


@dataclass(frozen=True)
class RuleConfig:
    """The keys every rule shares with SAGC (declared on ``SAGCConfig``, reused here)."""

    candidates: _SAGC["candidates"] = SAGCConfig.candidates
    tau: _SAGC["tau"] = SAGCConfig.tau
    delta: _SAGC["delta"] = SAGCConfig.delta
    scope: _SAGC["scope"] = SAGCConfig.scope
    initial: _SAGC["initial"] = SAGCConfig.initial
    seed: _SAGC["seed"] = SAGCConfig.seed

    #: The policy's config block: names its keys in errors.
    block = "rule"

    def __post_init__(self) -> None:
        check(self, self.block)
        shared = {f.name: getattr(self, f.name) for f in fields(RuleConfig)}
        try:
            SAGCConfig.from_dict(shared)  # duplicates, initial among the candidates
        except ValueError as e:
            raise ValueError(f"{self.block}: {e}") from None

    @property
    def sorted_candidates(self) -> tuple[int, ...]:
        return tuple(sorted(self.candidates))

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "RuleConfig":
        """The rule's keys plus, inherited from the ``sagc`` block, any SAGC key (checked by
        ``SAGCConfig``, then unused unless the rule shares it)."""
        if not isinstance(d, dict):
            raise ValueError(f"{cls.block} must be a mapping of its keys, got {type(d).__name__}")
        own = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - own - set(_SAGC))
        if unknown:
            raise ValueError(f"unknown {cls.block} key(s): {unknown}")
        try:
            SAGCConfig.from_dict({k: v for k, v in d.items() if k in _SAGC})
        except ValueError as e:
            raise ValueError(f"{cls.block}: {e}") from None
        return cls(**{k: v for k, v in d.items() if k in own})

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "candidates": list(self.candidates)}

    @classmethod
    def block_model(cls, base: type) -> type:
        """The pipeline config's block: the rule's own keys (the shared ones come from ``sagc``)."""
        own = tuple(f.name for f in fields(RuleConfig))
        return block_model(cls, f"{cls.__name__}Block", base=base, exclude=own)


@dataclass(frozen=True)
class AIMDConfig(RuleConfig):
    """``aimd``: down one candidate after a straggler, up one after ``quiet_steps`` quiet steps."""

    quiet_steps: Annotated[
        PositiveInt | None,
        Field(description="quiet steps in a row before G moves up (null: ln 2 / -ln(1 - delta), rounded)"),
    ] = None
    block = "aimd"

    @property
    def climb_after(self) -> int:
        if self.quiet_steps is not None:
            return self.quiet_steps
        # Up and down moves balance at risk delta when (1 - delta) ** k = 1/2 (k = 2 at delta = 0.3).
        return max(1, round(math.log(2.0) / -math.log1p(-self.delta)))


@dataclass(frozen=True)
class ThresholdConfig(RuleConfig):
    """``threshold``: an EMA of the straggler flags against delta, with hysteresis ``margin``."""

    ema: Annotated[
        Number(gt=0, le=1),
        Field(description="weight of the newest straggler flag in the moving rate (1 / memory in steps)"),
    ] = 0.1
    margin: Annotated[
        Number(ge=0, lt=1), Field(description="G moves up only when the moving rate is below delta - margin")
    ] = 0.1
    block = "threshold"


class _Rule(_CandidateSizer):
    """Shared by the rules: G moves by ``_move`` (-1, 0 or +1 candidate, from this step's
    flag) after every step; each rule saves its ``own_keys`` beside the shared state, and
    ``_load_own_state`` checks them before anything is assigned."""

    own_keys: tuple[str, ...]

    def next_group_size(self) -> int:
        return self.group_size

    def observe(self, lengths: Iterable[Iterable[float]]) -> StepRecord:
        g = self.group_size
        stats = self._counter.measure(lengths)
        if stats is None:
            return self._counter.skipped_record(g)
        straggler = self._counter.is_straggler(stats)
        move = self._move(straggler)
        self._index = min(max(self._index + move, 0), len(self.candidates) - 1)
        return self._counter.record(g, stats, straggler)

    def state_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "version": STATE_VERSION, "config": self.config.to_dict(),
                "step": self._counter.step, "n_stragglers": self._counter.n_stragglers,
                "index": self._index, **{k: getattr(self, k) for k in self.own_keys}}  # fmt: skip

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict()``'s output; everything is checked before anything is
        assigned (``ValueError`` naming the key). The current config stays in force."""
        _, step, n_stragglers, index = self._check_common(state, self.own_keys, f"{self.kind} rule")
        own = self._load_own_state(state)
        self._counter.step, self._counter.n_stragglers, self._index = step, n_stragglers, index
        for key, value in own.items():
            setattr(self, key, value)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config})"


class AIMDRule(_Rule):
    """Down one candidate after a straggling step, up one after ``climb_after`` quiet steps."""

    kind = "aimd"
    config_class = AIMDConfig
    own_keys = ("quiet",)

    def __init__(self, config: AIMDConfig | None = None) -> None:
        super().__init__(config)
        self.quiet = 0  # quiet steps in a row since the last straggler or move

    def _move(self, straggler: bool) -> int:
        if straggler:
            self.quiet = 0
            return -1
        self.quiet += 1
        if self.quiet < self.config.climb_after:
            return 0
        self.quiet = 0
        return +1

    def _load_own_state(self, state: dict[str, Any]) -> dict[str, Any]:
        return {"quiet": state_int(state, self.kind, "quiet", 0)}


class ThresholdRule(_Rule):
    """An EMA of the straggler flags against delta: down above it, up below delta - margin."""

    kind = "threshold"
    config_class = ThresholdConfig
    own_keys = ("rate",)

    def __init__(self, config: ThresholdConfig | None = None) -> None:
        super().__init__(config)
        self.rate = float(self.config.delta)  # no evidence yet: at the budget, no move

    def _move(self, straggler: bool) -> int:
        cfg = self.config
        self.rate += cfg.ema * (float(straggler) - self.rate)
        if self.rate > cfg.delta:
            return -1
        return +1 if self.rate < cfg.delta - cfg.margin else 0

    def _load_own_state(self, state: dict[str, Any]) -> dict[str, Any]:
        return {"rate": state_number(state["rate"], "rate", 0.0, 1.0, self.kind)}
