"""Straggler simulator: ``simulate(SimConfig)`` runs any ``GroupSizer`` over parametric or replayed
lengths under a synchronous-RL step-time model; CLI ``python -m sagc.simulate`` (docs/controller.md).
"""

from sagc.simulate.config import (
    ParametricLengthConfig,
    RealRunLengthConfig,
    ReplayConfig,
    SimConfig,
    SweepConfig,
    ThroughputConfig,
    load_config,
)
from sagc.simulate.engine import (
    SizingResult,
    run_controller,
    run_fixed,
    simulate,
    step_costs,
    summary_table,
)
from sagc.simulate.sources import CachedSource, ParametricLengths, RealRunLengths, ReplayLengths
from sagc.trace import TraceStep, read_trace, write_trace

__all__ = [
    "CachedSource", "ParametricLengthConfig", "ParametricLengths", "RealRunLengthConfig", "RealRunLengths",
    "ReplayConfig", "ReplayLengths",
    "SimConfig", "SizingResult", "SweepConfig", "ThroughputConfig", "TraceStep", "load_config",
    "read_trace", "run_controller", "run_fixed", "simulate", "step_costs",
    "summary_table", "write_trace",
]  # fmt: skip
