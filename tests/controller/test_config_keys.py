"""The controller's options through the pipeline config and the trainer's cell config:
accepted in ``sagc`` and ``sagc_variants``; bad values are named by key in
tests/pipeline/test_config.py."""

from pathlib import Path

import pytest
import yaml

from sagc.pipeline.cells import train_cell_config
from sagc.pipeline.config import prepare
from sagc.pipeline.grid import Grid
from sagc.train.config import TrainConfig

REPO = Path(__file__).resolve().parents[2]
FAST = {"counterfactual": True, "selection": "constrained"}


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch):
    monkeypatch.chdir(REPO)


def default_config():
    return yaml.safe_load((REPO / "configs" / "default.yaml").read_text())


def test_sagc_fast_variant_reaches_the_cell_config():
    config = default_config()
    config["sagc_variants"] = {"fast": dict(FAST)}
    config["sizings"] = ["g16", "sagc", "sagc-fast"]
    config = prepare(config, "configs/default.yaml")
    grid = Grid.from_config(config)
    cells = {c.sizing: c for c in grid.cells()}
    fast = TrainConfig.from_dict(train_cell_config(config, grid, cells["sagc-fast"]), check_vllm=False)
    faithful = TrainConfig.from_dict(train_cell_config(config, grid, cells["sagc"]), check_vllm=False)
    assert fast.sizing.policy_config(0).counterfactual is True
    assert fast.sizing.policy_config(0).selection == "constrained"
    assert fast.sizing.policy_config(0).tau == config.sagc.tau
    assert faithful.sizing.policy_config(0).counterfactual is False
    assert faithful.sizing.policy_config(0).selection == "lagrangian"


def test_options_accepted_in_the_sagc_block():
    config = default_config()
    config["sagc"].update(FAST)
    prepare(config, "configs/default.yaml")


def test_cell_config_names_a_bad_option():
    config = prepare(default_config(), "configs/default.yaml")
    grid = Grid.from_config(config)
    cell = next(c for c in grid.cells() if c.sizing == "sagc")
    d = train_cell_config(config, grid, cell)
    d["sizing"]["sagc"]["selection"] = "greedy"
    with pytest.raises(ValueError, match="sizing.sagc is invalid: SAGCConfig.selection"):
        TrainConfig.from_dict(d, check_vllm=False)
