"""A training cell's ``resolved`` block: every value its job derives from its settings, computed
once (docs/architecture.md, "One source of truth").
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, ClassVar

from sagc.config_models import Section, Text
from sagc.train.presets import AlgorithmSettings, StepShapes
from sagc.train.stops import Stops

#: The sections a resolution reads: its fingerprint covers these.
RESOLVED_FROM = ("model", "train", "algorithm", "sizing", "device", "launch")


class MemoryPlan(Section):
    """The estimated peak of one process on its card in each phase of a step (``sagc.pipeline.memory``)."""

    section_key: ClassVar[str] = "resolved.memory"
    card_gib: float
    rows_per_pass: int
    tokens_per_row: int
    loss_pass_gib: float
    generating_gib: float
    scoring_gib: float
    vllm_share: float


class ResolvedCell(Section):
    """What a cell's job reads instead of deriving it."""

    section_key: ClassVar[str] = "resolved"
    settings: Text
    algorithm: AlgorithmSettings
    layout: StepShapes
    stops: Stops | None = None
    memory: MemoryPlan | None = None


def settings_fingerprint(cell: dict[str, Any]) -> str:
    """A short hash of the settings a resolution reads, from the cell-file form."""
    settings = {k: cell.get(k) for k in RESOLVED_FROM}
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:16]
