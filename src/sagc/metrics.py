"""Stable names of the per-step metrics that the trainer logs to W&B.

The trainer (``sagc.train``) writes them, the aggregation (``sagc.aggregate``) reads them:
change a name here and both sides follow. One W&B history row is logged per *rollout*
step (one synchronous generate-score-update round); ``STEP`` counts them from 1. GRPO does
one optimizer update per step; DAPO does several (its off-policy mini-batches), so TRL's
optimizer step (and the checkpoint folder number) can be a multiple of ``STEP``. TRL's own
metrics (KL, entropy, clip ratios, ...) are logged alongside under a ``trl/`` prefix.

| name                         | meaning                                                        |
|------------------------------|----------------------------------------------------------------|
| ``step``                     | rollout step (1-based)                                         |
| ``sagc/group_size``          | G used for this step's rollouts                                |
| ``sagc/straggler``           | 1 if max/median completion length > tau, else 0                |
| ``sagc/length_ratio``        | max/median completion length (scope as configured)             |
| ``sagc/straggler_rate``      | running mean of ``sagc/straggler`` up to this step             |
| ``sagc/lambda``              | SAGC's dual variable after this step's update (absent: fixed G)|
| ``sagc/posterior_mean/g<G>`` | posterior mean straggler risk of candidate G (SAGC only)       |
| ``time/rollout_s``           | seconds spent generating rollouts (dynamic-sampling rounds too)|
| ``time/step_s``              | seconds of the whole step (generation + scoring + update)      |
| ``time/wallclock_s``         | cumulative training seconds (sum of step_s, survives resume)   |
| ``tokens/generated``         | completion tokens generated this step                          |
| ``tokens/padding_efficiency``| sum(lengths) / (rollouts * max length)                         |
| ``reward/mean``, ``reward/std`` | total reward over the step's rollouts                       |
| ``length/mean|median|max``   | completion length in tokens (truncated rows included)          |
| ``length/truncated_frac``    | fraction of rollouts that hit the length cap                   |
| ``batch/prompts``            | prompts in the step (after dynamic sampling)                   |
| ``batch/rollouts``           | rollouts in the step (prompts * G)                             |
| ``dapo/ds_rounds``           | extra dynamic-sampling generation rounds (DAPO)                |
| ``dapo/ds_dropped_groups``   | zero-variance groups dropped by dynamic sampling (DAPO)        |
| ``dapo/ds_seconds``          | seconds spent in the extra rounds (included in rollout_s)      |
| ``train/loss``               | the policy loss of the step                                    |
"""

STEP = "step"
GROUP_SIZE = "sagc/group_size"
STRAGGLER = "sagc/straggler"
LENGTH_RATIO = "sagc/length_ratio"
STRAGGLER_RATE = "sagc/straggler_rate"
LAMBDA = "sagc/lambda"
POSTERIOR_MEAN_PREFIX = "sagc/posterior_mean/g"

ROLLOUT_SECONDS = "time/rollout_s"
STEP_SECONDS = "time/step_s"
WALLCLOCK_SECONDS = "time/wallclock_s"

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

DS_ROUNDS = "dapo/ds_rounds"
DS_DROPPED_GROUPS = "dapo/ds_dropped_groups"
DS_SECONDS = "dapo/ds_seconds"

LOSS = "train/loss"


def posterior_mean_key(group_size: int) -> str:
    """Metric name of the posterior mean straggler risk of candidate ``group_size``."""
    return f"{POSTERIOR_MEAN_PREFIX}{int(group_size)}"


#: Metrics every training run logs at every step (fixed G and SAGC alike).
REQUIRED = (
    STEP, GROUP_SIZE, STRAGGLER, LENGTH_RATIO, STRAGGLER_RATE,
    ROLLOUT_SECONDS, STEP_SECONDS, WALLCLOCK_SECONDS, TOKENS_GENERATED, PADDING_EFFICIENCY,
    REWARD_MEAN, REWARD_STD, LENGTH_MEAN, LENGTH_MEDIAN, LENGTH_MAX, TRUNCATED_FRAC,
    N_PROMPTS, N_ROLLOUTS,
)  # fmt: skip

#: Keys of the W&B run config that identify a cell (the aggregation groups by them).
CELL_KEYS = ("config_name", "model", "algorithm", "sizing", "seed")
