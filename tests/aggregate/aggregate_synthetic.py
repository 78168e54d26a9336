"""Synthetic cells for the aggregation tests: real offline W&B runs with known histories.

(A module with a unique name rather than ``conftest``: test files import these helpers,
and ``from conftest import`` would pick another package's conftest in a full run.)

Every cell below has hand-picked per-step numbers, so the tests can state the expected
table values as plain arithmetic (see ``test_aggregate_tables.py``). The runs are logged
once per session with the real ``wandb.init(mode="offline")``, each into its cell's own
``<train_dir>/wandb`` directory like the trainer does.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from sagc import metrics

STEPS = 6
MODEL, ALGO = "tiny-a", "grpo"
SIZINGS = ("g4", "g16", "sagc")
SEEDS = (0, 1)

# Per cell: straggler flags per step, seconds per step, rollout seconds per step.
# Rewards are 0.1 .. 0.6 over the six steps plus 0.1 * seed (same for every sizing).
CELL_SPECS = {
    ("g4", 0): {"straggler": [0, 0, 0, 0, 0, 0], "step_s": 10.0, "rollout_s": 6.0, "G": [4] * 6},
    ("g4", 1): {"straggler": [0, 1, 1, 0, 0, 0], "step_s": 12.0, "rollout_s": 6.0, "G": [4] * 6},
    ("g16", 0): {"straggler": [1, 1, 1, 1, 1, 0], "step_s": 20.0, "rollout_s": 15.0, "G": [16] * 6},
    ("g16", 1): {"straggler": [1, 1, 1, 1, 1, 1], "step_s": 22.0, "rollout_s": 11.0, "G": [16] * 6},
    ("sagc", 0): {"straggler": [1, 0, 1, 0, 0, 0], "step_s": 12.0, "rollout_s": 6.0,
                  "G": [8, 16, 8, 8, 4, 4]},
    ("sagc", 1): {"straggler": [1, 0, 0, 0, 1, 0], "step_s": 14.0, "rollout_s": 7.0,
                  "G": [8, 8, 4, 4, 4, 4]},
}  # fmt: skip

EVAL = {  # task -> accuracy per sizing (seed 1 adds 0.02, and sagc's seed 1 SAGC_SPREAD more)
    "aime": {"g4": 0.10, "g16": 0.20, "sagc": 0.30},
    "gpqa": {"g4": 0.40, "g16": 0.50, "sagc": 0.60},
}
#: Seed 1 of sagc scores this much more than the shared seed effect: the paired differences
#: against g16 are then 0.10 and 0.14 (a spread), not the same number twice (a tie).
SAGC_SPREAD = 0.04
BASE_EVAL = {"aime": 0.05, "gpqa": 0.25}
#: The base models' straggler rates by G (the world's report): with DELTA, the best static G is g4.
BASE_RATES = {4: 0.2, 16: 0.6}
DELTA = 0.3


def accuracy(task: str, sizing: str, seed: int) -> float:
    """The synthetic evaluation's accuracy of one cell."""
    return EVAL[task][sizing] + 0.02 * seed + (SAGC_SPREAD * seed if sizing == "sagc" else 0.0)


