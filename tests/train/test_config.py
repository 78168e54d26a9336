"""Cell config validation, presets and the GRPOConfig plumbing (fast: no model, no TRL run)."""

from __future__ import annotations

import copy
import json
import re
import time

import pytest

from sagc.train.config import TrainConfig, load_config, vllm_installed
from sagc.train.presets import grpo_config_kwargs, resolve_algorithm, vllm_max_num_seqs


@pytest.fixture
def cell(tmp_path):
    """The pipeline's exact shape (the cell contract of sagc.train.config), pointing at a fake model folder."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    data = tmp_path / "train.jsonl"
    data.write_text(json.dumps({"prompt": "p", "answer": "1"}) + "\n")
    return {
        "cell": {
            "id": "tiny-qwen2/grpo/sagc/seed0",
            "config_name": "default",
            "model": "tiny-qwen2",
            "algorithm": "grpo",
            "sizing": "sagc",
            "seed": 0,
        },
        "model": {"path": str(model), "tokenizer": None, "trust_remote_code": False},
        "data": {"train": str(data)},
        "rewards": {"correctness": 1.0, "format": 0.1},
        "train": {
            "steps": 30,
            "prompts_per_step": 4,
            "rollout_budget": None,
            "max_prompt_length": 96,
            "max_completion_length": 160,
            "temperature": 1.0,
            "top_p": 1.0,
            "learning_rate": 5e-5,
            "save_steps": 10,
            "seed": 1234567,
            "torch_threads": 1,
        },
        "algorithm": {"name": "grpo", "beta": 0.04},
        "sizing": {"name": "sagc", "sagc": {"candidates": [4, 8, 16], "tau": 2.0, "delta": 0.3}},
        "wandb": {
            "mode": "offline",
            "project": "sagc-repro",
            "entity": None,
            "group": "default",
            "name": "tiny-qwen2/grpo/sagc/seed0",
            "dir": str(tmp_path / "wandb"),
        },
        "device": {
            "use_cpu": True,
            "bf16": False,
            "gradient_checkpointing": False,
            "use_vllm": False,
            "vllm_mode": "colocate",
            "vllm_gpu_memory_utilization": 0.3,
            "vllm_tensor_parallel_size": 1,
        },
        "output_dir": str(tmp_path / "out"),
    }


def _with(d: dict, dotted: str, value) -> dict:
    d = copy.deepcopy(d)
    *path, last = dotted.split(".")
    node = d
    for k in path:
        node = node[k]
    if value is _DELETE:
        del node[last]
    else:
        node[last] = value
    return d


_DELETE = object()


def test_pipeline_shape_is_accepted(cell):
    cfg = TrainConfig.from_dict(cell)
    assert cfg.train.prompts_per_step == 4 and cfg.sizing.group_sizes() == (4, 8, 16)
    assert cfg.sizing.policy_config(cfg.train.seed).seed == 1234567
    assert cfg.algorithm.beta == 0.04 and cfg.train.lr_scheduler_type == "constant"


@pytest.mark.parametrize("dotted, value, message", [
    ("train.prompts_per_step", 0, "train.prompts_per_step must be a positive integer, got 0"),
    ("train.steps", -3, "train.steps must be a positive integer"),
    ("train.learning_rate", "fast", "train.learning_rate must be a finite number"),
    ("train.top_p", 1.5, "train.top_p must be <= 1.0"),
    ("train.seed", 1.5, "train.seed must be a non-negative integer"),
    ("train.rollout_budget", 48, "exactly one of train.prompts_per_step"),
    ("train.max_tokens", 5, "train.max_tokens"),
    ("algorithm.name", "ppo", "algorithm.name must be one of ['grpo', 'dapo']"),
    ("algorithm.epsilon_high", 0.1, "algorithm.epsilon_high (0.1) must be >= algorithm.epsilon"),
    ("algorithm.ds_max_rounds", -1, "algorithm.ds_max_rounds must be a non-negative integer"),
    ("algorithm.kl", 0.1, "algorithm.kl"),
    ("sizing.name", "g1", "sizing.name must be a group size >= 2"),
    ("sizing.name", "adaptive", "sizing.name must be 'g<N>'"),
    ("sizing.sagc", {"candidates": [4, 8], "tau": 0.5}, "sizing.sagc is invalid: SAGCConfig.tau must be > 1"),
    ("sizing.sagc", {"seed": 3}, "sizing.sagc.seed is not allowed"),
    ("rewards", {"correctness": 1.0, "brevity": 0.5}, "rewards.brevity is not a known reward"),
    ("wandb.mode", "cloud", "wandb.mode must be one of"),
    ("device.master_weights", "bf16", "device.master_weights must be one of"),
    ("device.master_weights", "bf16_kahan", "device.master_weights='bf16_kahan' needs device.bf16=true"),
    ("device.vllm_importance_sampling_mode", "sequence", "device.vllm_importance_sampling_mode must be one of"),
    ("train.stop", "\nUser:", "train.stop must be a list of non-empty stop strings"),
    ("device.vllm_mode", "remote", "device.vllm_mode must be one of ['colocate', 'server']"),
    ("cell.id", _DELETE, "cell.id is required"),
    ("output_dir", _DELETE, "output_dir is required"),
    ("extra", {}, "unknown top-level key(s): extra"),
])  # fmt: skip
def test_bad_values_name_the_key(cell, dotted, value, message):
    bad = _with(cell, dotted, value)
    if dotted == "sizing.name":
        bad["cell"]["sizing"] = value
    with pytest.raises(ValueError) as err:
        TrainConfig.from_dict(bad)
    assert message in str(err.value)


def test_cell_and_sections_must_agree(cell):
    with pytest.raises(ValueError, match=r"cell.algorithm \('grpo'\) and algorithm.name \('dapo'\) disagree"):
        TrainConfig.from_dict(_with(cell, "algorithm.name", "dapo"))


def test_splits_that_would_drop_rows_are_refused(cell):
    # Rollout budget 24 is not divisible by G=16.
    bad = _with(_with(cell, "train.prompts_per_step", None), "train.rollout_budget", 24)
    with pytest.raises(ValueError, match=r"train.rollout_budget \(24\) must be divisible by every group size"):
        TrainConfig.from_dict(bad)
    # DAPO splits a step into 2 mini-batches: 1 prompt x G=3 rows cannot be halved.
    bad = _with(
        _with(_with(_with(cell, "algorithm", {"name": "dapo"}), "cell.algorithm", "dapo"), "sizing.name", "g3"),
        "cell.sizing",
        "g3",
    )
    bad["train"]["prompts_per_step"] = 1
    with pytest.raises(ValueError, match="cannot be split into algorithm.minibatches"):
        TrainConfig.from_dict(bad)
    ok = _with(_with(cell, "train.prompts_per_step", None), "train.rollout_budget", 48)
    shapes = TrainConfig.from_dict(ok).resolved.layout
    assert {g: s.prompts for g, s in shapes.shapes.items()} == {4: 12, 8: 6, 16: 3}


def test_presets_are_documented_values():
    grpo = resolve_algorithm({"name": "grpo"}, 160)
    assert (grpo.loss_type, grpo.beta, grpo.epsilon, grpo.epsilon_high, grpo.scale_rewards) == (
        "grpo",
        0.04,
        0.2,
        None,
        "group",
    )
    assert not grpo.dynamic_sampling and not grpo.mask_truncated_completions and not grpo.uses_overlong_punishment
    dapo = resolve_algorithm({"name": "dapo"}, 160)
    assert (dapo.loss_type, dapo.beta, dapo.epsilon, dapo.epsilon_high) == ("dapo", 0.0, 0.2, 0.28)
    assert dapo.mask_truncated_completions and dapo.dynamic_sampling and dapo.ds_max_rounds == 3
    assert dapo.overlong_buffer == 32 and dapo.minibatches == 2  # 20% of 160; off-policy reuse
    custom = resolve_algorithm({"name": "dapo", "ds_max_rounds": 0, "overlong_buffer": 10, "beta": 0.01}, 160)
    assert (custom.ds_max_rounds, custom.overlong_buffer, custom.beta) == (0, 10, 0.01)


def test_grpo_config_kwargs_cpu_build_a_real_grpoconfig(cell):
    from trl import GRPOConfig

    cfg = TrainConfig.from_dict(_with(_with(cell, "algorithm", {"name": "dapo"}), "cell.algorithm", "dapo"))
    algo = cfg.resolved.algorithm
    kw = grpo_config_kwargs(cfg, algo, cfg.resolved.layout)
    args = GRPOConfig(**kw)
    assert args.max_steps == 60 and args.save_steps == 20  # steps x 2 updates per rollout
    assert args.steps_per_generation == 2 and args.gradient_accumulation_steps == 1
    assert args.generation_batch_size == 4 * 16 and args.num_generations == 16
    assert args.loss_type == "dapo" and args.epsilon_high == 0.28 and args.beta == 0.0
    assert args.mask_truncated_completions and args.learning_rate == 5e-5 and not args.bf16
    assert args.report_to == [] or args.report_to == "none"


def test_gpu_plumbing_sizes_vllm_for_prompts_times_gmax(cell):
    gpu = _with(
        cell,
        "device",
        {
            "use_cpu": False,
            "bf16": True,
            "gradient_checkpointing": True,
            "use_vllm": True,
            "vllm_mode": "colocate",
            "vllm_gpu_memory_utilization": 0.4,
            "vllm_tensor_parallel_size": 1,
        },
    )
    cfg = TrainConfig.from_dict(gpu, check_vllm=False)  # the plumbing, without the package
    algo = cfg.resolved.algorithm
    kw = grpo_config_kwargs(cfg, algo, cfg.resolved.layout)
    assert kw["bf16"] and kw["gradient_checkpointing"] and not kw["use_cpu"]
    assert kw["use_vllm"] and kw["vllm_mode"] == "colocate" and kw["vllm_gpu_memory_utilization"] == 0.4
    assert kw["vllm_max_model_length"] == 96 + 160
    # bf16 autocast over fp32 master weights unless the compensated bf16 optimizer is chosen.
    assert kw["model_init_kwargs"]["dtype"] == "float32"
    assert kw["vllm_importance_sampling_mode"] == "token_truncate"
    kahan = TrainConfig.from_dict(_with(gpu, "device.master_weights", "bf16_kahan"), check_vllm=False)
    assert grpo_config_kwargs(kahan, algo, kahan.resolved.layout)["model_init_kwargs"]["dtype"] == "bfloat16"
    assert vllm_max_num_seqs(kw) == 4 * 16  # the largest step (P x G_max) in one pass
    # With a rollout budget the largest step is the budget, whatever G.
    budget = _with(_with(gpu, "train.prompts_per_step", None), "train.rollout_budget", 64)
    cfg = TrainConfig.from_dict(budget, check_vllm=False)
    kw = grpo_config_kwargs(cfg, algo, cfg.resolved.layout)
    assert vllm_max_num_seqs(kw) == 64


@pytest.mark.skipif(vllm_installed(), reason="vllm is installed here")
def test_vllm_without_the_package_fails_clearly(cell, tmp_path, capsys):
    from sagc.train.run import main

    gpu = _with(cell, "device", {"use_cpu": False, "bf16": True, "use_vllm": True})
    path = tmp_path / "cell.json"
    path.write_text(json.dumps(gpu))
    with pytest.raises(ValueError, match="'vllm' package is not installed"):
        load_config(path)
    assert main(["--config", str(path)]) == 2
    assert "device.use_vllm=true but the 'vllm' package is not installed" in capsys.readouterr().err


@pytest.mark.skipif(vllm_installed(), reason="vllm is installed here")
def test_vllm_on_cpu_needs_the_cpu_build(cell):
    with pytest.raises(ValueError, match=r"use_cpu=true needs vLLM's CPU build \(requirements/cpu-vllm\.txt"):
        TrainConfig.from_dict(_with(cell, "device", {"use_cpu": True, "use_vllm": True}), check_vllm=False)


def test_cli_rejects_bad_cells_before_loading_anything(cell, tmp_path, capsys, monkeypatch):
    from sagc.train.run import main

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    path = tmp_path / "bad.yaml"
    path.write_text(json.dumps(_with(cell, "train.prompts_per_step", 0)))
    t0 = time.perf_counter()
    assert main(["--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "train.prompts_per_step must be a positive integer, got 0" in err and str(path) in err
    # A missing model folder and an uncached hub id fail before any weights are read.
    missing = _with(cell, "model.path", str(tmp_path / "nope"))
    path.write_text(json.dumps(missing))
    assert main(["--config", str(path)]) == 2
    assert "is not a model folder" in capsys.readouterr().err
    hub = _with(cell, "model.path", "Qwen/Qwen2.5-3B-not-cached")
    path.write_text(json.dumps(hub))
    assert main(["--config", str(path)]) == 2
    assert "model Qwen/Qwen2.5-3B-not-cached is not in the local cache; run with network or set HF_HOME" in (
        capsys.readouterr().err
    )
    assert time.perf_counter() - t0 < 60
    assert not (tmp_path / "out" / "done.json").exists()


def test_unreadable_files_are_named(tmp_path):
    p = tmp_path / "c.json"
    p.write_text("{not json")
    with pytest.raises(ValueError, match=r"c.json is not valid json"):
        load_config(p)
    with pytest.raises(ValueError, match="does not exist"):
        load_config(tmp_path / "missing.yaml")


def test_trainer_checks_its_layout_before_loading_the_model(tmp_path):
    """Constructed directly (a user's own run), the trainer takes the step layout it is given
    and refuses one that disagrees with its args or its sizer, or a checkpoint inside a step,
    before TRL touches the (here nonexistent) model."""
    from datasets import Dataset
    from trl import GRPOConfig

    from sagc.controller import FixedGroupSize, SAGCConfig, SAGCController
    from sagc.train.presets import resolve_algorithm, step_shapes
    from sagc.train.trainer import SAGCGRPOTrainer, SAGCTrainingArguments

    ds = Dataset.from_list([{"prompt": "p", "answer": "1"}])
    common = dict(
        output_dir=str(tmp_path),
        use_cpu=True,
        bf16=False,
        report_to="none",
        num_generations=4,
        per_device_train_batch_size=4,
    )

    def layout(algorithm, group_sizes):
        return step_shapes(
            resolve_algorithm({"name": algorithm}, 16),
            group_sizes,
            prompts_per_step=2,
            rollout_budget=None,
            gradient_accumulation_steps=1,
        )

    def build(sizer, shapes, **kw):
        args = GRPOConfig(**{**common, **kw})
        return SAGCGRPOTrainer(
            model=str(tmp_path / "no-model"),
            reward_funcs=[],
            args=args,
            train_dataset=ds,
            group_sizer=sizer,
            sagc_args=SAGCTrainingArguments(layout=shapes),
        )

    with pytest.raises(TypeError, match="sagc_args.layout must be the step layout .*got NoneType"):
        SAGCTrainingArguments(layout=None)
    with pytest.raises(ValueError, match="needs args.max_steps > 0"):
        build(FixedGroupSize(4), layout("grpo", (4,)))
    # DAPO: two mini-batches per rollout, two updates per step
    with pytest.raises(ValueError, match=r"save_steps \(3\) must be a multiple of the updates per step \(2\)"):
        build(FixedGroupSize(4), layout("dapo", (4,)), max_steps=4, save_steps=3, steps_per_generation=2)
    with pytest.raises(ValueError, match=r"max_steps \(3\) must be a multiple of the updates per step \(2\)"):
        build(FixedGroupSize(4), layout("dapo", (4,)), max_steps=3, save_steps=2, steps_per_generation=2)
    with pytest.raises(ValueError, match=r"sagc_args.layout has no step at G = \[8\], which the group sizer"):
        build(SAGCController(SAGCConfig(candidates=(4, 8))), layout("grpo", (4,)), max_steps=2)
    with pytest.raises(
        ValueError,
        match="sagc_args.layout splits a step into 1 micro-batches accumulated 1 at a time; args say 2 and 1",
    ):
        build(FixedGroupSize(4), layout("grpo", (4,)), max_steps=2, steps_per_generation=2)


def test_stop_strings_reach_vllm_and_the_trimmer_but_not_hf_generate(cell):
    from sagc.train.presets import generation_kwargs

    stopped = _with(cell, "train.stop", ["\nUser:"])
    cpu = TrainConfig.from_dict(stopped)
    assert cpu.train.stop == ("\nUser:",)
    # HF generate would need the tokenizer for stop strings (TRL does not pass it): the rows
    # are trimmed afterwards instead.
    assert generation_kwargs(cpu.train, cpu.device) is None
    gpu = TrainConfig.from_dict(
        _with(stopped, "device", {"use_cpu": False, "bf16": True, "use_vllm": True}), check_vllm=False
    )
    assert generation_kwargs(gpu.train, gpu.device) == {"stop": ["\nUser:"]}  # vLLM SamplingParams
    with pytest.raises(ValueError, match="must not set stop/stop_strings: use train.stop"):
        TrainConfig.from_dict(_with(cell, "train.generation_kwargs", {"stop_strings": ["x"]}))


@pytest.mark.parametrize(
    "launch, device, expected",
    [
        ({"strategy": "fsdp2"}, {}, "fsdp2 shares the model across processes"),
        ({"strategy": "zero2", "processes_per_node": 2}, {}, "on CPU (device.use_cpu=true) accelerate ignores it"),
        (
            {"strategy": "zero3", "processes_per_node": 2},
            {"use_cpu": False, "bf16": True, "master_weights": "bf16_kahan"},
            "set master_weights: fp32",
        ),
    ],
)
def test_a_hand_written_cell_gets_the_strategy_rules_too(cell, launch, device, expected):
    """A cell file run by hand (not only the pipeline's cells) is refused what no launch of
    it could run."""
    cell = copy.deepcopy(cell)
    cell["launch"] = launch
    cell["device"] = {**cell.get("device", {}), **device}
    with pytest.raises(ValueError, match=re.escape(expected)):
        TrainConfig.from_dict(cell)
    cell["launch"] = {**launch, "strategy": "ddp"}
    if device.get("use_cpu") is False:
        return  # ddp on GPU: valid, nothing more to check here
    TrainConfig.from_dict(cell)
