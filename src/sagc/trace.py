"""The per-step lengths trace (``lengths.jsonl``): the trainer writes it, the simulator
replays it. One JSON object per step::

    {"step": 3, "group_size": 8, "lengths": [[l_11, ..., l_18], [l_21, ...]], "straggler": false,
     "prompts": [17, 4], "long_round": false}
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sagc.io import atomic_write_text, read_jsonl


@dataclass(frozen=True)
class TraceStep:
    """One line of ``lengths.jsonl``: the step's G and its lengths grouped by prompt."""

    step: int
    group_size: int
    lengths: tuple[np.ndarray, ...]
    straggler: bool | None = None  # present when the trainer logged its flag
    prompts: tuple[int, ...] | None = None  # dataset index of each group's prompt, when logged
    long_round: bool | None = None  # tail batching's round kind, when logged


def read_trace(path: str | Path) -> list[TraceStep]:
    """Read and validate a trainer's per-step lengths trace: every group holds ``group_size``
    lengths, steps increase strictly, unknown keys are ignored."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"lengths trace not found: {path}")
    steps: list[TraceStep] = []
    for lineno, rec in read_jsonl(path):
        where = f"{path}:{lineno}"
        if not isinstance(rec, dict):
            raise ValueError(f"{where}: expected a JSON object")
        for key in ("step", "group_size", "lengths"):
            if key not in rec:
                raise ValueError(f"{where}: missing key {key!r}")
        step, g = rec["step"], rec["group_size"]
        if isinstance(step, bool) or not isinstance(step, int):
            raise ValueError(f"{where}: 'step' must be an integer, got {step!r}")
        if isinstance(g, bool) or not isinstance(g, int) or g < 1:
            raise ValueError(f"{where}: 'group_size' must be a positive integer, got {g!r}")
        groups = rec["lengths"]
        if not isinstance(groups, list) or not groups or not all(isinstance(x, list) for x in groups):
            raise ValueError(f"{where}: 'lengths' must be a non-empty list of lists (one per prompt)")
        arrays = []
        for i, grp in enumerate(groups):
            if len(grp) != g:
                raise ValueError(f"{where}: 'lengths' group {i} has {len(grp)} lengths, 'group_size' is {g}")
            try:
                arr = np.asarray(grp, dtype=float)
            except (TypeError, ValueError) as e:
                raise ValueError(f"{where}: 'lengths' group {i} holds a non-number") from e
            if not np.all(np.isfinite(arr)) or np.any(arr < 0):
                raise ValueError(f"{where}: 'lengths' group {i} holds a NaN, infinite or negative length")
            arrays.append(arr)
        if steps and step <= steps[-1].step:
            raise ValueError(f"{where}: 'step' {step} does not increase (previous {steps[-1].step})")
        flag = rec.get("straggler")
        if flag is not None and not isinstance(flag, (bool, int)):
            raise ValueError(f"{where}: 'straggler' must be a boolean, got {flag!r}")
        prompts = rec.get("prompts")
        if prompts is not None and (not isinstance(prompts, list) or len(prompts) != len(arrays)
                                    or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0
                                               for i in prompts)):  # fmt: skip
            raise ValueError(f"{where}: 'prompts' must list one prompt index >= 0 per length group")
        long_round = rec.get("long_round")
        if long_round is not None and not isinstance(long_round, bool):
            raise ValueError(f"{where}: 'long_round' must be a boolean, got {long_round!r}")
        straggler = None if flag is None else bool(flag)
        prompts = None if prompts is None else tuple(prompts)
        steps.append(TraceStep(step, g, tuple(arrays), straggler, prompts, long_round))
    if not steps:
        raise ValueError(f"lengths trace {path} holds no step")
    return steps


def trace_line(s: TraceStep) -> dict:
    """One step as its JSON object (integer lengths written as integers)."""
    rec = {
        "step": s.step,
        "group_size": s.group_size,
        "lengths": [[int(x) if float(x).is_integer() else float(x) for x in g] for g in s.lengths],
    }
    if s.straggler is not None:
        rec["straggler"] = bool(s.straggler)
    if s.prompts is not None:
        rec["prompts"] = [int(i) for i in s.prompts]
    if s.long_round is not None:
        rec["long_round"] = bool(s.long_round)
    return rec


def write_trace(path: str | Path, steps: Sequence[TraceStep]) -> None:
    """Write a trace in the trainer's format (atomically: a killed writer leaves none)."""
    atomic_write_text(path, "".join(json.dumps(trace_line(s)) + "\n" for s in steps))
