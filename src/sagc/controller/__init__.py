"""Group-size policies: the SAGC controller, the fixed-G baseline, and the registry that
maps a sizing name (``g16``, ``sagc``, ``sagc-fast``) to one of them.

- ``sagc.controller.sagc``: ``SAGCConfig``, ``SAGCController`` (the paper's algorithm and
  its two options, described in that module's docstring), ``FixedGroupSize``,
  ``StepRecord`` and the ``GroupSizer`` interface the trainer and the simulator drive
  (its ``prompt_stream`` hook lets a policy supply the order of the prompts).
- ``sagc.controller.registry``: ``parse_sizing`` and ``POLICIES``, the one place that
  knows what a sizing name means and which config block it reads; its docstring says
  how to add a policy (one class plus one registry line).

The package imports nothing above it: the prompt-aware policy (``sagc.prompt_aware``) is
registered by name and imported when first used.
"""

from sagc.controller.registry import (
    MEASUREMENT_KEYS,
    POLICIES,
    Policy,
    Sizing,
    fixed_group_size,
    grid_group_sizes,
    make_group_sizer,
    measurement,
    parse_sizing,
    sizing_pattern,
)
from sagc.controller.sagc import (
    SELECTIONS,
    STATE_VERSION,
    FixedGroupSize,
    GroupSizer,
    SAGCConfig,
    SAGCController,
    StepRecord,
    summarize,
)

__all__ = [
    "MEASUREMENT_KEYS",
    "POLICIES",
    "Policy",
    "Sizing",
    "fixed_group_size",
    "grid_group_sizes",
    "make_group_sizer",
    "measurement",
    "parse_sizing",
    "sizing_pattern",
    "SELECTIONS",
    "STATE_VERSION",
    "FixedGroupSize",
    "GroupSizer",
    "SAGCConfig",
    "SAGCController",
    "StepRecord",
    "summarize",
]
