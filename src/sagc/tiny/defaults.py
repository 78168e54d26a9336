"""Documented defaults of the tiny world, in a module without heavy imports.

* ``DEFAULT_TAU`` = 2.0: a step straggles when max / median completion length over the
  whole step exceeds it (architecture.md).
* ``DEFAULT_PROMPTS_PER_STEP`` = 2 prompts per training step, each repeated G times.
* ``DEFAULT_TEMPERATURE`` = 1.0: the training sampling temperature.
* ``DEFAULT_MAX_COMPLETION_LENGTH`` = 160 tokens: about 5x the median completion (~29
  tokens) and longer than every train completion the warm start teaches (a two-check row of
  a 5-step problem is ~151 tokens).
* ``DEFAULT_VOCAB_SIZE`` = 384: upper bound of the BPE vocabulary (the task text is small,
  so training stops at ~360 tokens).
"""

DEFAULT_TAU = 2.0
DEFAULT_PROMPTS_PER_STEP = 2
DEFAULT_TEMPERATURE = 1.0
DEFAULT_MAX_COMPLETION_LENGTH = 160
DEFAULT_VOCAB_SIZE = 384
