"""Documented defaults of the tiny world (README.md, "Defaults"), in a module without heavy imports."""

#: A step straggles when max / median completion length over the whole step exceeds it.
DEFAULT_TAU = 2.0
DEFAULT_PROMPTS_PER_STEP = 2
DEFAULT_TEMPERATURE = 1.0
#: ~5x the median completion; longer than every completion the warm start teaches (<= ~151).
DEFAULT_MAX_COMPLETION_LENGTH = 160
#: Upper bound of the BPE vocabulary (the task's text stops training at ~360 tokens).
DEFAULT_VOCAB_SIZE = 384
