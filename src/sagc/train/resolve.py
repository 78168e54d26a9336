"""A training cell's ``resolved`` block: every value its job derives from its settings, computed once.

``sagc.train.config.resolve_cell`` fills it (the preset's overrides, the step layout at every
G, the accumulation and the memory plan for the card a ``CardSizer`` describes); the pipeline
writes it into each ``cell.json`` and the job reads it as it is. Who adds the stops, and the
fingerprint that refuses a stale block: docs/architecture.md ("One source of truth", a cell
is resolved once).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any, ClassVar, Protocol

from sagc.config_models import Section, Text
from sagc.train.presets import AlgorithmSettings, StepShapes
from sagc.train.stops import Stops

#: The sections a resolution reads: its fingerprint covers these.
RESOLVED_FROM = ("model", "train", "algorithm", "sizing", "device", "launch")

#: ``layout(gradient_accumulation_steps, group_sizes)``: the cell's step laid out with that
#: accumulation at those G (its own by default).
Layout = Callable[..., StepShapes]


class MemoryPlan(Section):
    """The estimated peak of one of the cell's processes on its card in each phase of a step
    (``sagc.pipeline.memory``)."""

    section_key: ClassVar[str] = "resolved.memory"
    card_gib: float
    rows_per_pass: int
    tokens_per_row: int
    loss_pass_gib: float
    generating_gib: float
    scoring_gib: float
    vllm_share: float


class ResolvedCell(Section):
    """What a cell's job reads instead of deriving it (see the module docstring)."""

    section_key: ClassVar[str] = "resolved"
    settings: Text
    algorithm: AlgorithmSettings
    layout: StepShapes
    stops: Stops | None = None
    memory: MemoryPlan | None = None


class CardSizer(Protocol):
    """What a resolution asks of the card a cell is sized for (the pipeline's:
    ``sagc.pipeline.memory.CardFit``)."""

    def accumulation(self, algo: AlgorithmSettings, layout: Layout) -> tuple[int, int]:
        """``(gradient_accumulation_steps, rows per loss pass)`` that fit the card."""

    def plan(self, algo: AlgorithmSettings, layout: StepShapes) -> MemoryPlan:
        """The layout's memory plan; ``ValueError`` when it does not fit the card."""


def settings_fingerprint(cell: dict[str, Any]) -> str:
    """A short hash of the settings a resolution reads, from the cell-file form."""
    settings = {k: cell.get(k) for k in RESOLVED_FROM}
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:16]
