"""Prompt-aware straggler control: predict each prompt's completion lengths, gather the
long ones into dedicated rounds (tail batching), and size groups per round kind.

- ``PromptLengthPredictor`` (``predictor``): per-prompt log-length distribution, online;
- ``TailBatchingStream`` (``schedule``): a drop-in ``PromptStream`` with long rounds;
- ``PromptAwareSAGC`` (``policy``): the ``sagc-prompt`` sizing, one SAGC per round kind;
- ``PromptSAGCConfig`` (``config``): the ``sagc_prompt`` block that builds all three.

See docs/prompt-aware.md for the design and the measured numbers. The package imports
nothing itself: the sizing registry imports ``config``, which must not pull in the trainer.
"""
