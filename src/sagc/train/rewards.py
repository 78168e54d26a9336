"""Reward registry: the names a cell config may use under ``rewards`` (name -> weight)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sagc.rewards import correctness_reward, format_reward

#: Registry names, in the order the trainer passes them to TRL.
REWARD_NAMES = ("correctness", "format")


def _registry() -> dict[str, Callable]:
    return {"correctness": correctness_reward, "format": format_reward}


def build_reward_funcs(
    weights: dict[str, float], algo: Any, max_completion_length: int
) -> tuple[list[Callable], list[float], list[str]]:
    """Reward functions, their TRL ``reward_weights`` and names for a cell, DAPO's soft overlong
    punishment appended when ``algo`` uses it."""
    registry = _registry()
    funcs, ws, names = [], [], []
    for name in REWARD_NAMES:
        if name in weights:
            funcs.append(registry[name])
            ws.append(float(weights[name]))
            names.append(name)
    unknown = sorted(set(weights) - set(REWARD_NAMES))
    if unknown:
        raise ValueError(f"unknown reward(s): {unknown} (known: {list(REWARD_NAMES)})")
    if algo.uses_overlong_punishment:
        from trl.rewards import get_soft_overlong_punishment

        funcs.append(get_soft_overlong_punishment(max_completion_length, algo.overlong_buffer))
        ws.append(float(algo.overlong_weight))
        names.append("overlong")
    return funcs, ws, names
