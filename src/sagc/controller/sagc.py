"""SAGC (Straggler-Aware Group Control) and the fixed-G baseline with the same interface.

The algorithm, every default and the two options beyond the paper: docs/controller.md. All
randomness comes from one seeded Generator saved in ``state_dict()``, so a resumed run
yields the identical G sequence.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Annotated, Any, Protocol, runtime_checkable

import numpy as np
from pydantic import BeforeValidator, Field

from sagc.config_models import Flag, Integer, Number, OneOf, PositiveInt
from sagc.lengths import SCOPES, LengthStats, as_groups, length_stats, subgroup_ratios
from sagc.prompts import PromptStream
from sagc.settings import check

STATE_VERSION = 1

#: How ``next_group_size`` picks among the eligible candidates: the paper's Lagrangian
#: score, or the largest G whose sampled risk meets the budget.
SELECTIONS = ("lagrangian", "constrained")


def Whole(**bounds: int) -> Any:
    """An integer within ``bounds`` (ge/le), numpy's too; not a bool, not ``4.0``."""
    # The bounds come before the conversion: after it, pydantic would not put them in a JSON schema.
    plain_int = BeforeValidator(lambda v: int(v) if isinstance(v, np.integer) else v)
    return Annotated[int, Field(strict=True, **bounds), plain_int]


#: A group size: a group of one has no group-relative advantage.
GroupSize = Whole(ge=2)


