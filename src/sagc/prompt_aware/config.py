"""The ``sagc_prompt`` config block: every ``SAGCConfig`` key, the predictor's and the
schedule's, flat (docs/prompt-aware.md, "Configuration").
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Annotated, Any

from pydantic import Field

from sagc.config_models import NonNegativeInt, Number, PositiveInt
from sagc.controller.sagc import GroupSize, SAGCConfig
from sagc.prompt_aware.predictor import PredictorConfig
from sagc.prompt_aware.schedule import DEFAULT_LONG_FRACTION, DEFAULT_QUEUE_ROUNDS
from sagc.settings import check

_SAGC_KEYS = tuple(f.name for f in fields(SAGCConfig))
_PREDICTOR_KEYS = tuple(f.name for f in fields(PredictorConfig))


@dataclass(frozen=True)
class PromptSAGCConfig:
    """Typed ``sagc_prompt`` block; its keys are declared once, here: checked on construction
    (``ValueError`` naming ``sagc_prompt.<key>``), and the pipeline schema is made from them."""

    sagc: SAGCConfig = field(default_factory=SAGCConfig)
    predictor: PredictorConfig = field(default_factory=PredictorConfig)
    long_fraction: Annotated[Number(gt=0, lt=1), Field(description="share of prompts deferred to long rounds")] = (
        DEFAULT_LONG_FRACTION
    )
    queue_rounds: Annotated[
        PositiveInt, Field(description="rounds' worth of deferred prompts that start a long round")
    ] = DEFAULT_QUEUE_ROUNDS
    hash_dim: Annotated[NonNegativeInt, Field(description="hashed edge-token features (0: token count only)")] = 256
    edge_tokens: Annotated[NonNegativeInt, Field(description="tokens at each prompt edge that are hashed")] = 2
    group_size: Annotated[GroupSize | None, Field(description="null: SAGC per round kind; N: tail batching at G=N")] = (
        None
    )

    def __post_init__(self) -> None:
        check(self, "sagc_prompt")

    @classmethod
    def from_dict(cls, d: Any) -> PromptSAGCConfig:
        if not isinstance(d, dict):
            raise ValueError(f"sagc_prompt must be a mapping of its keys, got {type(d).__name__}")
        own = cls._own_keys()
        unknown = sorted(set(d) - set(own) - set(_SAGC_KEYS) - set(_PREDICTOR_KEYS))
        if unknown:
            raise ValueError(f"unknown sagc_prompt key(s): {unknown}")
        try:
            sagc = SAGCConfig.from_dict({k: v for k, v in d.items() if k in _SAGC_KEYS})
        except (TypeError, ValueError) as e:
            raise ValueError(f"sagc_prompt: {e}") from None
        predictor = PredictorConfig(**{k: v for k, v in d.items() if k in _PREDICTOR_KEYS})
        return cls(sagc=sagc, predictor=predictor, **{k: v for k, v in d.items() if k in own})

    def to_dict(self) -> dict[str, Any]:
        own = {k: getattr(self, k) for k in self._own_keys()}
        return {**self.sagc.to_dict(), **asdict(self.predictor), **own}

    @classmethod
    def _own_keys(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls) if f.name not in ("sagc", "predictor"))

    @property
    def seed(self) -> int:
        return self.sagc.seed

    @property
    def sorted_candidates(self) -> tuple[int, ...]:
        return (self.group_size,) if self.group_size is not None else self.sagc.sorted_candidates
