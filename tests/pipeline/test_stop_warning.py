"""SLURM's early warning to a train job covers the running step and a checkpoint save
(launch.stop_step_s + launch.stop_save_s), and a dry run warns where a stop could still end
before the checkpoint is complete (sagc.pipeline.launch)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import yaml

from sagc.pipeline import launch, preview
from sagc.pipeline.config import prepare

REPO = Path(__file__).resolve().parents[2]


def raw_paper() -> dict:
    return yaml.safe_load((REPO / "configs/paper.yaml").read_text())


def paper(raw: dict | None = None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the paper config's KV-cache warning
        return prepare(raw or raw_paper(), "configs/paper.yaml")


def test_the_train_rules_signal_is_the_step_and_save_estimate():
    config = paper()
    step, save = config.launch.stop_step_s, config.launch.stop_save_s
    res = launch.rule_resources(config, {"mem_mb": 1000})
    assert res["slurm_extra"] == f"--signal=USR1@{step + save}"
    config.launch.stop_save_s = 900  # a slower filesystem: the warning comes earlier
    assert launch.rule_resources(config, {})["slurm_extra"] == f"--signal=USR1@{step + 900}"
    # the estimate keys are the pipeline's: no cell's launch section carries them
    assert set(launch.pipeline_launch(config, "qwen2.5-3b")) == {"processes_per_node"}


def test_the_paper_config_stops_cleanly_with_the_pinned_torch():
    assert launch.stop_problems(paper(), torch_version="2.13.0+cu130") == []


def test_a_torch_without_the_elastic_shutdown_timeout_is_named_for_a_launched_cell():
    config = paper()
    (problem,) = launch.stop_problems(config, torch_version="2.11.0+cu130")
    assert "torch 2.11.0+cu130" in problem and "TORCH_ELASTIC_SHUTDOWN_TIMEOUT" in problem and "2.12" in problem
    config.launch.processes_per_node = 1  # one process: no elastic agent between SLURM and the trainer
    assert launch.stop_problems(config, torch_version="2.11.0") == []


def test_an_estimate_beyond_the_agents_grace_or_the_job_is_named():
    config = paper()
    config.launch.stop_step_s = launch.SHUTDOWN_GRACE_S
    (problem,) = launch.stop_problems(config, torch_version="2.13.0")
    assert "exceeds the 900 s" in problem and "launch.stop_step_s + launch.stop_save_s" in problem
    config = paper()
    config.resources["train"].runtime = 10  # minutes: less than the 600 s warning
    (problem,) = launch.stop_problems(config, torch_version="2.13.0")
    assert "resources.train.runtime = 10" in problem


def test_the_dry_run_lines_state_the_warning_and_warn_on_a_problem(monkeypatch):
    from sagc.pipeline.grid import Grid

    monkeypatch.chdir(REPO)
    raw = raw_paper()
    raw["launch"]["stop_save_s"] = 1000
    config = paper(raw)
    with pytest.warns(launch.PreemptionWarning, match="exceeds the 900 s"):
        lines = preview.train_lines(config, Grid.from_config(config), repo=REPO, cpus_per_node=32)
    assert any(line.startswith("stop: SLURM warns a train job 1420 s before") for line in lines), lines
