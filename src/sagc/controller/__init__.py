"""Group-size policies: the SAGC controller and the fixed-G baseline (``sagc.controller.sagc``),
the rule baselines (``rules``) and the registry of sizing names (``registry``). The package
imports nothing above it: ``sagc.prompt_aware`` is registered by name, imported on first use.
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
