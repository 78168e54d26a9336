"""Fixtures of the aggregation tests (helpers in ``aggregate_synthetic``)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.aggregate.aggregate_synthetic import (
    ALGO,
    BASE_EVAL,
    BASE_RATES,
    DELTA,
    EVAL,
    MODEL,
    SEEDS,
    SIZINGS,
    STEPS,
    accuracy,
    history_rows,
    log_offline_run,
    write_eval,
)

# matplotlib reads MPLCONFIGDIR once, at import: point it away from ~/.config first.
os.environ.setdefault("MPLCONFIGDIR", tempfile.mkdtemp(prefix="sagc-test-mpl-"))


@pytest.fixture(scope="session")
def wandb_env(tmp_path_factory):
    """Keep wandb off the network and out of the home directory while tests log runs;
    stop the wandb-core helper process at the end of the session."""
    home = tmp_path_factory.mktemp("home")
    env = {
        "WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_X_DISABLE_STATS": "true",
        "WANDB_CONFIG_DIR": str(home / "wandb-config"), "WANDB_CACHE_DIR": str(home / "wandb-cache"),
        "WANDB_DATA_DIR": str(home / "wandb-data"),
    }  # fmt: skip
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    yield home
    import wandb

    wandb.teardown()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="session")
def synthetic_world(wandb_env, tmp_path_factory):
    """A finished 1 model x 1 algorithm x {g4, g16, sagc} x 2 seeds grid on disk.

    Returns (root, grid dict); paths in the grid are relative to root.
    """
    root = tmp_path_factory.mktemp("world")
    cells = []
    for sizing in SIZINGS:
        for seed in SEEDS:
            cell_id = f"{MODEL}/{ALGO}/{sizing}/seed{seed}"
            train_dir = Path("results/t/train") / cell_id
            eval_path = Path("results/t/eval") / cell_id / "summary.json"
            config = {"config_name": "t", "model": MODEL, "algorithm": ALGO, "sizing": sizing,
                      "seed": seed, "train": {"max_steps": STEPS}}  # fmt: skip
            log_offline_run(root / train_dir / "wandb", history_rows(sizing, seed), config)
            (root / train_dir / "done.json").write_text(json.dumps({"steps": STEPS}))
            acc = {t: accuracy(t, sizing, seed) for t in EVAL}
            write_eval(root / eval_path, MODEL, cell_id, acc)
            cells.append({"id": cell_id, "model": MODEL, "algorithm": ALGO, "sizing": sizing,
                          "seed": seed, "train_dir": str(train_dir),
                          "eval_summary": str(eval_path), "steps": STEPS})  # fmt: skip
    base_eval = Path("results/t/eval") / MODEL / "base" / "summary.json"
    write_eval(root / base_eval, MODEL, "base", BASE_EVAL)
    report = Path("results/t/models") / MODEL / "stragglers.json"
    (root / report).parent.mkdir(parents=True)
    (root / report).write_text(
        json.dumps({"per_group_size": [{"group_size": g, "straggler_rate": r} for g, r in BASE_RATES.items()]})
    )
    grid = {"name": "t", "time_unit": "min", "last_k": 3, "allow_partial": False, "tau": 2.0,
            "delta": DELTA, "budgets": {"sagc": DELTA}, "straggler_reports": {MODEL: str(report)},
            "wandb": {"source": "offline"}, "cells": cells,
            "base": [{"model": MODEL, "eval_summary": str(base_eval)}],
            "tables_dir": "results/t/tables", "figures_dir": "paper_figures/t"}  # fmt: skip
    return root, grid


@pytest.fixture
def world_copy(synthetic_world, tmp_path):
    """A private copy of the synthetic world that a test may damage."""
    root, grid = synthetic_world
    dst = tmp_path / "world"
    shutil.copytree(root, dst, symlinks=True)
    return dst, json.loads(json.dumps(grid))
