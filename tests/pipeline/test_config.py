"""Pipeline configs: the shipped ones are valid; bad ones fail naming the file and the key
(the one list of bad values, checked where the pipeline reads a config)."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sagc.pipeline.cells import sizing_section, train_cell_config
from sagc.pipeline.config import ConfigError, load_config, prepare
from sagc.pipeline.grid import Cell, Grid
from tests.shipped_configs import SHIPPED, layers_id, raw_config

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch):
    monkeypatch.chdir(REPO)


@pytest.mark.parametrize("layers", SHIPPED, ids=layers_id)
def test_shipped_configs_are_valid(layers):
    raw_device = raw_config(layers).get("device") or {}
    if raw_device.get("use_vllm") and raw_device.get("use_cpu") and importlib.util.find_spec("vllm") is None:
        # Valid only where vLLM's CPU build is installed; elsewhere refused before any job.
        with pytest.raises(ConfigError, match="needs vLLM's CPU build"):
            load_config(*layers)
        return
    config = load_config(*layers)
    assert config.name == layers[-1].stem


def raw(name="default"):
    return yaml.safe_load((REPO / "configs" / f"{name}.yaml").read_text())


@pytest.mark.parametrize(
    "mutate, expected",
    [
        (lambda c: c["train"].update(stepz=3), "unknown key(s) in train: train.stepz"),
        (lambda c: c["train"].update(steps="many"), "train.steps must be a positive integer, got 'many'"),
        (lambda c: c["train"].update(prompts_per_step=0), "train.prompts_per_step must be a positive integer, got 0"),
        # a rule across keys of a block, checked at the boundary (it used to crash the memory plan)
        (lambda c: c["train"].update(prompts_per_step=None), "exactly one of train.prompts_per_step"),
        (lambda c: c["train"].update(seed=3), "train.seed is not a pipeline key"),
        # an integral float is no integer (the evaluation cell would refuse it later, unnamed)
        (lambda c: c["evaluate"].update(limit=64.0), "evaluate.limit must be a positive integer, got 64.0"),
        (lambda c: c.update(seeds=[22, 22]), "seeds: has duplicates: [22, 22]"),
        (lambda c: c.update(sizings=["g4", "g-8"]), "config key 'sizings' must be 'g<N>' (e.g. 'g16')"),
        (lambda c: c.update(algorithms=["ppo"]), "algorithms[0] must be one of 'grpo' or 'dapo', got 'ppo'"),
        (lambda c: c["sagc"].update(delta=1.5), "sagc.delta must be < 1.0, got 1.5"),
        (lambda c: c["sagc"].update(tau=1.0), "sagc.tau must be > 1.0, got 1.0"),
        (lambda c: c.update(world="moon"), "world must be one of 'tiny' or 'hub', got 'moon'"),
        (lambda c: c.pop("train"), "train is required"),
        (lambda c: c.update(sizings=["sagc-slow"]), "config key 'sizings': 'sagc-slow' needs 'sagc_variants.slow'"),
        (lambda c: c["models"].update({"tiny-x": {}}), "config key 'models.tiny-x.arch'"),
        (lambda c: c["sagc"].update(candidates=[4, 4, 8]), "config key 'sagc': SAGCConfig.candidates has duplicates"),
        (
            lambda c: c.update(sagc_variants={"v": {"eta": -1}}, sizings=["sagc-v"]),
            "config key 'sagc_variants.v': SAGCConfig.eta",
        ),
        (lambda c: c["algorithm_overrides"].update(dapo={"epsilon_hi": 0.3}), "algorithm.epsilon_hi"),
        (lambda c: c.update(rewards={"correctness": 1.0, "lenght": 0.1}), "lenght"),
        (lambda c: c.update(seeds=[1, 70]), "config key 'seeds': [1] are also dev_seeds"),
        (lambda c: c["tiny"].update(world_seed=-1), "tiny.world_seed must be >= 0, got -1"),
        (lambda c: c["models"]["tiny-llama"].update(draw=-1), "models.tiny-llama.draw must be >= 0, got -1"),
        (
            lambda c: c["evaluate"].update(repeats={"aime24_boxed": 64}),
            "config key 'evaluate.repeats.aime24_boxed': not one of the evaluated tasks",
        ),
        (
            lambda c: c["evaluate"].update(repeats={"tiny_arith": 0}),
            "evaluate.repeats must be a positive integer or a mapping",
        ),
        (
            lambda c: c["evaluate"].update(repeats={"tiny_arith_heldout": 4}),
            "config key 'evaluate.repeats.tiny_arith_heldout'",
        ),
        (
            lambda c: c["evaluate"].update(tasks=["tiny_arith", "gsm8k"]),
            "config key 'evaluate.tasks': unknown task 'gsm8k'",
        ),
        (
            lambda c: c["evaluate"].update(tasks=["aime24_boxed"]),
            "config key 'evaluate.tasks': task 'aime24_boxed' belongs to world 'hub'",
        ),
        (
            lambda c: c["evaluate"].update(batch_size="lots"),
            "evaluate.batch_size must be a positive integer, 'auto' or 'auto:N', got 'lots'",
        ),
        (lambda c: c["evaluate"].update(threads=0), "evaluate.threads must be a positive integer, got 0"),
        (lambda c: c["evaluate"].update(dtpye="float32"), "unknown key(s) in evaluate: evaluate.dtpye"),
        (
            lambda c: c["sagc"].update(selection="greedy"),
            "sagc.selection must be one of ['lagrangian', 'constrained'], got 'greedy'",
        ),
        (lambda c: c["sagc"].update(counterfactual="yes"), "sagc.counterfactual must be true or false, got 'yes'"),
        (
            lambda c: c.update(sagc_variants={"fast": {"counterfactul": True}}, sizings=["sagc-fast"]),
            "config key 'sagc_variants.fast': unknown SAGCConfig key(s): ['counterfactul']",
        ),
        # a variant no sizing uses is checked too
        (
            lambda c: c.update(sagc_variants={"spare": {"counterfactual": 1}}),
            "config key 'sagc_variants.spare': SAGCConfig.counterfactual",
        ),
    ],
)
def test_bad_config_names_file_and_key(mutate, expected):
    config = raw()
    mutate(config)
    with pytest.raises(ConfigError) as err:
        prepare(config, "configs/bad.yaml")
    assert "configs/bad.yaml" in str(err.value)
    assert expected in str(err.value)


@pytest.mark.parametrize(
    "device, expected, fix",
    [
        ({"vllm_tensor_parallel_size": 2}, "device.vllm_tensor_parallel_size=2 is not supported", "set it to 1"),
        ({"vllm_mode": "server"}, "device.vllm_mode=server needs a `trl vllm-serve` process", "vllm_mode=colocate"),
    ],
)
def test_vllm_settings_the_trainer_cannot_run_are_refused_before_any_job(device, expected, fix):
    """TRL accepts both and fails only after the model has loaded (or after waiting for a
    server nobody starts): the paper config refuses them at parse time, saying what to do."""
    config = raw("paper")
    config["device"].update(device)
    with pytest.raises(ConfigError) as err:
        prepare(config, "configs/paper.yaml")
    assert "configs/paper.yaml" in str(err.value) and expected in str(err.value) and fix in str(err.value)


def test_vllm_sleep_mode_is_refused_on_cpu_before_any_job():
    config = raw("paper")
    config["device"].update(use_cpu=True, vllm_gpu_memory_utilization=0.3)
    config["train"]["gradient_accumulation_steps"] = 8
    with pytest.raises(ConfigError) as err:
        prepare(config, "configs/paper.yaml")
    assert "device.vllm_sleep_mode=true is not available on CPU" in str(err.value)
    assert "set device.vllm_sleep_mode=false" in str(err.value)


def test_an_automatic_vllm_share_needs_the_card():
    config = raw("paper")
    config["device"].update(gpu_memory_gib=None, vllm_sleep_mode=False)
    config["train"]["gradient_accumulation_steps"] = 8
    with pytest.raises(ConfigError) as err:
        prepare(config, "configs/paper.yaml")
    assert "device.vllm_gpu_memory_utilization=auto needs device.gpu_memory_gib" in str(err.value)


def test_hub_world_needs_hub_ids_and_a_dataset():
    config = raw("paper")
    config["models"]["qwen2.5-3b"] = {"arch": "qwen2"}
    config["hub"] = {}
    with pytest.raises(ConfigError) as err:
        prepare(config, "paper.yaml")
    assert "models.qwen2.5-3b.hub_id" in str(err.value)
    assert "hub.train_dataset" in str(err.value)


def test_invalid_config_fails_before_any_job(tmp_path):
    config = raw("ci")
    config["sagc"]["delta"] = 0
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(config))
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "1", "--configfile", str(bad), "--directory", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "sagc.delta must be > 0.0, got 0" in out and str(bad) in out
    assert not (tmp_path / "results").exists(), "no job may run on an invalid config"


def test_fixed_cells_only_see_the_measurement_keys():
    config = load_config(REPO / "configs" / "default.yaml")
    assert set(sizing_section(config, "g16")["sagc"]) == {"tau", "scope"}
    assert sizing_section(config, "sagc")["sagc"] == raw()["sagc"]
    tuned = raw()
    tuned["sagc"]["delta"] = 0.1
    tuned = prepare(tuned, "configs/tuned.yaml")
    grid = Grid.from_config(config)
    fixed, sagc = Cell("tiny-qwen2", "grpo", "g16", 0), Cell("tiny-qwen2", "grpo", "sagc", 0)
    assert train_cell_config(config, grid, fixed) == train_cell_config(tuned, grid, fixed)
    assert train_cell_config(config, grid, sagc) != train_cell_config(tuned, grid, sagc)


@pytest.mark.parametrize("name", ["..", ".", ".hidden", "../elsewhere", "a/b", "a b", "-x", ""])
def test_a_name_that_is_not_a_plain_identifier_is_rejected(name):
    """The name becomes results/<name>/ and paper_figures/<name>/: '..' would write the
    results outside results/ and the figures into the repository root."""
    config = raw()
    config["name"] = name
    with pytest.raises(ConfigError) as err:
        prepare(config, "configs/bad.yaml")
    assert "config key 'name'" in str(err.value) and "is not a plain name" in str(err.value)


def test_the_grid_itself_refuses_a_path_as_name():
    with pytest.raises(ValueError, match="config key 'name': '..' is not a plain name"):
        Grid("..", ("m",), ("grpo",), ("g4",), (0,))


def test_a_budget_cell_states_the_budget_and_no_prompts_per_step():
    """A ``rollout_budget`` turns the trainer's default P off without stating P: the cell
    carries only what the config says (P = budget / G is the trainer's, per step)."""
    config = raw()
    del config["train"]["prompts_per_step"]
    config["train"]["rollout_budget"] = 32
    config = prepare(config, "configs/budget.yaml")
    grid = Grid.from_config(config)
    for cell in (Cell("tiny-qwen2", "grpo", "g16", 22), Cell("tiny-llama", "dapo", "sagc", 22)):
        train = train_cell_config(config, grid, cell)["train"]
        assert train["rollout_budget"] == 32 and "prompts_per_step" not in train, cell.id
    assert config.train.prompts_per_step is None and "prompts_per_step" not in config.train.model_fields_set
