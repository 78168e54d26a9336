"""One record per training step: a ``StepInProgress`` while it runs, then a ``StepResult``.

The W&B row, done.json's history entry, the lengths trace line and the checkpoint form are
all views of the ``StepResult``; their keys are the ones existing readers use.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

from sagc import metrics as M
from sagc.controller import StepRecord
from sagc.lengths import as_groups, padding_efficiency, true_median
from sagc.trace import TraceStep

#: Prefix of TRL's own per-update metrics in the step's row.
TRL_METRIC_PREFIX = "trl/"


@dataclass(frozen=True)
class GenerateCall:
    """One call of ``generate``: rows, the longest completion (the call's decode steps),
    completion tokens summed, and pad tokens added to left-pad the prompts."""

    rows: int
    longest: int
    tokens: int
    prompt_padding: int

    @classmethod
    def of_lengths(cls, prompt_lengths: list[int], lengths: list[int]) -> GenerateCall:
        widest = max(prompt_lengths, default=0)
        return cls(
            rows=len(lengths),
            longest=max(lengths, default=0),
            tokens=sum(lengths),
            prompt_padding=sum(widest - n for n in prompt_lengths),
        )

    @property
    def padded_tokens(self) -> int:
        """Completion positions HF ``generate`` computes."""
        return self.rows * self.longest

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


def step_costs(calls: list[GenerateCall], train_padded_tokens: int) -> dict[str, int]:
    """The deterministic cost of one step from its generate calls (see ``sagc.metrics``)."""
    return {
        "decode_steps": sum(c.longest for c in calls),
        "padded_tokens": sum(c.padded_tokens for c in calls),
        "prompt_padding": sum(c.prompt_padding for c in calls),
        "generate_calls": len(calls),
        "train_padded_tokens": int(train_padded_tokens),
    }


@dataclass
class StepInProgress:
    """Everything measured while one step runs (its rollout rounds and its updates)."""

    step: int
    group_size: int
    length_groups: list = field(default_factory=list)
    truncated: list = field(default_factory=list)
    rewards: list = field(default_factory=list)  # one tensor per generation round
    # Per round the slowest rank's seconds, summed over the rounds.
    gen_seconds: float = 0.0
    sync_seconds: float = 0.0
    post_seconds: float = 0.0
    wait_seconds: float = 0.0  # the longest wait of a rank for the others after generating
    wake_seconds: float | None = None  # vLLM sleep mode's wake and sleep (None: no such engine)
    refill_sync_seconds: float = 0.0  # the part of sync_seconds spent in refill rounds
    calls: list = field(default_factory=list)
    train_padded_tokens: int = 0
    ds_rounds: int = 0
    ds_dropped: int = 0
    ds_filled: int = 0
    ds_seconds: float = 0.0
    ds_disagree: int = 0  # groups kept by correctness xor by the total reward
    n_prompts: int = 0
    n_rollouts: int = 0
    prompt_ids: list = field(default_factory=list)  # dataset index per length group, refills included
    long_round: bool = False  # tail batching's round kind (always False for the plain stream)
    record: StepRecord | None = None
    update_losses: list = field(default_factory=list)
    trl_metrics: list = field(default_factory=list)  # one {name: mean} per update

    def finish(
        self, *, step_s: float, cpu_s: float, wallclock_s: float, cpu_total_s: float, dynamic_sampling: bool
    ) -> StepResult:
        import torch

        rec = self.record
        keys = sorted({k for snap in self.trl_metrics for k in snap})
        trl = {k: float(np.mean([snap[k] for snap in self.trl_metrics if k in snap])) for k in keys}
        return StepResult(
            step=self.step, group_size=self.group_size,
            straggler=bool(rec.straggler), ratio=rec.ratio, straggler_rate=rec.straggler_rate,
            lambda_=rec.lambda_, posterior_mean=dict(rec.posterior_mean),
            lengths=[[int(x) for x in g] for g in self.length_groups],
            truncated=[bool(t) for t in self.truncated],
            rewards=torch.cat(self.rewards).double().numpy().tolist(),
            calls=list(self.calls), train_padded_tokens=self.train_padded_tokens,
            prompts=self.n_prompts, rollouts=self.n_rollouts,
            prompt_ids=[int(i) for i in self.prompt_ids], long_round=bool(self.long_round),
            ds_rounds=self.ds_rounds, ds_dropped=self.ds_dropped, ds_filled=self.ds_filled,
            ds_seconds=self.ds_seconds, ds_disagree=self.ds_disagree, dynamic_sampling=dynamic_sampling,
            rollout_s=self.gen_seconds, sync_s=self.sync_seconds, post_s=self.post_seconds,
            gather_wait_s=self.wait_seconds, vllm_wake_s=self.wake_seconds,
            refill_sync_s=self.refill_sync_seconds, step_s=step_s, cpu_s=cpu_s,
            wallclock_s=wallclock_s, cpu_total_s=cpu_total_s,
            losses=[float(x) for x in self.update_losses], trl_metrics=trl,
        )  # fmt: skip


@dataclass(frozen=True)
class StepResult:
    """A finished step (see the module docstring)."""

    step: int
    group_size: int
    straggler: bool
    ratio: float
    straggler_rate: float
    lambda_: float | None
    posterior_mean: dict[int, float]
    lengths: list[list[int]]  # grouped by prompt, truncated rows included
    truncated: list[bool]
    rewards: list[float]  # the weighted reward of every row (NaN: no reward function scored it)
    calls: list[GenerateCall]
    train_padded_tokens: int
    prompts: int
    rollouts: int
    prompt_ids: list[int]  # the dataset index of each length group's prompt
    long_round: bool
    ds_rounds: int
    ds_dropped: int
    ds_filled: int
    ds_seconds: float
    ds_disagree: int
    dynamic_sampling: bool
    rollout_s: float  # generation alone (sagc.metrics.ROLLOUT_SECONDS)
    sync_s: float
    post_s: float  # sagc.metrics.POSTPROCESS_SECONDS
    gather_wait_s: float
    vllm_wake_s: float | None
    refill_sync_s: float
    step_s: float
    cpu_s: float
    wallclock_s: float
    cpu_total_s: float
    losses: list[float]
    trl_metrics: dict[str, float]  # TRL's per-update metrics, averaged over the step's updates

    @property
    def costs(self) -> dict[str, int]:
        return step_costs(self.calls, self.train_padded_tokens)

    def row(self) -> dict[str, float]:
        """The W&B row of the step (names from ``sagc.metrics``)."""
        groups = as_groups(self.lengths)
        flat = np.concatenate(groups)
        rewards = np.asarray(self.rewards, dtype=np.float64)
        rewards = rewards[~np.isnan(rewards)]
        row: dict[str, float] = {
            M.STEP: self.step,
            M.GROUP_SIZE: self.group_size,
            M.STRAGGLER: int(self.straggler),
            M.LENGTH_RATIO: self.ratio,
            M.STRAGGLER_RATE: self.straggler_rate,
            M.ROLLOUT_SECONDS: self.rollout_s,
            M.WEIGHT_SYNC_SECONDS: self.sync_s,
            M.POSTPROCESS_SECONDS: self.post_s,
            M.GATHER_WAIT_SECONDS: self.gather_wait_s,
            M.REFILL_SYNC_SECONDS: self.refill_sync_s,
            M.STEP_SECONDS: self.step_s,
            M.STEP_NO_REFILL_SYNC_SECONDS: self.step_s - self.refill_sync_s,
            M.WALLCLOCK_SECONDS: self.wallclock_s,
            M.CPU_SECONDS: self.cpu_s,
            M.CPU_TOTAL_SECONDS: self.cpu_total_s,
            M.TOKENS_GENERATED: int(flat.sum()),
            M.PADDING_EFFICIENCY: padding_efficiency(groups),
            # Sample std, as TRL's reward_std (nanstd with Bessel's correction).
            M.REWARD_MEAN: float(rewards.mean()) if rewards.size else math.nan,
            M.REWARD_STD: float(rewards.std(ddof=1)) if rewards.size > 1 else 0.0,
            M.LENGTH_MEAN: float(flat.mean()),
            M.LENGTH_MEDIAN: true_median(flat),
            M.LENGTH_MAX: float(flat.max()),
            M.TRUNCATED_FRAC: float(np.mean(self.truncated)),
            M.N_PROMPTS: self.prompts,
            M.N_ROLLOUTS: self.rollouts,
            M.LONG_ROUND: int(self.long_round),
            M.LOSS: float(np.mean(self.losses)) if self.losses else math.nan,
        }
        row.update({M.COST[name]: value for name, value in self.costs.items()})
        if self.vllm_wake_s is not None:
            row[M.VLLM_WAKE_SECONDS] = self.vllm_wake_s
        if self.lambda_ is not None:
            row[M.LAMBDA] = self.lambda_
            for g, m in self.posterior_mean.items():
                row[M.posterior_mean_key(g)] = m
        if self.dynamic_sampling:
            row[M.DS_ROUNDS] = self.ds_rounds
            row[M.DS_DROPPED_GROUPS] = self.ds_dropped
            row[M.DS_SECONDS] = self.ds_seconds
            row[M.DS_FILTER_DISAGREE] = self.ds_disagree
        for k, v in self.trl_metrics.items():
            row[TRL_METRIC_PREFIX + k] = v
        return row

    def history_entry(self) -> dict[str, Any]:
        """The step's entry of ``done.json["history"]``."""
        row = self.row()
        return {
            "step": self.step, "group_size": self.group_size,
            "straggler": self.straggler, "ratio": self.ratio,
            "step_s": self.step_s, "rollout_s": self.rollout_s, "wallclock_s": self.wallclock_s,
            "reward_mean": row[M.REWARD_MEAN], "length_max": row[M.LENGTH_MAX],
            "length_median": row[M.LENGTH_MEDIAN], "prompts": self.prompts, "rollouts": self.rollouts,
            "ds_rounds": self.ds_rounds, "ds_dropped_groups": self.ds_dropped,
            "ds_filled_groups": self.ds_filled, "long_round": self.long_round, "loss": row[M.LOSS],
            "cpu_s": self.cpu_s, "cpu_total_s": self.cpu_total_s, **self.costs,
            "calls": [c.to_dict() for c in self.calls],
        }  # fmt: skip

    def trace_step(self) -> TraceStep:
        return TraceStep(
            self.step,
            self.group_size,
            tuple(np.asarray(g) for g in self.lengths),
            self.straggler,
            tuple(self.prompt_ids) if self.prompt_ids else None,
            self.long_round,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON form (checkpoints): candidate keys as strings, calls as dicts."""
        d = asdict(self)
        d["posterior_mean"] = {str(g): m for g, m in self.posterior_mean.items()}
        d["calls"] = [c.to_dict() for c in self.calls]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StepResult:
        missing = sorted({f.name for f in fields(cls)} - set(d))
        if missing:
            raise ValueError(f"step record is missing key(s) {missing} (truncated or damaged state)")
        return cls(
            **{
                **d,
                "posterior_mean": {int(g): float(m) for g, m in d["posterior_mean"].items()},
                "calls": [GenerateCall(**c) for c in d["calls"]],
            }
        )
