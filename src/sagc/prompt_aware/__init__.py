"""Prompt-aware straggler control: predict each prompt's completion lengths, gather the
long ones into dedicated rounds (tail batching), and size groups per round kind.

- ``PromptLengthPredictor`` (``predictor``): per-prompt log-length distribution, online;
- ``TailBatchingStream`` (``schedule``): a drop-in ``PromptStream`` with long rounds;
- ``PromptAwareSAGC`` (``policy``): the ``sagc-prompt`` sizing, one SAGC per round kind;
  ``TailBatchedFixedGroupSize`` (``policy``): tail batching alone at a fixed G; both
  supply their stream through the ``GroupSizer.prompt_stream`` hook;
- ``PromptSAGCConfig`` (``config``): the ``sagc_prompt`` block that builds all three.

See docs/prompt-aware.md for the design and the measured numbers. The package sits above
the controller (it imports ``sagc.controller.sagc`` and ``sagc.prompts``, never the trainer
or the simulator); the sizing registry names its config and builder as strings and imports
them on first use. The package's ``__init__`` imports nothing, so that importing one
module does not import the others.
"""