def history_rows(sizing: str, seed: int) -> list[dict]:
    """The per-step rows of one synthetic cell, with every metric the trainer logs."""
    spec = CELL_SPECS[(sizing, seed)]
    rows, wall = [], 0.0
    for i in range(STEPS):
        step = i + 1
        wall += spec["step_s"]
        g = spec["G"][i]
        median = 10.0
        ratio = 3.0 if spec["straggler"][i] else 1.5
        row = {
            metrics.STEP: step,
            metrics.GROUP_SIZE: g,
            metrics.STRAGGLER: spec["straggler"][i],
            metrics.LENGTH_RATIO: ratio,
            metrics.STRAGGLER_RATE: sum(spec["straggler"][:step]) / step,
            metrics.ROLLOUT_SECONDS: spec["rollout_s"],
            metrics.WEIGHT_SYNC_SECONDS: 0.0,
            metrics.STEP_SECONDS: spec["step_s"],
            metrics.WALLCLOCK_SECONDS: wall,
            metrics.CPU_SECONDS: spec["step_s"] / 2,
            metrics.CPU_TOTAL_SECONDS: wall / 2,
            # Costs: a straggling step decodes 30 steps, a quiet one 15 (max = median x ratio).
            metrics.DECODE_STEPS: median * ratio,
            metrics.PADDED_TOKENS: 4 * g * median * ratio,
            metrics.COST["prompt_padding"]: 0,
            metrics.COST["generate_calls"]: 1,
            metrics.TRAIN_PADDED_TOKENS: 4 * g * (20 + median * ratio),
            metrics.TOKENS_GENERATED: 4 * g * 12,
            metrics.PADDING_EFFICIENCY: 0.5 + 0.05 * i,  # mean over the 6 steps: 0.625
            metrics.REWARD_MEAN: round(0.1 * step + 0.1 * seed, 10),
            metrics.REWARD_STD: 0.05,
            metrics.LENGTH_MEAN: 12.0 + i,  # mean over the 6 steps: 14.5
            metrics.LENGTH_MEDIAN: median,
            metrics.LENGTH_MAX: median * ratio,
            metrics.TRUNCATED_FRAC: 0.0,
            metrics.N_PROMPTS: 4,
            metrics.N_ROLLOUTS: 4 * g,
            metrics.LOSS: 0.01 * step,
        }
        if sizing == "sagc":
            row[metrics.LAMBDA] = 0.1 * step
            for cand, p in ((4, 0.1), (8, 0.3), (16, 0.6)):
                row[metrics.posterior_mean_key(cand)] = p + 0.01 * i
        rows.append(row)
    return rows


def log_offline_run(wandb_dir: Path, rows: list[dict], config: dict, project: str = "sagc-test",
                    **init_kwargs):  # fmt: skip
    """Log ``rows`` (one ``run.log`` each) to a real offline W&B run under ``wandb_dir``."""
    import wandb

    wandb_dir.mkdir(parents=True, exist_ok=True)
    run = wandb.init(mode="offline", dir=str(wandb_dir), project=project, config=config,
                     settings=wandb.Settings(silent=True, console="off", save_code=False),
                     **init_kwargs)  # fmt: skip
    for row in rows:
        run.log(row)
    run.finish()
    wait_for_flush(Path(run.dir).parent)


def wait_for_flush(run_dir: Path, timeout: float = 30.0) -> None:
    """Wait until wandb-core has written the run file's exit record.

    ``run.finish()`` in wandb 0.31 offline mode can return before the helper process has
    flushed the end of the transaction log (seen: the last blocks arrive a moment later).
    """
    from sagc.aggregate.reader import read_run_file

    deadline = time.monotonic() + timeout
    path = next(run_dir.glob("run-*.wandb"))
    while True:
        try:
            seg = read_run_file(path)
            if seg.finished and not seg.truncated:
                return
        except Exception:  # a half-written chunk can look corrupt for a moment
            if time.monotonic() > deadline:
                raise
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path}: wandb did not finish writing the run file")
        time.sleep(0.05)


#: Problems per synthetic evaluation: problem i scores 1 when i < 100 x accuracy, so two
#: evaluations differ exactly on the problems between their accuracies.
N_DOCS = 100


def write_eval(path: Path, model: str, cell: str, acc: dict[str, float]) -> None:
    """summary.json plus lm-eval-style per-problem samples files, as the runner leaves them."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tasks = {t: {"accuracy": a, "accuracy_stderr": 0.01, "accuracy_lenient": min(1.0, a + 0.05),
                 "pass_at_k": {"1": a}, "samples_per_problem": 1, "mean_output_tokens": 100.0 + 100 * a,
                 "truncation_rate": 0.0, "n_samples": N_DOCS} for t, a in acc.items()}  # fmt: skip
    path.write_text(json.dumps({"model": model, "cell": cell, "tasks": tasks}))
    samples = path.parent / "lm_eval" / "model"
    samples.mkdir(parents=True, exist_ok=True)
    for task, a in acc.items():
        ones = round(N_DOCS * a)
        rows = [{"doc_id": i, "exact_match": float(i < ones)} for i in range(N_DOCS)]
        (samples / f"samples_{task}_2026-01-01T00-00-00.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
