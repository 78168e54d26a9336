"""Downstream evaluation with lm-evaluation-harness.

``python -m sagc.evaluate run ...`` evaluates one model on the packaged tasks (the tiny
world's in-distribution and held-out splits; AIME 2024, AMC 2023, GPQA-diamond for the
paper config), writes lm-eval's own results and samples plus ``summary.json``;
``python -m sagc.evaluate stage ...`` caches the paper benchmarks locally, once.

Modules: ``taskcfg`` (task YAMLs, per-run copies), ``scoring`` (lm-eval hooks calling
``sagc.answers``), ``backends`` (HF on CPU / vLLM), ``recorder`` (exact output lengths),
``summary``, ``runner``, ``stage``, ``cli``. Heavy imports (torch, lm_eval) stay inside
functions so that ``import sagc.evaluate`` is cheap.
"""

from sagc.evaluate.taskcfg import LOCAL_TASKS, PAPER_TASKS, MissingDataError

__all__ = ["LOCAL_TASKS", "PAPER_TASKS", "MissingDataError"]
