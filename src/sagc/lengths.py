"""Length statistics of one synchronous step: the only input SAGC needs. ``lengths`` are
token counts grouped by prompt (``[[l_11, ..., l_1G], [l_21, ...], ...]``), truncated rows
included.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import chain

import numpy as np

#: A median below one token counts as one token, so the ratio stays finite (the step then
#: straggles if any row has >= tau tokens).
MIN_MEDIAN = 1.0

#: The longest length accepted, in tokens (a float64 counts exactly up to 2**53): longer
#: values could overflow a statistic and hide a straggler.
MAX_LENGTH = float(2**53)

SCOPES = ("step", "group")


@dataclass(frozen=True)
class LengthStats:
    """Summary of a step's completion lengths; ``ratio`` is max/median over the whole step
    (``scope == "step"``) or the largest per-group max/median (``scope == "group"``)."""

    n_groups: int
    n_rollouts: int
    max: float
    median: float
    mean: float
    ratio: float
    scope: str


def _flatten(lengths: Iterable[Iterable[float]]) -> tuple[np.ndarray, list[int]]:
    """All lengths in one float array plus the size of each group (empty groups kept)."""
    if isinstance(lengths, np.ndarray):
        if lengths.ndim != 2:
            raise ValueError(
                "lengths must be grouped by prompt (a list of lists or a 2-D array), "
                f"got an array of shape {lengths.shape}"
            )
        return lengths.astype(float, copy=False).ravel(), [lengths.shape[1]] * lengths.shape[0]
    groups = lengths if isinstance(lengths, (list, tuple)) else list(lengths)
    sizes = []
    for group in groups:
        if isinstance(group, (int, float, np.number)):
            raise ValueError("lengths must be grouped by prompt (a list of lists), got a flat list of numbers")
        sizes.append(len(group))
    flat = np.fromiter(chain.from_iterable(groups), dtype=float, count=sum(sizes))
    return flat, sizes


def _check_values(flat: np.ndarray, sizes: list[int]) -> None:
    # NaN propagates through min and max and fails both comparisons: two cheap checks.
    if flat.size == 0 or (flat.min() >= 0 and flat.max() <= MAX_LENGTH):
        return
    for i, group in enumerate(np.split(flat, np.cumsum(sizes)[:-1])):
        if not np.all(np.isfinite(group)):
            raise ValueError(f"lengths of group {i} contain NaN or infinity: {group.tolist()}")
        if np.any(group < 0):
            raise ValueError(f"lengths of group {i} contain a negative length: {group.tolist()}")
        if np.any(group > MAX_LENGTH):
            raise ValueError(
                f"lengths of group {i} contain a length above {MAX_LENGTH:.0f} tokens (2**53), "
                f"which no generation produces: {group.tolist()}"
            )


def as_groups(lengths: Iterable[Iterable[float]]) -> list[np.ndarray]:
    """One float array per non-empty group; ``ValueError`` for a flat list, NaN, infinite or
    negative lengths and lengths above ``MAX_LENGTH``."""
    flat, sizes = _flatten(lengths)
    _check_values(flat, sizes)
    return [g for g in np.split(flat, np.cumsum(sizes)[:-1]) if g.size] if flat.size else []


def true_median(values: np.ndarray) -> float:
    """The median with the two middle values averaged (torch.median returns the lower one)."""
    return float(np.median(values))


def length_stats(lengths: Iterable[Iterable[float]], scope: str = "step") -> LengthStats | None:
    """Validate grouped lengths (as ``as_groups``) and summarise them; None when the step has
    no rollout. On the controller's per-step path: it flattens once and sorts once."""
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {SCOPES}, got {scope!r}")
    flat, sizes = _flatten(lengths)
    if flat.size == 0:
        return None
    ordered = np.sort(flat)
    # numpy sorts NaN last, so the two ends reveal any bad length.
    if not (ordered[0] >= 0 and ordered[-1] <= MAX_LENGTH):
        _check_values(flat, sizes)
    n = ordered.size
    median = float(ordered[(n - 1) // 2] + ordered[n // 2]) / 2.0
    mx = float(ordered[-1])
    if scope == "step":
        ratio = mx / max(median, MIN_MEDIAN)
    else:
        ratio = max(
            float(g.max()) / max(true_median(g), MIN_MEDIAN) for g in np.split(flat, np.cumsum(sizes)[:-1]) if g.size
        )
    return LengthStats(
        n_groups=sum(1 for s in sizes if s),
        n_rollouts=int(flat.size),
        max=mx,
        median=median,
        mean=float(flat.sum()) / flat.size,
        ratio=float(ratio),
        scope=scope,
    )


def padding_efficiency(lengths: Iterable[Iterable[float]]) -> float:
    """Useful tokens / padded tokens of the synchronous batch: sum(L) / (rows * max(L))."""
    flat, sizes = _flatten(lengths)
    _check_values(flat, sizes)
    if flat.size == 0:
        return math.nan
    mx = flat.max()
    return float(flat.sum() / (flat.size * mx)) if mx > 0 else 1.0


def block_ratios(block: np.ndarray, scope: str = "step") -> np.ndarray:
    """max/median of each step of ``block`` (steps, prompts, G), vectorised:
    ``block_ratios(b)[t] == length_stats(b[t]).ratio`` for valid lengths."""
    n = block.shape[0]
    if scope == "step":
        flat = block.reshape(n, -1)
        return flat.max(axis=1) / np.maximum(np.median(flat, axis=1), MIN_MEDIAN)
    if scope == "group":
        return (block.max(axis=2) / np.maximum(np.median(block, axis=2), MIN_MEDIAN)).max(axis=1)
    raise ValueError(f"scope must be one of {SCOPES}, got {scope!r}")


def subgroup_ratios(groups: list[np.ndarray], size: int, scope: str = "step") -> np.ndarray:
    """Ratios of the ``n // size`` disjoint sub-steps at G = ``size`` in a step's non-empty
    groups (``as_groups``), ``n`` the smallest group: completions ``k * size .. (k + 1) *
    size - 1`` of every prompt are an exact sample of such a step (docs/controller.md)."""
    if not groups:
        return np.empty(0)
    m = min(g.size for g in groups) // size
    if m == 0:
        return np.empty(0)
    # (prompts, m, size) -> (m, prompts, size): sub-step k holds column block k of every prompt.
    block = np.stack([g[: m * size] for g in groups]).reshape(len(groups), m, size).transpose(1, 0, 2)
    return block_ratios(block, scope)


#: The length tail of a real RL run (a published verl DAPO run of Qwen2.5-32B: 96 prompts x 8
#: samples a step, 6 steps), as ``tail_table`` reads it (docs/results.md, "The world").
REAL_RUN_TAIL = {
    "over_2x_median": 0.107,
    "over_2.5x_median": 0.062,
    "over_3x_median": 0.040,
    "groups_max_over_2x": 0.60,
    "groups_max_over_2.5x": 0.40,
    "sd_log_within_group": 0.85,
    "between_prompt_share": 0.17,
}
#: The group size the real run's statistics were measured at.
TAIL_GROUP_SIZE = 8


def tail_table(groups: Iterable[Iterable[float]], group_size: int = TAIL_GROUP_SIZE) -> dict:
    """The statistics of ``REAL_RUN_TAIL`` for completions grouped by prompt, each group cut
    into disjoint blocks of ``group_size`` (smaller groups left out); zero-length rows count
    as one token."""
    blocks = [
        b
        for g in as_groups(groups)
        if g.size >= group_size
        for b in np.split(g[: g.size // group_size * group_size], g.size // group_size)
    ]
    if not blocks:
        return {"blocks": 0, **{k: math.nan for k in REAL_RUN_TAIL}}
    x = np.maximum(np.stack(blocks), 1.0)
    med = np.median(x, axis=1, keepdims=True)
    logs = np.log(x)
    within = float(logs.var(axis=1, ddof=1).mean())
    between = float(logs.mean(axis=1).var(ddof=1)) if len(blocks) > 1 else 0.0
    ratio = x.max(axis=1) / med[:, 0]
    return {
        "blocks": len(blocks),
        "over_2x_median": float(np.mean(x > 2 * med)),
        "over_2.5x_median": float(np.mean(x > 2.5 * med)),
        "over_3x_median": float(np.mean(x > 3 * med)),
        "groups_max_over_2x": float(np.mean(ratio > 2)),
        "groups_max_over_2.5x": float(np.mean(ratio > 2.5)),
        "sd_log_within_group": math.sqrt(within),
        "between_prompt_share": between / (between + within) if between + within > 0 else math.nan,
    }
