"""Downstream evaluation with lm-evaluation-harness.

``python -m sagc.evaluate run --config eval.json`` (or the same keys as flags) evaluates one
model on the packaged tasks (the tiny world's splits; AIME 2024, AMC 2023, GPQA-diamond for
the paper config) and writes lm-eval's own results and samples plus ``summary.json``;
``python -m sagc.evaluate stage ...`` caches the paper benchmarks locally, once. Heavy
imports (torch, lm_eval) stay inside functions; nothing here imports ``sagc.pipeline``.
"""
