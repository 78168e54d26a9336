"""Straggler simulator: what-ifs for group sizing on a laptop.

A synchronous-RL step-time model driven by completion lengths, either drawn from a
parametric model (``ParametricLengths``; ``RealRunLengths``: the tail of a real DAPO run) or
replayed from a trainer's ``lengths.jsonl`` (``ReplayLengths``), running any ``GroupSizer``
(fixed G, SAGC, its variants, the rules) over thousands of steps. Entry points:
``simulate(SimConfig)``, ``summary_table``, ``run_sweep``, ``calibrate``,
``sagc.simulate.suite`` (controller variants over a suite of length worlds),
``sagc.simulate.prompt_world`` (tail batching and ``sagc-prompt`` where prompts have their
own lengths), and the CLI ``python -m sagc.simulate run|calibrate|suite|prompt``.
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
