"""The evaluation cell: what the pipeline resolves for each evaluation job (every setting of
the evaluate block under its own name), what ``run --config`` and the flags of ``run`` read
(the same keys). Bad evaluation settings are refused before any job, naming the key:
tests/pipeline/test_config.py."""

import json
from pathlib import Path

import pytest
import yaml

from sagc.evaluate.cli import build_parser, cell_from_args, main
from sagc.evaluate.config import EvalConfig
from sagc.pipeline.cells import eval_cell_config
from sagc.pipeline.config import load_config, prepare
from sagc.pipeline.evaluation import EVAL_PIPELINE_KEYS, staged_benchmarks
from sagc.pipeline.grid import Grid
from sagc.pipeline.schema import EvaluateBlock

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch):
    monkeypatch.chdir(REPO)  # the schema file's path is relative to the repository


@pytest.mark.parametrize("name", ["default", "paper"])
def test_an_eval_cell_from_a_shipped_config_states_every_evaluation_setting(name):
    config = load_config(REPO / "configs" / f"{name}.yaml")
    grid = Grid.from_config(config)
    cell = next(iter(grid.cells()))
    ev = eval_cell_config(config, grid, cell)
    assert set(EvaluateBlock.model_fields) - set(EVAL_PIPELINE_KEYS) <= set(ev)
    assert set(ev) == set(EvalConfig.model_fields)
    stated = yaml.safe_load((REPO / "configs" / f"{name}.yaml").read_text())["evaluate"]
    for key, value in stated.items():  # what the config says reaches the cell under the same name
        assert ev[key] == value, key
    assert ev["threads"] == 1  # an evaluation job's one thread
    assert (ev["model"], ev["out"], ev["cell"]) == (f"{grid.train_dir(cell)}/final", grid.eval_dir(cell), cell.id)
    assert EvalConfig.from_dict(json.loads(json.dumps(ev, sort_keys=True))).model_dump(mode="json") == ev

    model = next(iter(grid.models))
    base = eval_cell_config(config, grid, model)
    assert base["cell"] == f"{model}/base" and base["out"] == grid.base_eval_dir(model)
    if config.world == "tiny":
        assert base["model"] == f"{grid.root}/models/{model}/base" and base["model_json"] is None
        assert base["data_dir"] == grid.data_dir
    else:  # a hub base model's folder is known once resolve_hub_model has written its record
        assert base["model"] is None and base["model_json"] == grid.base_model_json(model)
        assert base["data_dir"] == f"{grid.data_dir}/benchmarks"
    assert eval_cell_config(config, grid, model, threads=3)["threads"] == 3


def test_the_paper_config_stages_the_benchmarks_of_its_tasks():
    config = load_config(REPO / "configs" / "paper.yaml")
    assert staged_benchmarks(config) == ["aime24", "amc23", "gpqa_diamond"]
    config.evaluate = config.evaluate.model_copy(update={"tasks": ["gpqa_diamond_boxed"]})
    assert staged_benchmarks(config) == ["gpqa_diamond"]


def test_a_config_without_tasks_evaluates_its_worlds_tasks():
    config = yaml.safe_load((REPO / "configs" / "default.yaml").read_text())
    del config["evaluate"]["tasks"]
    config = prepare(config, "test.yaml")
    grid = Grid.from_config(config)
    assert eval_cell_config(config, grid, next(iter(grid.cells())))["tasks"] == ["tiny_arith", "tiny_arith_heldout"]


def _flags(cell: dict) -> list[str]:
    """``cell`` as the flags of ``python -m sagc.evaluate run``: each key under its own name."""
    argv = []
    for key, value in cell.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif isinstance(value, list):
            argv += [flag, ",".join(value)]
        elif isinstance(value, dict):
            argv += [flag, ",".join(f"{k}={v}" for k, v in value.items())]
        elif value is not None and value is not False:
            argv += [flag, str(value)]
    return argv


def test_every_cell_key_is_a_run_flag_of_the_same_name(tmp_path):
    cell = {
        "tasks": ["tiny_arith", "tiny_arith_heldout"],
        "backend": "vllm",
        "limit": 3,
        "max_gen_toks": 7,
        "temperature": 0.5,
        "top_p": 0.9,
        "repeats": {"tiny_arith": 2},
        "batch_size": "auto:2",
        "device": "cuda",
        "seed": 5,
        "threads": 2,
        "apply_chat_template": True,
        "tensor_parallel_size": 2,
        "gpu_memory_utilization": 0.5,
        "max_model_len": 99,
        "dtype": "float32",
        "model_json": "m.json",
        "data_dir": "data",
        "out": "out",
        "cell": "c",
    }
    assert set(cell) | {"model"} == set(EvalConfig.model_fields)  # every key but the other model source
    from_flags = cell_from_args(build_parser().parse_args(["run", *_flags(cell)]))
    assert from_flags == EvalConfig.from_dict(cell)
    path = tmp_path / "eval.json"
    path.write_text(json.dumps(cell))
    from_file = cell_from_args(build_parser().parse_args(["run", "--config", str(path), "--limit", "9"]))
    assert from_file == EvalConfig.from_dict({**cell, "limit": 9})  # flags replace the file's keys


def test_a_bad_cell_file_is_refused_naming_the_file_and_key(tmp_path, capsys):
    path = tmp_path / "eval.json"
    path.write_text(json.dumps({"tasks": ["tiny_arith"], "model": "m", "data_dir": "d", "out": "o", "limit": 0}))
    assert main(["run", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "limit must be a positive integer, got 0" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_a_cell_file_evaluates_exactly_as_the_same_flags(tmp_path, eval_model_dir, eval_data_dir):
    """Through real lm-eval on the tiny model: summary and output lengths byte for byte."""
    cell = {
        "tasks": ["tiny_arith", "tiny_arith_heldout"],
        "model": str(eval_model_dir),
        "data_dir": str(eval_data_dir),
        "limit": 4,
        "max_gen_toks": 12,
        "batch_size": 4,
        "seed": 1,
        "temperature": 1.0,
        "repeats": {"tiny_arith": 2},
        "cell": "tiny-qwen2/grpo/sagc/seed0",
    }
    assert main(["run", *_flags({**cell, "out": str(tmp_path / "flags")})]) == 0
    path = tmp_path / "eval.json"
    path.write_text(json.dumps({**cell, "out": str(tmp_path / "file")}, sort_keys=True))
    assert main(["run", "--config", str(path)]) == 0
    for name in ("summary.json", "output_lengths.jsonl"):
        assert (tmp_path / "flags" / name).read_bytes() == (tmp_path / "file" / name).read_bytes(), name
