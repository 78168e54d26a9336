"""A training cell resolved: every value its job derives from its settings, computed once.

``resolve_cell`` applies the algorithm preset's overrides (``presets.resolve_algorithm``), lays
out a step at every G the cell can use (``presets.step_shapes``) and, given the pipeline's
card (``CardFit``), sizes ``train.gradient_accumulation_steps: auto`` and states the memory
plan. It is the one caller of both on the pipeline's path: the pipeline resolves every cell
when it checks the config and writes the result into the cell's ``cell.json`` under
``resolved``, which the job and the trainer read as it is. A cell file without that block (one
written by hand) is resolved when it is loaded.

The stops are resolved against the model's tokenizer (``sagc.train.stops``) by a workflow
job, since a built world's tokenizer exists only after the job that builds it; the train job
adds them to ``resolved.stops``. ``resolved.settings`` fingerprints the settings the block
was resolved from, so a cell file edited by hand after it was resolved is refused rather
than trained with a stale layout.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Optional, Protocol

from sagc.config_models import Section, Text
from sagc.train.presets import AlgorithmSettings, StepShapes, resolve_algorithm, step_shapes
from sagc.train.stops import Stops

if TYPE_CHECKING:
    from sagc.train.config import TrainConfig

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
    stops: Optional[Stops] = None
    memory: Optional[MemoryPlan] = None


class CardFit(Protocol):
    """The pipeline's card, as a resolution asks it (``sagc.pipeline.memory.card_fit``)."""

    def accumulation(self, algo: AlgorithmSettings, layout: Layout) -> tuple[int, int]:
        """``(gradient_accumulation_steps, rows per loss pass)`` that fit the card."""

    def plan(self, algo: AlgorithmSettings, layout: StepShapes) -> MemoryPlan:
        """The layout's memory plan; ``ValueError`` when it does not fit the card."""


def settings_fingerprint(cell: dict[str, Any]) -> str:
    """A short hash of the settings a resolution reads, from the cell-file form."""
    settings = {k: cell.get(k) for k in RESOLVED_FROM}
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:16]


def resolve_cell(cfg: TrainConfig, fit: CardFit | None = None) -> TrainConfig:
    """``cfg`` with its ``resolved`` block, and ``train.gradient_accumulation_steps: auto`` (and
    an unset ``train.micro_batch_rows`` with it) replaced by the numbers ``fit`` chose."""
    t = cfg.train
    algo = resolve_algorithm(cfg.algorithm, t.max_completion_length)

    def layout(ga: int, group_sizes: tuple[int, ...] = cfg.sizing.group_sizes(), rows: int | None = None):
        return step_shapes(algo, group_sizes, prompts_per_step=t.prompts_per_step, rollout_budget=t.rollout_budget,
                           gradient_accumulation_steps=ga, processes=cfg.launch.processes, micro_batch_rows=rows)

    ga, rows = t.gradient_accumulation_steps, t.micro_batch_rows
    if ga == "auto":
        if fit is None:
            raise ValueError("train.gradient_accumulation_steps=auto needs device.gpu_memory_gib (and "
                             "device.use_cpu=false): the pipeline sizes the micro-batch for that card "
                             "(sagc.pipeline.memory); a cell run by hand states a number")
        ga, auto_rows = fit.accumulation(algo, layout)
        rows = auto_rows if rows is None else rows
    shapes = layout(ga, rows=rows)
    resolved = cfg.model_copy(update={"train": t.model_copy(update={"gradient_accumulation_steps": ga,
                                                                    "micro_batch_rows": rows})})
    return resolved.model_copy(update={"resolved": ResolvedCell(
        settings=settings_fingerprint(resolved.to_dict()), algorithm=algo, layout=shapes,
        memory=fit.plan(algo, shapes) if fit is not None else None)})
