"""Online per-prompt prediction of a rollout's log-length from the lengths SAGC already
observes; its upper quantile (``risk``) is what makes a synchronous step wait. The model and
its formulas: docs/prompt-aware.md ("The length predictor").
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from statistics import NormalDist
from typing import Annotated, Any

import numpy as np
from pydantic import Field

from sagc.config_models import Number
from sagc.controller.sagc import state_int
from sagc.settings import check

STATE_VERSION = 1

#: Floor of the pooled within-prompt variance of log-lengths: groups of identical lengths
#: would otherwise make every prompt's own mean infinitely certain.
MIN_WITHIN_VAR = 1e-4


@dataclass(frozen=True)
class PredictorConfig:
    """Knobs of ``PromptLengthPredictor`` (keys of the ``sagc_prompt`` block), checked on
    construction; why the defaults: docs/prompt-aware.md ("Configuration")."""

    quantile: Annotated[
        Number(ge=0.5, lt=1), Field(description="upper quantile of a rollout's length: the risk score")
    ] = 0.9
    history_decay: Annotated[Number(gt=0, le=1), Field(description="weight of a prompt's older epochs")] = 0.5
    ridge: Annotated[Number(gt=0), Field(description="L2 penalty of the feature regression")] = 1.0
    prior_strength: Annotated[Number(gt=0), Field(description="pseudo-rollouts of the pooled spread")] = 4.0
    min_between_var: Annotated[Number(gt=0), Field(description="floor of the between-prompt variance (log units)")] = (
        0.01
    )

    def __post_init__(self) -> None:
        check(self, "sagc_prompt")


def prompt_features(token_ids: Sequence[Sequence[int]], hash_dim: int = 0, edge: int = 2) -> np.ndarray:
    """Feature rows of prompts given as token ids: ``[1, log(tokens), hashed edge tokens]``, the
    first and last ``edge`` tokens with their positions hashed by crc32 (stable across
    processes) into ``hash_dim`` columns."""
    if isinstance(hash_dim, bool) or not isinstance(hash_dim, int) or hash_dim < 0:
        raise ValueError(f"sagc_prompt.hash_dim must be an integer >= 0, got {hash_dim!r}")
    if isinstance(edge, bool) or not isinstance(edge, int) or edge < 0:
        raise ValueError(f"sagc_prompt.edge_tokens must be an integer >= 0, got {edge!r}")
    out = np.zeros((len(token_ids), 2 + hash_dim))
    out[:, 0] = 1.0
    for r, ids in enumerate(token_ids):
        ids = list(ids)
        out[r, 1] = math.log(max(len(ids), 1))
        if hash_dim:
            ends = list(reversed(ids[-edge:])) if edge else []
            keyed = [("s", p, t) for p, t in enumerate(ids[:edge])] + [("e", p, t) for p, t in enumerate(ends)]
            for key in keyed:
                out[r, 2 + zlib.crc32(repr(key).encode()) % hash_dim] += 1.0
    return out


class PromptLengthPredictor:
    """Online predictor of each prompt's log-length distribution. ``features``: one row per
    prompt (``prompt_features``), or ``None`` for an intercept only."""

    def __init__(self, n: int, features: np.ndarray | None = None, config: PredictorConfig | None = None) -> None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"PromptLengthPredictor needs a positive number of prompts, got {n!r}")
        x = np.ones((n, 1)) if features is None else np.asarray(features, dtype=float)
        if x.ndim != 2 or x.shape[0] != n or not np.all(np.isfinite(x)):
            raise ValueError(f"features must be a finite ({n}, d) array, got shape {x.shape}")
        self.n = n
        self.x = x
        self.config = config if config is not None else PredictorConfig()
        d = x.shape[1]
        self.A_inv = np.eye(d) / self.config.ridge
        self.b = np.zeros(d)
        self.count = np.zeros(n)  # decayed number of rollouts seen per prompt
        self.sum = np.zeros(n)  # decayed sum of log-lengths
        self.sumsq = np.zeros(n)  # decayed sum of squared log-lengths
        self.within = [0.0, 0.0]  # pooled within-group squared deviations, degrees of freedom
        self.between = [0.0, 0.0]  # sum of (residual^2 - s2/g), groups
        self.observations = 0  # groups observed
        self._coef: np.ndarray | None = None

    def observe(self, prompts: Sequence[int], lengths: Iterable[Iterable[float]]) -> None:
        """Learn from one step: ``lengths[k]`` are the rollouts of prompt ``prompts[k]``."""
        groups = [np.log(np.maximum(np.asarray(list(g), dtype=float), 1.0)) for g in lengths]
        prompts = list(prompts)
        if len(groups) != len(prompts):
            raise ValueError(f"observe got {len(prompts)} prompt indices for {len(groups)} length groups")
        for i, y in zip(prompts, groups):
            if isinstance(i, bool) or not isinstance(i, (int, np.integer)) or not 0 <= i < self.n:
                raise ValueError(f"prompt index {i!r} is outside [0, {self.n})")
            if y.size == 0 or not np.all(np.isfinite(y)):
                raise ValueError(f"prompt {i}: a group must hold finite lengths, got {y.tolist()}")
        for i, y in zip(prompts, groups):
            self._observe_group(int(i), y)

    def _observe_group(self, i: int, y: np.ndarray) -> None:
        g, m = y.size, float(y.mean())
        if g > 1:
            self.within[0] += float(((y - m) ** 2).sum())
            self.within[1] += g - 1
        x = self.x[i]
        resid = m - float(x @ self.coef())
        self.between[0] += resid**2 - self.within_var() / g
        self.between[1] += 1
        ax = self.A_inv @ x
        self.A_inv -= np.outer(ax, ax) / (1.0 + float(x @ ax))
        self.b += x * m
        self._coef = None
        decay = self.config.history_decay
        self.count[i] = decay * self.count[i] + g
        self.sum[i] = decay * self.sum[i] + float(y.sum())
        self.sumsq[i] = decay * self.sumsq[i] + float((y**2).sum())
        self.observations += 1

    def coef(self) -> np.ndarray:
        if self._coef is None:
            self._coef = self.A_inv @ self.b
        return self._coef

    def within_var(self) -> float:
        """Pooled within-prompt variance of log-lengths (1.0 before any group of two)."""
        return max(self.within[0] / self.within[1], MIN_WITHIN_VAR) if self.within[1] else 1.0

    def between_var(self) -> float:
        """Variance of the prompts' true mean log-lengths around the feature model."""
        est = self.between[0] / self.between[1] if self.between[1] else 1.0
        return max(est, self.config.min_between_var)

    def predict(self, prompts: Sequence[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(mu, sd)`` of one rollout's log-length, per prompt (all prompts by default)."""
        idx = np.arange(self.n) if prompts is None else np.asarray(prompts, dtype=int)
        s2, t2 = self.within_var(), self.between_var()
        n = self.count[idx]
        feat = self.x[idx] @ self.coef()
        own = np.divide(self.sum[idx], n, out=feat.copy(), where=n > 0)
        w = n / (n + s2 / t2)
        mu = w * own + (1.0 - w) * feat
        mu_var = 1.0 / (n / s2 + 1.0 / t2)
        own_var = np.divide(self.sumsq[idx] - n * own**2, n, out=np.zeros_like(n), where=n > 0)
        k = self.config.prior_strength
        spread = (n * np.maximum(own_var, 0.0) + k * s2) / (n + k)
        return mu, np.sqrt(spread + mu_var)

    def risk(self, prompts: Sequence[int] | None = None) -> np.ndarray:
        """Upper ``quantile`` of one rollout's log-length per prompt: its straggler risk score."""
        mu, sd = self.predict(prompts)
        return mu + NormalDist().inv_cdf(self.config.quantile) * sd

    def state_dict(self) -> dict[str, Any]:
        return {
            "kind": "prompt_length_predictor",
            "version": STATE_VERSION,
            "n": self.n,
            "config": asdict(self.config),
            "A_inv": self.A_inv.tolist(),
            "b": self.b.tolist(),
            "count": self.count.tolist(),
            "sum": self.sum.tolist(),
            "sumsq": self.sumsq.tolist(),
            "within": list(self.within),
            "between": list(self.between),
            "observations": self.observations,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict()``; a state of another shape raises ``ValueError`` naming the key."""
        if not isinstance(state, dict) or state.get("kind") != "prompt_length_predictor":
            raise ValueError("expected a 'prompt_length_predictor' state")
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"unsupported prompt_length_predictor state version {state.get('version')!r}")
        if state.get("n") != self.n:
            raise ValueError(
                f"prompt_length_predictor state key 'n': saved for {state.get('n')} prompts, this run has {self.n}"
            )
        d = self.x.shape[1]
        arrays = {}
        for key, shape in (("A_inv", (d, d)), ("b", (d,)), ("count", (self.n,)), ("sum", (self.n,)),
                           ("sumsq", (self.n,)), ("within", (2,)), ("between", (2,))):  # fmt: skip
            try:
                a = np.asarray(state[key], dtype=float)
            except (KeyError, TypeError, ValueError):
                raise ValueError(f"prompt_length_predictor state key {key!r} is missing or not numeric") from None
            if a.shape != shape or not np.all(np.isfinite(a)):
                raise ValueError(f"prompt_length_predictor state key {key!r} must be a finite array of shape {shape}")
            arrays[key] = a
        obs = state_int(state, "prompt_length_predictor", "observations", 0)
        self.A_inv, self.b = arrays["A_inv"], arrays["b"]
        self.count, self.sum, self.sumsq = arrays["count"], arrays["sum"], arrays["sumsq"]
        self.within, self.between = arrays["within"].tolist(), arrays["between"].tolist()
        self.observations = obs
        self._coef = None
