"""Stable names of the per-step metrics that the trainer logs to W&B.

The trainer (``sagc.train``) writes them, the aggregation (``sagc.aggregate``) reads them:
change a name here and both sides follow. One W&B history row per *rollout* step; what
each metric means: docs/trainer.md ("What a step logs").
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
#: CPU work of the generation call beside decoding: tokenizing the prompts, cutting rows at
#: the stop strings, decoding them to text. It grows with total tokens, not the longest row,
#: so it is kept out of the rollout time.
POSTPROCESS_SECONDS = "time/rollout_postprocess_s"
#: With several processes, a rank that finished generating waits for the slowest one at
#: TRL's first gather: that wait is timed apart, so post-processing is CPU work alone.
GATHER_WAIT_SECONDS = "time/gather_wait_s"
#: vLLM sleep mode frees the KV cache after each generation and maps it again before the
#: next: engine work, not decoding.
VLLM_WAKE_SECONDS = "time/vllm_wake_s"
#: Sleep mode discards vLLM's weights after every generation, so each DAPO refill round
#: pushes the whole policy again: a cost of sleep mode, not of the rollout.
REFILL_SYNC_SECONDS = "time/refill_sync_s"
STEP_SECONDS = "time/step_s"
STEP_NO_REFILL_SYNC_SECONDS = "time/step_no_refill_sync_s"
WALLCLOCK_SECONDS = "time/wallclock_s"
CPU_SECONDS = "time/cpu_s"
CPU_TOTAL_SECONDS = "time/cpu_total_s"

#: The deterministic per-step costs: name in ``done.json``'s history -> W&B metric. They are
#: functions of the step's rollouts (lengths and shapes), never of the machine's speed.
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
    """Whether a step counts for a "second-half" statistic (the paper's budget reads the
    straggler rate over the second half of training): ``step > last_step / 2``. Takes
    numbers or arrays (numpy, pandas) alike; the trainer's done.json and the aggregation
    both select with it."""
    return step > last_step / 2
