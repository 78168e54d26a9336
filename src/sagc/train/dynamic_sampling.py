"""DAPO's dynamic sampling on top of TRL's scored batches (TRL has none).

Rules, caps and why merging is exact: docs/trainer.md ("Inside the trainer", dynamic sampling).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from sagc.rewards import correctness_reward

#: The reward function DAPO's filter reads, by the name TRL gives it.
FILTER_REWARD = correctness_reward.__name__

#: Per-row tensors of TRL's scored batch, and how to pad them to a common width.
_LEFT_PADDED = ("prompt_ids", "prompt_mask")
_RIGHT_PADDED = (
    "completion_ids",
    "completion_mask",
    "old_per_token_logps",
    "ref_per_token_logps",
    "sampling_per_token_logps",
    "importance_sampling_ratio",
    "tool_mask",
)
_ROW = ("advantages",)
_SCALAR = ("num_items_in_batch",)
PER_ROW_KEYS = frozenset(_LEFT_PADDED + _RIGHT_PADDED + _ROW)


def is_left_padded(key: str) -> bool:
    return key in _LEFT_PADDED


def pad_value(key: str, pad_token_id: int):
    """What TRL pads ``key`` with: the pad token for ids, 1 for the tool mask, else 0."""
    return pad_token_id if key in ("prompt_ids", "completion_ids") else (1 if key == "tool_mask" else 0)


def informative_groups(rewards: torch.Tensor, group_size: int, atol: float = 1e-6) -> torch.Tensor:
    """Boolean mask over groups: True where the rewards are not all equal (NaN rows ignored)."""
    if rewards.numel() % group_size:
        raise ValueError(f"{rewards.numel()} rewards do not form groups of {group_size}")
    grouped = rewards.detach().float().view(-1, group_size)
    hi = torch.where(torch.isnan(grouped), torch.full_like(grouped, -torch.inf), grouped).max(dim=1).values
    lo = torch.where(torch.isnan(grouped), torch.full_like(grouped, torch.inf), grouped).min(dim=1).values
    return (hi - lo) > atol


def filter_disagreement(total: torch.Tensor, correct: torch.Tensor, group_size: int) -> int:
    """Groups kept by one criterion (total reward, correctness) and dropped by the other."""
    return int((informative_groups(total, group_size) != informative_groups(correct, group_size)).sum())


def _pad_to(t: torch.Tensor, width: int, value, left: bool) -> torch.Tensor:
    if t.dim() < 2 or t.size(1) == width:
        return t
    pad = t.new_full((t.size(0), width - t.size(1)), value)
    return torch.cat([pad, t] if left else [t, pad], dim=1)


def merge_scored(parts: Sequence[tuple[dict, torch.Tensor]], pad_token_id: int) -> dict:
    """Concatenate the selected rows of ``(scored_batch, row_index)`` pairs into one batch,
    re-padded as TRL pads, ``num_items_in_batch`` recomputed from the merged loss mask."""
    if not parts:
        raise ValueError("merge_scored needs at least one part")
    keys = set(parts[0][0])
    for out, _ in parts[1:]:
        if set(out) != keys:
            raise ValueError(f"scored batches disagree on their keys: {sorted(keys)} vs {sorted(out)}")
    unknown = keys - set(_LEFT_PADDED + _RIGHT_PADDED + _ROW + _SCALAR)
    if unknown:
        raise NotImplementedError(
            f"dynamic sampling cannot merge scored-batch keys {sorted(unknown)} "
            "(multimodal or tool batches are not supported)"
        )
    merged: dict = {}
    for key in keys - set(_SCALAR):
        tensors = [out[key][idx] for out, idx in parts]
        if key in _ROW:
            merged[key] = torch.cat(tensors, dim=0)
            continue
        width = max(t.size(1) for t in tensors) if tensors[0].dim() > 1 else None
        value = pad_value(key, pad_token_id)
        merged[key] = torch.cat([_pad_to(t, width, value, is_left_padded(key)) if width else t for t in tensors], dim=0)
    loss_mask = merged["completion_mask"]
    if "tool_mask" in merged:
        loss_mask = loss_mask * merged["tool_mask"]
    merged["num_items_in_batch"] = loss_mask.sum()
    return merged


#: One generation round: its scored rows, their total and correctness rewards.
Round = tuple[dict, torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class Selection:
    """What dynamic sampling made of a step's rounds."""

    batch: dict | None  # the step's rows, every rank's (None: the first round, kept as it is)
    rounds: int  # refill rounds
    dropped: int  # groups dropped in all rounds
    filled: int  # dropped groups put back to complete the batch (the cap was reached)
    disagree: int  # groups kept by correctness xor by the total reward


def keep_informative(
    first: Round,
    prompts: int,
    group_size: int,
    *,
    max_rounds: int,
    refill_unit: int,
    refill: Callable[[int], Round],
    pad_token_id: int,
) -> Selection:
    """Keep the informative groups of ``first`` and of refill rounds (``refill(n)`` scores ``n``
    fresh prompts) until ``prompts`` groups are kept or ``max_rounds`` refills ran; then
    complete the batch with dropped groups, most recent first, their advantages zeroed."""
    g, p = group_size, prompts
    whole, rewards, correct = first
    keep = informative_groups(correct, g)
    disagree = filter_disagreement(rewards, correct, g)
    parts, spare = [(whole, _group_rows(keep, g))], [(whole, _group_rows(~keep, g))]
    kept, dropped = int(keep.sum()), int((~keep).sum())
    rounds = filled = 0
    while kept < p and rounds < max_rounds:
        rounds += 1
        need = p - kept
        out, r, c = refill(-(-need // refill_unit) * refill_unit)
        disagree += filter_disagreement(r, c, g)
        informative = informative_groups(c, g)
        # A round rounded up to whole units may hold more informative groups than needed.
        keep = informative & (torch.cumsum(informative.long(), 0) <= need)
        parts.append((out, _group_rows(keep, g)))
        spare.append((out, _group_rows(~informative, g)))
        kept += int(keep.sum())
        dropped += int((~informative).sum())
    if kept < p:
        need = p - kept
        for out, idx in reversed(spare):
            take = idx[: min(need, idx.numel() // g) * g]
            if take.numel():
                parts.append(({**out, "advantages": torch.zeros_like(out["advantages"])}, take))
                need -= take.numel() // g
            if need == 0:
                break
        filled = p - kept
    if len(parts) == 1 or (rounds == 0 and filled == 0 and dropped == 0):
        return Selection(None, rounds, dropped, filled, disagree)
    parts = [(o, i) for o, i in parts if i.numel()]
    return Selection(merge_scored(parts, pad_token_id=pad_token_id), rounds, dropped, filled, disagree)


def _group_rows(group_mask: torch.Tensor, g: int) -> torch.Tensor:
    """Row indices of the groups selected by ``group_mask``."""
    groups = torch.nonzero(group_mask, as_tuple=False).flatten()
    return (groups.unsqueeze(1) * g + torch.arange(g)).flatten()
