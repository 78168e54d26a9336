"""Downstream evaluation with lm-evaluation-harness (``python -m sagc.evaluate``, docs/evaluation.md).
Heavy imports (torch, lm_eval) stay inside functions; nothing here imports ``sagc.pipeline``."""
