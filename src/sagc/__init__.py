"""SAGC: Straggler-Aware Group Control for synchronous on-policy RL (GRPO / DAPO).

The framework-agnostic controller and its static baseline; the trainer, the tiny world,
evaluation, aggregation and the simulator live in subpackages.
"""

from sagc.controller import FixedGroupSize, GroupSizer, SAGCConfig, SAGCController, StepRecord

__all__ = ["FixedGroupSize", "GroupSizer", "SAGCConfig", "SAGCController", "StepRecord"]
__version__ = "0.1.0"
