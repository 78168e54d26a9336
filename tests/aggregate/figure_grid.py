"""A large collected grid built in memory for the figure tests: 2 models x 2 algorithms x
{g4, g8, g16, sagc, sagc-fast} x 3 seeds, random but seeded histories and evaluations.

(The W&B round trip is tested with ``aggregate_synthetic``; figures only need what
``collect`` hands them, so this grid skips the files and can be as large as the grid the
paper config is about to get.)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from sagc import metrics
from sagc.aggregate.collect import BaseResult, CellResult, Collected
from sagc.aggregate.grid import BaseModelOutputs, CellOutputs, ResultGrid
from sagc.aggregate.reader import RunData
from sagc.aggregate.stats import cell_stats
from sagc.controller import fixed_group_size

MODELS = ("tiny-qwen2", "tiny-llama")
ALGORITHMS = ("grpo", "dapo")
SIZINGS = ("g4", "g8", "g16", "sagc", "sagc-fast")
SEEDS = (0, 1, 2)
STEPS = 24
CANDIDATES = (4, 8, 16)
DELTA = {"sagc": 0.3, "sagc-fast": 0.5, "sagc-tight": 0.1, "sagc-wide": 0.6}
TASKS = ("tiny_arith", "tiny_arith_heldout")
RISK = {4: 0.15, 8: 0.35, 16: 0.6}


def _history(rng: np.random.Generator, sizing: str) -> pd.DataFrame:
    fixed = fixed_group_size(sizing)
    g, lam, wall, rows = 8, 0.0, 0.0, []
    for step in range(1, STEPS + 1):
        if fixed is None:
            if lam > 2 and g > 4:
                g //= 2
            elif lam < 0.5 and g < 16:
                g *= 2
        else:
            g = fixed
        straggler = int(rng.random() < RISK[g])
        if fixed is None:
            lam = max(0.0, lam + 2.0 * (straggler - DELTA[sizing]))
        step_s = 2.0 + 0.3 * g * (2.0 if straggler else 1.0) * rng.uniform(0.8, 1.2)
        wall += step_s
        row = {
            metrics.STEP: step, metrics.GROUP_SIZE: g, metrics.STRAGGLER: straggler,
            metrics.LENGTH_RATIO: rng.uniform(2.2, 4.0) if straggler else rng.uniform(1.1, 1.9),
            metrics.ROLLOUT_SECONDS: 0.7 * step_s, metrics.STEP_SECONDS: step_s,
            metrics.WALLCLOCK_SECONDS: wall, metrics.CPU_SECONDS: step_s, metrics.CPU_TOTAL_SECONDS: wall,
            metrics.DECODE_STEPS: 40 * (3 if straggler else 1),
            metrics.REWARD_MEAN: 0.2 + 0.01 * step + rng.normal(0, 0.05),
            metrics.LENGTH_MEAN: rng.uniform(30, 60), metrics.PADDING_EFFICIENCY: rng.uniform(0.4, 0.8),
        }  # fmt: skip
        if fixed is None:
            row[metrics.LAMBDA] = lam
            for c in CANDIDATES:
                row[metrics.posterior_mean_key(c)] = float(np.clip(RISK[c] + rng.normal(0, 0.05), 0, 1))
        rows.append(row)
    return pd.DataFrame(rows)


def figure_collected(seeds=SEEDS, sizings=SIZINGS, tie: bool = True) -> Collected:
    """The collected grid. With ``tie``, g4 and g8 of every panel score exactly the same
    accuracy and output length on one task (points that would hide each other)."""
    rng = np.random.default_rng(7)
    root = Path("results/fig")
    cells, results = [], []
    for model in MODELS:
        for algo in ALGORITHMS:
            for sizing in sizings:
                for seed in seeds:
                    cid = f"{model}/{algo}/{sizing}/seed{seed}"
                    cell = CellOutputs(id=cid, model=model, algorithm=algo, sizing=sizing, seed=seed,
                                train_dir=root / "train" / cid,
                                eval_summary=root / "eval" / cid / "summary.json", steps=STEPS)  # fmt: skip
                    history = _history(rng, sizing)
                    config = {
                        "model": model,
                        "algorithm": algo,
                        "sizing": sizing,
                        "seed": seed,
                        "config": {
                            "sizing": {"name": sizing, "sagc": {"delta": DELTA[sizing]}}
                            if sizing in DELTA
                            else {"name": sizing, "sagc": {"tau": 2.0}}
                        },
                    }
                    evals = {}
                    for t, task in enumerate(TASKS):
                        tied = tie and t == 0 and sizing in ("g4", "g8")
                        evals[task] = {
                            "accuracy": 0.25 if tied else float(rng.uniform(0.1, 0.5)),
                            "accuracy_stderr": 0.04, "mean_output_tokens": 40.0 if tied else float(rng.uniform(30, 70)),
                            "truncation_rate": 0.0, "n_samples": 64.0, "accuracy_lenient": 0.5,
                            "samples_per_problem": 4.0, "pass_at_n": 0.6,
                        }  # fmt: skip
                    cells.append(cell)
                    results.append(CellResult(cell, RunData(history, config, finished=True),
                                              cell_stats(history, 5), evals))  # fmt: skip
    base = []
    for model in MODELS:
        b = BaseModelOutputs(model=model, eval_summary=root / "eval" / model / "base" / "summary.json")
        evals = {task: {"accuracy": 0.2, "accuracy_stderr": 0.04, "mean_output_tokens": 50.0,
                        "truncation_rate": 0.0, "n_samples": 64.0, "accuracy_lenient": 0.3,
                        "samples_per_problem": 4.0, "pass_at_n": 0.4} for task in TASKS}  # fmt: skip
        base.append(BaseResult(b, evals))
    grid = ResultGrid(name="fig", cells=tuple(cells), base=tuple(r.base for r in base), tables_dir=root / "tables",
                figures_dir=Path("paper_figures/fig"), time_unit="s", tau=2.0)  # fmt: skip
    return Collected(grid, results, base)