@dataclass(frozen=True)
class SAGCConfig:
    """Hyper-parameters of the SAGC controller, each declared once here: ``validate`` checks
    them and the pipeline schema's ``sagc`` block is made from them. Lists are accepted for
    the tuples (YAML and JSON give lists), so the config stays hashable."""

    candidates: Annotated[
        tuple[GroupSize, ...], Field(min_length=1, description="the group sizes G the controller chooses from")
    ] = (4, 8, 16)
    tau: Annotated[
        Number(gt=1), Field(description="a step straggles when its longest rollout is over tau times the median one")
    ] = 2.0
    delta: Annotated[
        Number(gt=0, lt=1), Field(description="the straggler budget: the share of straggling steps tolerated")
    ] = 0.3
    eta: Annotated[Number(gt=0), Field(description="step size of the dual ascent on lambda")] = 0.5
    lambda_max: Annotated[Number(gt=0), Field(description="upper clip of lambda")] = 20.0
    forgetting: Annotated[
        Number(gt=0, le=1), Field(description="per-step decay of every posterior toward the prior (1: no forgetting)")
    ] = 0.95
    prior: Annotated[
        tuple[Number(gt=0), ...],
        Field(min_length=2, max_length=2, description="the Beta prior (alpha0, beta0) of every candidate's risk"),
    ] = (1.0, 1.0)
    initial: Annotated[
        Whole() | None, Field(description="G of the first rollout, one of the candidates (null: the middle one)")
    ] = None
    radius: Annotated[
        PositiveInt, Field(description="candidates eligible on each side of the current G (local search)")
    ] = 1
    scope: Annotated[
        OneOf(SCOPES), Field(description="step = max/median over the whole step; group = over any prompt group")
    ] = "step"
    seed: Annotated[Integer, Field(description="seed of the Thompson sampling")] = 0
    counterfactual: Annotated[
        Flag, Field(description="beyond the paper: also update every smaller G from the step's disjoint sub-groups")
    ] = False
    selection: Annotated[
        OneOf(SELECTIONS),
        Field(description="lagrangian = the paper's score; constrained = largest G whose sampled risk <= delta"),
    ] = "lagrangian"

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Every field against its declaration, then what no single field states."""
        check(self, "SAGCConfig")
        cands = self.candidates
        if len(set(cands)) != len(cands):
            raise ValueError(f"SAGCConfig.candidates has duplicates: {list(cands)}")
        if self.initial is not None and self.initial not in cands:
            raise ValueError(f"SAGCConfig.initial={self.initial} is not one of the candidates {list(cands)}")

    @property
    def sorted_candidates(self) -> tuple[int, ...]:
        return tuple(sorted(self.candidates))

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SAGCConfig:
        if not isinstance(d, dict):
            raise ValueError(f"SAGCConfig must be a mapping of its keys, got {type(d).__name__}")
        unknown = set(d) - {f for f in cls.__dataclass_fields__}
        if unknown:
            raise ValueError(f"unknown SAGCConfig key(s): {sorted(unknown)}")
        return cls(**d)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "candidates": list(self.candidates), "prior": list(self.prior)}


@dataclass
class StepRecord:
    """What one ``observe`` call saw and did. The posterior and choice fields are empty for
    a fixed G; ``subgroup_risk`` (``counterfactual``) maps each smaller G' to the straggler
    fraction of the step's G'-sub-steps; ``skipped``: a step without rollouts."""

    step: int
    group_size: int
    n_groups: int
    n_rollouts: int
    length_max: float
    length_median: float
    length_mean: float
    ratio: float
    straggler: bool
    straggler_rate: float
    lambda_: float | None = None
    posterior_mean: dict[int, float] = field(default_factory=dict)
    sampled_risk: dict[int, float] = field(default_factory=dict)
    scores: dict[int, float] = field(default_factory=dict)
    subgroup_risk: dict[int, float] = field(default_factory=dict)
    skipped: bool = False

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["lambda"] = d.pop("lambda_")
        return d


@runtime_checkable
class GroupSizer(Protocol):
    """What the trainer and the simulator need from a group-size policy; a policy subclasses
    it to inherit the default ``prompt_stream``."""

    candidates: tuple[int, ...]

    @property
    def max_group_size(self) -> int: ...
    def next_group_size(self) -> int: ...
    def observe(self, lengths: Iterable[Iterable[float]]) -> StepRecord: ...
    def state_dict(self) -> dict[str, Any]: ...
    def load_state_dict(self, state: dict[str, Any]) -> None: ...

    def prompt_stream(
        self, base: PromptStream, token_ids: Sequence[Sequence[int]] | None = None, features: np.ndarray | None = None
    ) -> PromptStream:
        """The stream the run's prompts come from, asked once before the first step; default:
        ``base`` unchanged (docs/controller.md, "Adding a policy")."""
        return base


class _StragglerCounter:
    """Step counting and the straggler test shared by every policy."""

    def __init__(self, tau: float, scope: str) -> None:
        self.tau = float(tau)
        self.scope = scope
        self.step = 0
        self.n_stragglers = 0

    def measure(self, lengths: Iterable[Iterable[float]]) -> LengthStats | None:
        stats = length_stats(lengths, self.scope)
        if stats is None:
            warnings.warn(
                "observe() got a step without any completion length; the step is skipped "
                "(no update of the straggler statistics)",
                RuntimeWarning,
                stacklevel=3,
            )
            return None
        self.step += 1
        return stats

    def is_straggler(self, stats: LengthStats) -> bool:
        straggler = stats.ratio > self.tau
        self.n_stragglers += int(straggler)
        return straggler

    @property
    def rate(self) -> float:
        return self.n_stragglers / self.step if self.step else 0.0

    def skipped_record(self, group_size: int) -> StepRecord:
        nan = float("nan")
        return StepRecord(
            step=self.step, group_size=group_size, n_groups=0, n_rollouts=0,
            length_max=nan, length_median=nan, length_mean=nan, ratio=nan,
            straggler=False, straggler_rate=self.rate, skipped=True,
        )  # fmt: skip

    def record(self, group_size: int, stats: LengthStats, straggler: bool, **extra) -> StepRecord:
        return StepRecord(
            step=self.step, group_size=group_size, n_groups=stats.n_groups,
            n_rollouts=stats.n_rollouts, length_max=stats.max, length_median=stats.median,
            length_mean=stats.mean, ratio=stats.ratio, straggler=straggler,
            straggler_rate=self.rate, **extra,
        )  # fmt: skip


class FixedGroupSize(GroupSizer):
    """The static baseline: always the same G, its stragglers counted exactly as SAGC's."""

    def __init__(self, group_size: int, tau: float = SAGCConfig.tau, scope: str = "step") -> None:
        if isinstance(group_size, bool) or not isinstance(group_size, (int, np.integer)):
            raise ValueError(f"FixedGroupSize: group_size must be an integer, got {group_size!r}")
        if group_size < 2:
            raise ValueError(f"FixedGroupSize: group_size must be >= 2, got {group_size}")
        if not (isinstance(tau, (int, float)) and math.isfinite(tau) and tau > 1.0):
            raise ValueError(f"FixedGroupSize: tau must be a finite number > 1, got {tau!r}")
        if scope not in SCOPES:
            raise ValueError(f"FixedGroupSize: scope must be one of {SCOPES}, got {scope!r}")
        self.group_size = int(group_size)
        self.candidates = (self.group_size,)
        self._counter = _StragglerCounter(tau, scope)

    @property
    def max_group_size(self) -> int:
        return self.group_size

    def next_group_size(self) -> int:
        return self.group_size

    def observe(self, lengths: Iterable[Iterable[float]]) -> StepRecord:
        stats = self._counter.measure(lengths)
        if stats is None:
            return self._counter.skipped_record(self.group_size)
        straggler = self._counter.is_straggler(stats)
        return self._counter.record(self.group_size, stats, straggler)

    def state_dict(self) -> dict[str, Any]:
        return {
            "kind": "fixed",
            "version": STATE_VERSION,
            "group_size": self.group_size,
            "step": self._counter.step,
            "n_stragglers": self._counter.n_stragglers,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict()``'s output; a bad state raises ``ValueError`` naming the key
        and changes nothing."""
        check_state(state, "fixed", ("group_size", "step", "n_stragglers"))
        group_size = state_int(state, "fixed", "group_size", 2)
        if group_size != self.group_size:
            raise ValueError(
                f"state was saved for FixedGroupSize({group_size}), "
                f"cannot load it into FixedGroupSize({self.group_size})"
            )
        self._counter.step, self._counter.n_stragglers = state_counts(state, "fixed")

    def __repr__(self) -> str:
        return f"FixedGroupSize({self.group_size}, tau={self._counter.tau}, scope={self._counter.scope!r})"


class _CandidateSizer(GroupSizer):
    """A policy that walks the sorted candidates (SAGC and the rules): the current G, the
    straggler counter and the checks of a saved state that they share."""

    kind: str
    config_class: type

    def __init__(self, config: Any = None) -> None:
        self.config = config if config is not None else self.config_class()
        self.candidates = self.config.sorted_candidates
        initial = self.config.initial
        self._index = self.candidates.index(initial) if initial is not None else (len(self.candidates) - 1) // 2
        self._counter = _StragglerCounter(self.config.tau, self.config.scope)

    @property
    def group_size(self) -> int:
        """The G chosen last (the one the next ``observe`` is attributed to)."""
        return self.candidates[self._index]

    @property
    def max_group_size(self) -> int:
        return self.candidates[-1]

    @property
    def straggler_rate(self) -> float:
        return self._counter.rate

    def _check_common(self, state: Any, keys: Sequence[str], what: str) -> tuple[Any, int, int, int]:
        """The saved config, step, straggler count and index of a state, checked; ``what``
        names this policy when the candidates differ."""
        check_state(state, self.kind, ("config", "step", "n_stragglers", "index", *keys))
        try:
            saved = self.config_class.from_dict(state["config"])
        except (TypeError, ValueError) as e:
            raise ValueError(f"{self.kind} state key 'config': {e}") from None
        if saved.sorted_candidates != self.candidates:
            raise ValueError(
                f"state was saved with candidates {list(saved.sorted_candidates)}, "
                f"this {what} has {list(self.candidates)}"
            )
        step, n_stragglers = state_counts(state, self.kind)
        return saved, step, n_stragglers, state_int(state, self.kind, "index", 0, len(self.candidates) - 1)


class SAGCController(_CandidateSizer):
    """Online primal-dual group-size control with Thompson sampling (docs/controller.md)."""

    kind = "sagc"
    config_class = SAGCConfig

    def __init__(self, config: SAGCConfig | None = None) -> None:
        if config is not None:
            config.validate()
        super().__init__(config)
        cfg = self.config
        # Plain lists, not arrays: with 3-8 candidates, Python beats numpy's per-call overhead.
        self._utility = [math.log2(g) for g in self.candidates]
        self._prior = (float(cfg.prior[0]), float(cfg.prior[1]))
        self.alpha = [self._prior[0]] * len(self.candidates)
        self.beta = [self._prior[1]] * len(self.candidates)
        self.lambda_ = 0.0
        self._rng = np.random.default_rng(cfg.seed)
        self._last_sampled: dict[int, float] = {}
        self._last_scores: dict[int, float] = {}
        self._started = False

    def eligible(self) -> list[int]:
        """Indices the local-search restriction allows from the current G."""
        r = self.config.radius
        return list(range(max(0, self._index - r), min(len(self.candidates), self._index + r + 1)))

    def next_group_size(self) -> int:
        """Thompson-sample the risk of every eligible G and pick the best Lagrangian score
        (or, with ``selection="constrained"``, the largest G whose sampled risk is <= delta).

        The very first rollout uses the initial G: with no observation yet (lambda = 0)
        the score would always favour the largest neighbour.
        """
        if self._counter.step == 0 and not self._started:
            self._started = True
            return self.group_size
        idx = self.eligible()
        # Scalar draws: cheaper than the vectorised call for a handful of candidates.
        sampled = [float(self._rng.beta(self.alpha[i], self.beta[i])) for i in idx]
        scores = [self._utility[i] - self.lambda_ * p for i, p in zip(idx, sampled)]
        if self.config.selection == "lagrangian":
            # Ties (e.g. lambda = 0) go to the larger G: more samples per prompt for free.
            best = max(range(len(idx)), key=lambda k: (scores[k], idx[k]))
        else:  # "constrained": idx is ascending, so the last feasible one is the largest G
            delta = self.config.delta
            best = next((k for k in range(len(idx) - 1, -1, -1) if sampled[k] <= delta), 0)
        self._index = idx[best]
        self._last_sampled = {self.candidates[i]: p for i, p in zip(idx, sampled)}
        self._last_scores = {self.candidates[i]: v for i, v in zip(idx, scores)}
        return self.group_size

    def observe(self, lengths: Iterable[Iterable[float]]) -> StepRecord:
        """Update lambda and the posteriors from the step that just ran at ``group_size``.

        ``lengths``: one list of completion lengths (tokens, truncated rows included) per prompt
        group, in generation order; empty groups are ignored. A step without any length is
        skipped with a ``RuntimeWarning``; NaN, infinite, negative or impossibly long
        (> ``sagc.lengths.MAX_LENGTH``) lengths raise ``ValueError`` before any state changes.
        """
        g = self.group_size
        cfg = self.config
        if cfg.counterfactual and not isinstance(lengths, (list, tuple, np.ndarray)):
            lengths = list(lengths)  # read twice below
        stats = self._counter.measure(lengths)
        if stats is None:
            return self._counter.skipped_record(g)
        straggler = self._counter.is_straggler(stats)
        s = float(straggler)
        self.lambda_ = float(min(max(self.lambda_ + cfg.eta * (s - cfg.delta), 0.0), cfg.lambda_max))
        gamma = cfg.forgetting
        a0, b0 = (1.0 - gamma) * self._prior[0], (1.0 - gamma) * self._prior[1]
        self.alpha = [gamma * a + a0 for a in self.alpha]
        self.beta = [gamma * b + b0 for b in self.beta]
        self.alpha[self._index] += s
        self.beta[self._index] += 1.0 - s
        subgroup_risk = self._observe_subgroups(lengths) if cfg.counterfactual else {}
        return self._counter.record(
            g, stats, straggler,
            lambda_=self.lambda_,
            posterior_mean=self.posterior_mean(),
            sampled_risk=dict(self._last_sampled),
            scores=dict(self._last_scores),
            subgroup_risk=subgroup_risk,
        )  # fmt: skip

    def _observe_subgroups(self, lengths: Iterable[Iterable[float]]) -> dict[int, float]:
        """Give every candidate below the current G its sub-steps' straggler fraction."""
        groups = as_groups(lengths)
        risk = {}
        for i in range(self._index):
            ratios = subgroup_ratios(groups, self.candidates[i], self.config.scope)
            if ratios.size == 0:  # a group too small to hold one sub-group of this size
                continue
            f = float(np.count_nonzero(ratios > self.config.tau)) / ratios.size
            self.alpha[i] += f
            self.beta[i] += 1.0 - f
            risk[self.candidates[i]] = f
        return risk

    def posterior_mean(self) -> dict[int, float]:
        return {g: a / (a + b) for g, a, b in zip(self.candidates, self.alpha, self.beta)}

    def state_dict(self) -> dict[str, Any]:
        """JSON-serialisable state, RNG included: loading it resumes the exact G sequence."""
        rng_state = self._rng.bit_generator.state
        return {
            "kind": "sagc",
            "version": STATE_VERSION,
            "config": self.config.to_dict(),
            "step": self._counter.step,
            "n_stragglers": self._counter.n_stragglers,
            "index": self._index,
            "started": self._started,
            "lambda": self.lambda_,
            "alpha": list(self.alpha),
            "beta": list(self.beta),
            "last_sampled": {str(k): v for k, v in self._last_sampled.items()},
            "last_scores": {str(k): v for k, v in self._last_scores.items()},
            # PCG64's 128-bit integers as strings: safe for any JSON reader.
            "rng": {**rng_state, "state": {k: str(v) for k, v in rng_state["state"].items()}},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict()``'s output. A bad state raises ``ValueError`` naming the key
        and changes nothing; one saved with another config (candidates aside) loads with a
        ``RuntimeWarning`` and the current config stays in force."""
        keys = ("started", "lambda", "alpha", "beta", "last_sampled", "last_scores", "rng")
        saved, step, n_stragglers, index = self._check_common(state, keys, "controller")
        started = state["started"]
        if not isinstance(started, bool):
            raise ValueError(f"sagc state key 'started' must be true or false, got {started!r}")
        lam = state_number(state["lambda"], "lambda", 0.0, saved.lambda_max)
        n = len(self.candidates)
        alpha = _state_vector(state, "alpha", n)
        beta = _state_vector(state, "beta", n)
        last_sampled = _state_by_candidate(state, "last_sampled", self.candidates, 0.0, 1.0)
        last_scores = _state_by_candidate(state, "last_scores", self.candidates, -math.inf, math.inf)
        rng = _state_rng(state["rng"], self._rng.bit_generator)

        if saved != self.config:
            warnings.warn(
                f"loading SAGC state saved with a different config ({saved}); "
                f"continuing with the current one ({self.config})",
                RuntimeWarning,
                stacklevel=2,
            )
        self._counter.step, self._counter.n_stragglers = step, n_stragglers
        self._index, self._started, self.lambda_ = index, started, lam
        self.alpha, self.beta = alpha, beta
        self._last_sampled, self._last_scores = last_sampled, last_scores
        self._rng.bit_generator.state = rng

    def __repr__(self) -> str:
        return f"SAGCController({self.config})"


# -- state validation: every check runs before load_state_dict assigns anything -------------


def check_state(state: Any, kind: str, keys: Sequence[str]) -> None:
    if not isinstance(state, dict) or state.get("kind") != kind:
        got = state.get("kind") if isinstance(state, dict) else type(state).__name__
        raise ValueError(f"expected a {kind!r} group-sizer state, got {got!r}")
    if state.get("version") != STATE_VERSION:
        raise ValueError(f"unsupported {kind} state version {state.get('version')!r}")
    missing = [k for k in keys if k not in state]
    if missing:
        raise ValueError(f"{kind} state is missing key(s) {missing} (truncated or damaged state)")


def state_int(state: dict[str, Any], kind: str, key: str, lo: int, hi: int | None = None) -> int:
    v = state.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or v < lo or (hi is not None and v > hi):
        want = f"an integer in [{lo}, {hi}]" if hi is not None else f"an integer >= {lo}"
        raise ValueError(f"{kind} state key {key!r} must be {want}, got {v!r}")
    return v


def state_counts(state: dict[str, Any], kind: str) -> tuple[int, int]:
    step = state_int(state, kind, "step", 0)
    return step, state_int(state, kind, "n_stragglers", 0, step)


def state_number(v: Any, key: str, lo: float, hi: float, kind: str = "sagc") -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi or math.isnan(v):
        raise ValueError(f"{kind} state key {key!r} must be a number in [{lo}, {hi}], got {v!r}")
    if not math.isfinite(v):
        raise ValueError(f"{kind} state key {key!r} must be finite, got {v!r}")
    return float(v)


def _state_vector(state: dict[str, Any], key: str, n: int) -> list[float]:
    v = state[key]
    if not isinstance(v, list) or len(v) != n:
        got = f"{len(v)} values" if isinstance(v, list) else repr(v)
        raise ValueError(f"sagc state key {key!r} must be a list of {n} numbers (one per candidate), got {got}")
    out = [state_number(x, f"{key}[{i}]", 0.0, math.inf) for i, x in enumerate(v)]
    if not all(x > 0 for x in out):
        raise ValueError(f"sagc state key {key!r} must hold Beta parameters > 0, got {v}")
    return out


def _state_by_candidate(
    state: dict[str, Any], key: str, candidates: Sequence[int], lo: float, hi: float
) -> dict[int, float]:
    v = state[key]
    if not isinstance(v, dict):
        raise ValueError(f"sagc state key {key!r} must map candidates to numbers, got {v!r}")
    out = {}
    for k, x in v.items():
        if not (isinstance(k, str) and k.isdigit() and int(k) in candidates):
            raise ValueError(f"sagc state key {key!r}: {k!r} is not one of the candidates {list(candidates)}")
        out[int(k)] = state_number(x, f"{key}.{k}", lo, hi)
    return out


def _state_rng(v: Any, bit_generator: np.random.BitGenerator) -> dict[str, Any]:
    """The bit generator state to assign, tried on a scratch generator of the same kind."""
    try:
        state = {
            "bit_generator": v["bit_generator"],
            "state": {k: int(x) for k, x in v["state"].items()},
            "has_uint32": v["has_uint32"],
            "uinteger": v["uinteger"],
        }
        type(bit_generator)().state = state
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as e:
        raise ValueError(f"sagc state key 'rng' is not a {type(bit_generator).__name__} state: {e!r}") from None
    return state


def summarize(records: Sequence[StepRecord]) -> dict[str, float]:
    """Straggler rate, mean G and step count of a sequence of records (skipped ones excluded)."""
    rs = [r for r in records if not r.skipped]
    if not rs:
        return {"steps": 0, "straggler_rate": float("nan"), "mean_group_size": float("nan")}
    return {
        "steps": len(rs),
        "straggler_rate": float(np.mean([r.straggler for r in rs])),
        "mean_group_size": float(np.mean([r.group_size for r in rs])),
    }
