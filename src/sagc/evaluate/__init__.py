"""Downstream evaluation with lm-evaluation-harness.

``python -m sagc.evaluate run --config eval.json`` (or the same keys as flags) evaluates one
model on the packaged tasks (the tiny world's in-distribution and held-out splits; AIME 2024,
AMC 2023, GPQA-diamond for the paper config), writes lm-eval's own results and samples plus
``summary.json``; ``python -m sagc.evaluate stage ...`` caches the paper benchmarks locally,
once.

Modules: ``config`` (``EvalConfig``: the evaluation cell, whose settings the pipeline's
evaluate block is), ``taskcfg`` (task YAMLs, their metadata, per-run copies), ``normalizers``
and ``stage`` (benchmark staging), ``scoring`` (lm-eval hooks calling ``sagc.answers``),
``backends`` (HF on CPU / vLLM), ``recorder`` (exact output lengths), ``summary``,
``runner``, ``cli``. Heavy imports (torch, lm_eval) stay inside functions so that
``import sagc.evaluate`` is cheap. Nothing here imports ``sagc.pipeline``: the pipeline
uses this package, not the other way round.
"""

from sagc.evaluate.config import EvalConfig, EvalSettings
from sagc.evaluate.taskcfg import MissingDataError, task_metas, world_tasks

__all__ = ["EvalConfig", "EvalSettings", "MissingDataError", "task_metas", "world_tasks"]
