"""The two worlds as objects: what each decides for the shipped configs that name it."""

import pytest

from sagc.pipeline.config import load_config
from sagc.pipeline.grid import Grid
from sagc.pipeline.schema import pipeline_model
from sagc.pipeline.world import WORLDS, world_of
from tests.shipped_configs import CONFIG_DIR


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch):
    monkeypatch.chdir(CONFIG_DIR.parent)


def test_the_tiny_world_builds_its_models_and_reads_its_own_splits():
    config = load_config(CONFIG_DIR / "default.yaml")
    world, grid = world_of(config), Grid.from_config(config)
    assert world.name == "tiny" and world.builds_models and world.warm_jobs
    assert world.base_model_eval(config, grid, "tiny-qwen2") == {"model": f"{grid.root}/models/tiny-qwen2/base"}
    assert all(f.startswith(world.eval_data_dir(grid) + "/") for f in world.eval_data_files(grid))
    assert set(world.straggler_reports(grid)) == set(config.models)
    assert world.cpu_isa(config) == config.tiny.cpu_isa == "avx2"


def test_the_hub_world_loads_cached_models_and_reads_staged_benchmarks():
    config = load_config(CONFIG_DIR / "paper.yaml")
    world, grid = world_of(config), Grid.from_config(config)
    model = next(iter(config.models))
    assert world.name == "hub" and not world.builds_models and not world.warm_jobs
    assert world.base_model_path(config, grid, model) == config.models[model].hub_id
    assert world.base_model_eval(config, grid, model) == {"model_json": grid.base_model_json(model)}
    assert world.eval_data_files(grid) == [f"{world.eval_data_dir(grid)}/staged.json"]
    assert world.straggler_reports(grid) == {} and world.cpu_isa(config) is None


@pytest.mark.parametrize("name, key", [("tiny", "arch"), ("hub", "hub_id")])
def test_a_model_without_its_worlds_key_is_named(name, key):
    config = pipeline_model().model_validate(
        {"name": "t", "world": name, "models": {"m": {}}, "algorithms": ["grpo"], "sizings": ["g4"], "seeds": [0],
         "train": {"steps": 1}, "hub": {"train_dataset": "d"}, "device": {"use_cpu": True}}
    )  # fmt: skip
    problems = WORLDS[name].problems(config)
    assert len(problems) == 1 and f"config key 'models.m.{key}'" in problems[0]
