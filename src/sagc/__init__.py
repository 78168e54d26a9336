"""SAGC: Straggler-Aware Group Control for synchronous on-policy RL (GRPO / DAPO).

The controller (``SAGCController``) and its static baseline (``FixedGroupSize``) are
framework-agnostic; the TRL trainer, the tiny offline world, evaluation, aggregation and
the simulator live in subpackages that import heavier dependencies lazily.
"""

from sagc.controller import FixedGroupSize, GroupSizer, SAGCConfig, SAGCController, StepRecord

__all__ = ["FixedGroupSize", "GroupSizer", "SAGCConfig", "SAGCController", "StepRecord"]
__version__ = "0.1.0"
