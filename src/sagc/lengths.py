"""Length statistics of one synchronous step: the only input SAGC needs.

``lengths`` is always grouped by prompt: ``[[l_11, ..., l_1G], [l_21, ...], ...]`` in
tokens, *including* rows truncated at the length cap (those are the stragglers).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import chain

import numpy as np

#: A median below one token is treated as one token so that the ratio stays finite when
#: most completions are empty (the step is then a straggler if any row has >= tau tokens).
MIN_MEDIAN = 1.0

#: The longest length accepted, in tokens: 2**53, beyond which a float64 cannot even count
#: tokens exactly and no generation comes near. Rejecting longer values keeps every
#: statistic finite (the median of two 1e308 values would overflow to infinity and turn the
#: ratio into 0.0, hiding the straggler).
MAX_LENGTH = float(2**53)

SCOPES = ("step", "group")


@dataclass(frozen=True)
class LengthStats:
    """Summary of a step's completion lengths.

    ``ratio`` is max/median over the whole step when ``scope == "step"`` (the default: the
    synchronous batch waits for its single longest rollout), or the largest per-group
    max/median when ``scope == "group"``.
    """

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
    """Validate grouped lengths and return one float array per non-empty group.

    Raises ``ValueError`` for a flat list, NaN / infinite / negative lengths and lengths
    above ``MAX_LENGTH``.
    """
    flat, sizes = _flatten(lengths)
    _check_values(flat, sizes)
    return [g for g in np.split(flat, np.cumsum(sizes)[:-1]) if g.size] if flat.size else []


def true_median(values: np.ndarray) -> float:
    """The median with the two middle values averaged (torch.median returns the lower one)."""
    return float(np.median(values))


def _sorted_median(sorted_values: np.ndarray) -> float:
    n = sorted_values.size
    return float(sorted_values[(n - 1) // 2] + sorted_values[n // 2]) / 2.0


def length_stats(lengths: Iterable[Iterable[float]], scope: str = "step") -> LengthStats | None:
    """Validate grouped lengths and summarise them; None when the step has no rollout.

    Lengths must be finite, >= 0 and <= ``MAX_LENGTH`` (2**53 tokens); anything else
    raises ``ValueError`` naming the group, so no statistic can overflow.

    This sits on the controller's per-step path, so it flattens once and sorts once
    (cheaper than several numpy reductions on small arrays).
    """
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {SCOPES}, got {scope!r}")
    flat, sizes = _flatten(lengths)
    if flat.size == 0:
        return None
    ordered = np.sort(flat)
    # numpy sorts NaN last, so the two ends reveal any NaN, infinite, negative or too long
    # length (NaN fails every comparison).
    if not (ordered[0] >= 0 and ordered[-1] <= MAX_LENGTH):
        _check_values(flat, sizes)
    median = _sorted_median(ordered)
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
    """max/median of each step of ``block`` (steps, prompts, G), vectorised.

    The arithmetic is ``length_stats``'s (float64, true median, median floored at
    ``MIN_MEDIAN``), so ``block_ratios(b)[t] == length_stats(b[t]).ratio`` for valid
    lengths. The simulator's fixed-G runs and the controller's sub-group observations
    both use it.
    """
    n = block.shape[0]
    if scope == "step":
        flat = block.reshape(n, -1)
        return flat.max(axis=1) / np.maximum(np.median(flat, axis=1), MIN_MEDIAN)
    if scope == "group":
        return (block.max(axis=2) / np.maximum(np.median(block, axis=2), MIN_MEDIAN)).max(axis=1)
    raise ValueError(f"scope must be one of {SCOPES}, got {scope!r}")


def subgroup_ratios(groups: list[np.ndarray], size: int, scope: str = "step") -> np.ndarray:
    """Ratios of the disjoint sub-steps of size ``size`` that a step's groups contain.

    ``groups`` are the non-empty prompt groups of one step (``as_groups``), each in
    generation order. Completions of a prompt are i.i.d., so the ``size`` completions
    ``k * size .. (k + 1) * size - 1`` of every prompt form an exact sample of a step run
    at G = ``size`` on the same prompts. A step whose smallest group holds ``n`` completions
    contains ``n // size`` such sub-steps; the result has one ratio per sub-step (empty
    when ``n < size``).
    """
    if not groups:
        return np.empty(0)
    m = min(g.size for g in groups) // size
    if m == 0:
        return np.empty(0)
    # (prompts, m, size) -> (m, prompts, size): sub-step k holds column block k of every prompt.
    block = np.stack([g[: m * size] for g in groups]).reshape(len(groups), m, size).transpose(1, 0, 2)
    return block_ratios(block, scope)


#: The length tail of a real RL run, as the tail table reads it (a published verl DAPO run
#: of Qwen2.5-32B: 96 prompts x 8 samples a step, 6 steps, 4,608 completions; groups of 8
#: completions of one prompt). A world's ``tail_table`` sits beside it (docs/results.md, "The world").
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
    """The length-tail statistics of ``REAL_RUN_TAIL`` for completions grouped by prompt.

    Each group is cut into disjoint blocks of ``group_size`` completions (a group of 16
    gives two groups of 8: completions of one prompt are i.i.d.), so every world is read at
    the real run's group size; smaller groups are left out. Shares of completions above k x
    their block's median, shares of blocks whose max/median exceeds k, the pooled
    within-block sd of log length and the share of log-length variance between blocks.
    Zero-length rows count as one token.
    """
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
