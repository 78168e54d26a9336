"""The ``sagc_prompt`` config block: SAGC's keys, the predictor's and the schedule's.

One flat block (the pipeline's ``sagc_prompt:``, which starts from the ``sagc:`` block) holds:

- every ``SAGCConfig`` key: the two per-round-kind controllers of ``PromptAwareSAGC``;
- the predictor's keys (``PredictorConfig``: ``quantile``, ``history_decay``, ``ridge``,
  ``prior_strength``, ``min_between_var``) and its features: ``hash_dim`` hashed edge
  tokens (0: the prompt's token count only) over ``edge_tokens`` tokens at each edge;
- the schedule's ``long_fraction`` (share of prompts deferred to long rounds) and
  ``queue_rounds`` (rounds' worth of deferred prompts that start a long round);
- ``group_size``: null for the hybrid; an integer for tail batching alone at that fixed
  G (the ``sagc-prompt-g16`` cell: ``sagc_prompt_variants.g16: {group_size: 16}``).

A bad value raises ``ValueError`` naming ``sagc_prompt.<key>``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

from sagc.controller.sagc import FixedGroupSize, SAGCConfig
from sagc.prompt_aware.predictor import PredictorConfig, PromptLengthPredictor, prompt_features

#: Share of an epoch's prompts deferred to long rounds by default: RollPacker's tail
#: rounds hold the longest ~quarter; with 4 prompts a step it is one step in four.
DEFAULT_LONG_FRACTION = 0.25

#: Rounds' worth of deferred prompts that start a long round (the riskiest first): 2 sorts
#: the long prompts better than 1 at a delay of ~6 rounds (docs/prompt-aware.md).
DEFAULT_QUEUE_ROUNDS = 2

_SAGC_KEYS = tuple(f.name for f in fields(SAGCConfig))
_PREDICTOR_KEYS = tuple(f.name for f in fields(PredictorConfig))


@dataclass(frozen=True)
class PromptSAGCConfig:
    """Typed ``sagc_prompt`` block (module docstring). Defaults: ``hash_dim`` 256 (the tiny
    world's 26 letters x 2 edge positions x 2 edges barely collide; fitted on 1000 of its
    problems, the features predict the log-length of unseen ones with r = 0.84, with 32
    columns 0.12), ``edge_tokens`` 2, ``long_fraction`` 0.25."""

    sagc: SAGCConfig = field(default_factory=SAGCConfig)
    predictor: PredictorConfig = field(default_factory=PredictorConfig)
    long_fraction: float = DEFAULT_LONG_FRACTION
    queue_rounds: int = DEFAULT_QUEUE_ROUNDS
    hash_dim: int = 256
    edge_tokens: int = 2
    group_size: int | None = None

    def __post_init__(self) -> None:
        lf = self.long_fraction
        if isinstance(lf, bool) or not isinstance(lf, (int, float)) or not 0.0 < lf < 1.0:
            raise ValueError(f"sagc_prompt.long_fraction must lie in (0, 1), got {lf!r}")
        qr = self.queue_rounds
        if isinstance(qr, bool) or not isinstance(qr, int) or qr < 1:
            raise ValueError(f"sagc_prompt.queue_rounds must be an integer >= 1, got {qr!r}")
        for key in ("hash_dim", "edge_tokens"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"sagc_prompt.{key} must be an integer >= 0, got {v!r}")
        g = self.group_size
        if g is not None and (isinstance(g, bool) or not isinstance(g, int) or g < 2):
            raise ValueError(f"sagc_prompt.group_size must be null (SAGC per round kind) or an integer >= 2, got {g!r}")

    @classmethod
    def from_dict(cls, d: Any) -> "PromptSAGCConfig":
        if not isinstance(d, dict):
            raise ValueError(f"sagc_prompt must be a mapping of its keys, got {type(d).__name__}")
        own = {"long_fraction", "queue_rounds", "hash_dim", "edge_tokens", "group_size"}
        unknown = sorted(set(d) - own - set(_SAGC_KEYS) - set(_PREDICTOR_KEYS))
        if unknown:
            raise ValueError(f"unknown sagc_prompt key(s): {unknown}")
        try:
            sagc = SAGCConfig.from_dict({k: v for k, v in d.items() if k in _SAGC_KEYS})
        except (TypeError, ValueError) as e:
            raise ValueError(f"sagc_prompt: {e}") from None
        predictor = PredictorConfig(**{k: v for k, v in d.items() if k in _PREDICTOR_KEYS})
        return cls(sagc=sagc, predictor=predictor, **{k: v for k, v in d.items() if k in own})

    def to_dict(self) -> dict[str, Any]:
        own = {k: getattr(self, k) for k in ("long_fraction", "queue_rounds", "hash_dim", "edge_tokens", "group_size")}
        return {**self.sagc.to_dict(), **asdict(self.predictor), **own}

    @property
    def seed(self) -> int:
        return self.sagc.seed

    @property
    def sorted_candidates(self) -> tuple[int, ...]:
        return (self.group_size,) if self.group_size is not None else self.sagc.sorted_candidates

    # -- what the trainer builds from it ---------------------------------------------------

    def build(self):
        """The group sizer: ``PromptAwareSAGC``, or ``FixedGroupSize`` for tail batching alone."""
        from sagc.prompt_aware.policy import PromptAwareSAGC

        if self.group_size is not None:
            return FixedGroupSize(self.group_size, tau=self.sagc.tau, scope=self.sagc.scope)
        return PromptAwareSAGC(self.sagc)

    def features(self, token_ids: list) -> np.ndarray:
        """The predictor's feature rows of prompts given as token ids (``prompt_features``)."""
        return prompt_features(token_ids, self.hash_dim, self.edge_tokens)

    def schedule(self, n: int, seed: int, shuffle: bool = True, features: np.ndarray | None = None):
        """The tail-batching stream over ``n`` prompts; ``features`` (one row per prompt,
        e.g. ``features(token_ids)``) inform the predictor (none: an intercept only)."""
        from sagc.prompt_aware.schedule import TailBatchingStream  # the trainer's stream: imported late

        predictor = PromptLengthPredictor(n, features, self.predictor)
        return TailBatchingStream(n, seed, shuffle, predictor=predictor, long_fraction=self.long_fraction,
                                  queue_rounds=self.queue_rounds)


def build_prompt_sagc(config: PromptSAGCConfig):
    """The registry's builder of the ``sagc-prompt`` sizings."""
    return config.build()
