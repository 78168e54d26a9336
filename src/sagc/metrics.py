"""Names of the per-step metrics the trainer logs to W&B and the aggregation reads; what each
means: docs/trainer.md ("What a step logs").
"""

STEP = "step"
GROUP_SIZE = "sagc/group_size"
STRAGGLER = "sagc/straggler"
LENGTH_RATIO = "sagc/length_ratio"
STRAGGLER_RATE = "sagc/straggler_rate"
LAMBDA = "sagc/lambda"
POSTERIOR_MEAN_PREFIX = "sagc/posterior_mean/g"

ROLLOUT_SECONDS = "time/rollout_s"
WEIGHT_SYNC_SECONDS = "time/weight_sync_s"
#: CPU work of the generation call beside decoding (kept out of the rollout time).
POSTPROCESS_SECONDS = "time/rollout_postprocess_s"
#: A rank's wait for the slowest one at TRL's first gather.
GATHER_WAIT_SECONDS = "time/gather_wait_s"
#: vLLM sleep mode's remapping of the KV cache before a generation.
VLLM_WAKE_SECONDS = "time/vllm_wake_s"
#: The weight pushes of DAPO refill rounds (sleep mode discards vLLM's weights).
REFILL_SYNC_SECONDS = "time/refill_sync_s"
STEP_SECONDS = "time/step_s"
STEP_NO_REFILL_SYNC_SECONDS = "time/step_no_refill_sync_s"
WALLCLOCK_SECONDS = "time/wallclock_s"
CPU_SECONDS = "time/cpu_s"
CPU_TOTAL_SECONDS = "time/cpu_total_s"

#: The machine-independent per-step costs: name in ``done.json``'s history -> W&B metric.
COST = {
    "decode_steps": "cost/decode_steps",
    "padded_tokens": "cost/padded_tokens",
    "prompt_padding": "cost/prompt_padding",
    "generate_calls": "cost/generate_calls",
    "train_padded_tokens": "cost/train_padded_tokens",
}
DECODE_STEPS = COST["decode_steps"]
PADDED_TOKENS = COST["padded_tokens"]
TRAIN_PADDED_TOKENS = COST["train_padded_tokens"]

TOKENS_GENERATED = "tokens/generated"
PADDING_EFFICIENCY = "tokens/padding_efficiency"

REWARD_MEAN = "reward/mean"
REWARD_STD = "reward/std"

LENGTH_MEAN = "length/mean"
LENGTH_MEDIAN = "length/median"
LENGTH_MAX = "length/max"
TRUNCATED_FRAC = "length/truncated_frac"

N_PROMPTS = "batch/prompts"
N_ROLLOUTS = "batch/rollouts"
LONG_ROUND = "batch/long_round"

DS_ROUNDS = "dapo/ds_rounds"
DS_DROPPED_GROUPS = "dapo/ds_dropped_groups"
DS_SECONDS = "dapo/ds_seconds"
DS_FILTER_DISAGREE = "dapo/ds_filter_disagree"

LOSS = "train/loss"


def posterior_mean_key(group_size: int) -> str:
    """Metric name of the posterior mean straggler risk of candidate ``group_size``."""
    return f"{POSTERIOR_MEAN_PREFIX}{int(group_size)}"


#: Metrics every training run logs at every step (fixed G and SAGC alike).
REQUIRED = (
    STEP, GROUP_SIZE, STRAGGLER, LENGTH_RATIO, STRAGGLER_RATE,
    ROLLOUT_SECONDS, WEIGHT_SYNC_SECONDS, POSTPROCESS_SECONDS, STEP_SECONDS, WALLCLOCK_SECONDS, CPU_SECONDS, CPU_TOTAL_SECONDS,
    *COST.values(), TOKENS_GENERATED, PADDING_EFFICIENCY,
    REWARD_MEAN, REWARD_STD, LENGTH_MEAN, LENGTH_MEDIAN, LENGTH_MAX, TRUNCATED_FRAC,
    N_PROMPTS, N_ROLLOUTS,
)  # fmt: skip

#: Keys of the W&B run config that identify a cell (the aggregation groups by them).
CELL_KEYS = ("config_name", "model", "algorithm", "sizing", "seed")


def in_second_half(step, last_step):
    """Whether a step counts for a "second-half" statistic: ``step > last_step / 2``, for
    numbers or arrays alike."""
    return step > last_step / 2
