"""Downstream evaluation with lm-evaluation-harness: ``python -m sagc.evaluate`` evaluates one
model on the packaged tasks, or stages the paper benchmarks (docs/evaluation.md). Heavy
imports (torch, lm_eval) stay inside functions; nothing here imports ``sagc.pipeline``.
"""
