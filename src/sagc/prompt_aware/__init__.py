"""Prompt-aware straggler control: predict each prompt's completion lengths, gather the
long ones into dedicated rounds (tail batching), and size groups per round kind.

- ``PromptLengthPredictor`` (``predictor``): per-prompt log-length distribution, online;
- ``TailBatchingStream`` (``schedule``): a drop-in ``PromptStream`` with long rounds;
- ``PromptAwareSAGC`` (``policy``): the ``sagc-prompt`` sizing, one SAGC per round kind;
- ``PromptSAGCConfig`` (``config``): the ``sagc_prompt`` block that builds all three.

See docs/prompt-aware.md for the design and the measured numbers.
"""

from sagc.prompt_aware.config import PromptSAGCConfig
from sagc.prompt_aware.policy import PromptAwareSAGC
from sagc.prompt_aware.predictor import PredictorConfig, PromptLengthPredictor, prompt_features
from sagc.prompt_aware.schedule import TailBatchingStream, round_summary

__all__ = ["PredictorConfig", "PromptAwareSAGC", "PromptLengthPredictor", "PromptSAGCConfig",
           "TailBatchingStream",
           "prompt_features", "round_summary"]
