"""Schema of one training cell: what ``python -m sagc.train --config CELL.json`` accepts.

The pipeline writes one JSON (or YAML) file per grid cell; ``TrainConfig.from_dict`` turns
it into frozen dataclasses and rejects anything wrong *before* a model or TRL is imported,
with a ``ValueError`` that names the dotted key (``train.prompts_per_step must be a positive
integer, got 0``). Unknown keys are rejected by name, so a typo never silently falls back to
a default.

Keys beyond the pipeline's shape (all optional, defaults below):

- ``train.gradient_accumulation_steps`` (1): micro-batches per optimizer update (GPU memory).
- ``train.lr_scheduler_type`` ("constant"): RL recipes (DAPO, most GRPO reproductions) keep
  the learning rate constant; TRL's default "linear" would decay it to 0 over the run.
- ``train.max_grad_norm`` (1.0), ``train.save_total_limit`` (2: the last two checkpoints,
  so a kill during a checkpoint write still leaves a complete one).
- ``train.shuffle`` (true): order of the prompt stream.
- ``train.stop`` ([]): stop strings of the training generations (e.g. "\\nUser:", as the
  evaluation tasks); a completion is cut before the first one and ended with EOS
  (``sagc.train.stopping``).
- ``train.generation_kwargs`` ({}): extra ``GenerationConfig`` keys for HF generation (TRL's
  ``generation_kwargs``; e.g. ``top_k``, ``min_p``, ``sequence_bias``).
- ``algorithm.*``: see ``sagc.train.presets`` (every key there is an override of the preset).
- ``sizing.<block>``: the config block of the cell's policy (``sizing.sagc``: the
  ``sagc.controller.SAGCConfig`` keys; ``seed`` is ``train.seed``); the registry
  ``sagc.controller.registry`` maps the sizing name to its policy and block.

This module imports only the standard library and ``sagc.controller`` so that validation is
instant and runs before the heavy imports.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping

from sagc.controller import Sizing, parse_sizing
from sagc.vllm_support import require_vllm, vllm_installed  # noqa: F401 (the trainer's and tests' import path)

ALGORITHMS = ("grpo", "dapo")
WANDB_MODES = ("offline", "online", "disabled")
VLLM_MODES = ("colocate", "server")
#: How the optimizer keeps the weights under bf16 (``sagc.train.precision``): fp32 master
#: weights with bf16 autocast, or bf16 weights with a compensated (Kahan) AdamW.
MASTER_WEIGHTS = ("fp32", "bf16_kahan")
#: TRL's ``vllm_importance_sampling_mode`` values.
IS_MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")
LR_SCHEDULERS = ("constant", "linear", "cosine", "constant_with_warmup")


# -- small validators: every message names the dotted key --------------------------------


def _fail(key: str, what: str, value: Any) -> ValueError:
    return ValueError(f"{key} must be {what}, got {value!r}")


def _pos_int(key: str, v: Any, allow_none: bool = False) -> int | None:
    if v is None and allow_none:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise _fail(key, "a positive integer", v)  # the pipeline's contract wording
    return v


def _nonneg_int(key: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise _fail(key, "a non-negative integer", v)
    return v


def _int(key: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise _fail(key, "an integer", v)
    return v


def _number(key: str, v: Any, lo: float | None = None, hi: float | None = None,
            lo_open: bool = False, allow_none: bool = False) -> float | None:
    if v is None and allow_none:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise _fail(key, "a finite number" + (" or null" if allow_none else ""), v)
    if lo is not None and (v <= lo if lo_open else v < lo):
        raise _fail(key, f"{'>' if lo_open else '>='} {lo}", v)
    if hi is not None and v > hi:
        raise _fail(key, f"<= {hi}", v)
    return float(v)


def _bool(key: str, v: Any, allow_none: bool = False) -> bool | None:
    if v is None and allow_none:
        return None
    if not isinstance(v, bool):
        raise _fail(key, "true or false" + (" or null" if allow_none else ""), v)
    return v


def _str(key: str, v: Any, allow_none: bool = False, choices: tuple[str, ...] | None = None) -> str | None:
    if v is None and allow_none:
        return None
    if not isinstance(v, str) or not v:
        raise _fail(key, "a non-empty string" + (" or null" if allow_none else ""), v)
    if choices is not None and v not in choices:
        raise _fail(key, f"one of {list(choices)}", v)
    return v


def _section(d: Any, key: str, cls: type) -> dict:
    """Check that ``d`` is a mapping holding only ``cls``'s fields."""
    if d is None:
        d = {}
    if not isinstance(d, Mapping):
        raise _fail(key, "a mapping", d)
    allowed = {f.name for f in fields(cls)}
    unknown = sorted(set(d) - allowed)
    if unknown:
        raise ValueError(f"unknown key(s) in {key}: {', '.join(f'{key}.{k}' for k in unknown)} "
                         f"(allowed: {sorted(allowed)})")
    return dict(d)


# -- sections -----------------------------------------------------------------------------


@dataclass(frozen=True)
class CellSection:
    """Identity of the grid cell (logged as the W&B run config; the aggregation groups by it)."""

    id: str
    config_name: str = "default"
    model: str = "model"
    algorithm: str = "grpo"
    sizing: str = "sagc"
    seed: int = 0

    @classmethod
    def from_dict(cls, d: Any) -> "CellSection":
        d = _section(d, "cell", cls)
        if "id" not in d:
            raise ValueError("cell.id is required (e.g. 'tiny-qwen2/grpo/sagc/seed0')")
        out = cls(**d)
        for k in ("id", "config_name", "model", "algorithm", "sizing"):
            _str(f"cell.{k}", getattr(out, k))
        _int("cell.seed", out.seed)
        return out


@dataclass(frozen=True)
class ModelSection:
    path: str
    tokenizer: str | None = None
    trust_remote_code: bool = False
    revision: str | None = None  # a pinned hub revision (hub ids only)

    @classmethod
    def from_dict(cls, d: Any) -> "ModelSection":
        d = _section(d, "model", cls)
        if "path" not in d:
            raise ValueError("model.path is required (a local model folder or a hub id)")
        out = cls(**d)
        _str("model.path", out.path)
        _str("model.tokenizer", out.tokenizer, allow_none=True)
        _bool("model.trust_remote_code", out.trust_remote_code)
        _str("model.revision", out.revision, allow_none=True)
        return out


@dataclass(frozen=True)
class DataSection:
    """``train``: a JSONL file with a ``prompt`` column (plain string) and the columns the
    reward functions read (``answer`` for ``correctness``)."""

    train: str
    prompt_column: str = "prompt"

    @classmethod
    def from_dict(cls, d: Any) -> "DataSection":
        d = _section(d, "data", cls)
        if "train" not in d:
            raise ValueError("data.train is required (path of the training JSONL)")
        out = cls(**d)
        _str("data.train", out.train)
        _str("data.prompt_column", out.prompt_column)
        return out


@dataclass(frozen=True)
class TrainSection:
    """``prompts_per_step`` (P, fixed: the paper's default) or ``rollout_budget`` (B rollouts
    per step, P = B / G): exactly one is set; a budget alone turns the default P off."""

    steps: int = 30
    prompts_per_step: int | None = 4
    rollout_budget: int | None = None
    max_prompt_length: int = 96
    max_completion_length: int = 160
    temperature: float = 1.0
    top_p: float = 1.0
    learning_rate: float = 5e-5
    save_steps: int = 10
    seed: int = 1234567
    torch_threads: int | None = 1
    gradient_accumulation_steps: int = 1
    lr_scheduler_type: str = "constant"
    max_grad_norm: float = 1.0
    save_total_limit: int = 2
    shuffle: bool = True
    generation_kwargs: dict = field(default_factory=dict)
    stop: tuple = ()

    @classmethod
    def from_dict(cls, d: Any) -> "TrainSection":
        d = _section(d, "train", cls)
        if d.get("rollout_budget") is not None and "prompts_per_step" not in d:
            d["prompts_per_step"] = None  # the default P only applies without a budget
        out = cls(**d)
        _pos_int("train.steps", out.steps)
        _pos_int("train.prompts_per_step", out.prompts_per_step, allow_none=True)
        _pos_int("train.rollout_budget", out.rollout_budget, allow_none=True)
        if (out.prompts_per_step is None) == (out.rollout_budget is None):
            raise ValueError(
                "exactly one of train.prompts_per_step (fixed prompts per step, the paper's "
                "default) and train.rollout_budget (fixed rollouts per step) must be set, got "
                f"prompts_per_step={out.prompts_per_step!r}, rollout_budget={out.rollout_budget!r}"
            )
        _pos_int("train.max_prompt_length", out.max_prompt_length)
        _pos_int("train.max_completion_length", out.max_completion_length)
        _number("train.temperature", out.temperature, lo=0.0, lo_open=True)
        _number("train.top_p", out.top_p, lo=0.0, hi=1.0, lo_open=True)
        _number("train.learning_rate", out.learning_rate, lo=0.0, lo_open=True)
        _pos_int("train.save_steps", out.save_steps)
        _nonneg_int("train.seed", out.seed)
        _pos_int("train.torch_threads", out.torch_threads, allow_none=True)
        _pos_int("train.gradient_accumulation_steps", out.gradient_accumulation_steps)
        _str("train.lr_scheduler_type", out.lr_scheduler_type, choices=LR_SCHEDULERS)
        _number("train.max_grad_norm", out.max_grad_norm, lo=0.0)
        _pos_int("train.save_total_limit", out.save_total_limit)
        _bool("train.shuffle", out.shuffle)
        if not isinstance(out.generation_kwargs, Mapping) or not all(isinstance(k, str) for k in out.generation_kwargs):
            raise _fail("train.generation_kwargs", "a mapping of transformers GenerationConfig keys", out.generation_kwargs)
        if not isinstance(out.stop, (list, tuple)) or not all(isinstance(x, str) and x for x in out.stop):
            raise _fail("train.stop", "a list of non-empty stop strings", out.stop)
        if "stop" in out.generation_kwargs or "stop_strings" in out.generation_kwargs:
            raise ValueError("train.generation_kwargs must not set stop/stop_strings: use train.stop")
        return replace(out, stop=tuple(out.stop))


@dataclass(frozen=True)
class AlgorithmSection:
    """Preset name plus overrides; ``None`` means "the preset's value" (see presets.py)."""

    name: str = "grpo"
    loss_type: str | None = None
    beta: float | None = None
    epsilon: float | None = None
    epsilon_high: float | None = None
    scale_rewards: str | None = None
    num_iterations: int | None = None
    minibatches: int | None = None
    mask_truncated_completions: bool | None = None
    dynamic_sampling: bool | None = None
    ds_max_rounds: int | None = None
    overlong_buffer: int | None = None
    overlong_weight: float | None = None

    @classmethod
    def from_dict(cls, d: Any) -> "AlgorithmSection":
        out = cls(**_section(d, "algorithm", cls))
        _str("algorithm.name", out.name, choices=ALGORITHMS)
        _str("algorithm.loss_type", out.loss_type, allow_none=True,
             choices=("grpo", "dapo", "bnpo", "dr_grpo"))
        _number("algorithm.beta", out.beta, lo=0.0, allow_none=True)
        _number("algorithm.epsilon", out.epsilon, lo=0.0, hi=1.0, lo_open=True, allow_none=True)
        _number("algorithm.epsilon_high", out.epsilon_high, lo=0.0, lo_open=True, allow_none=True)
        _str("algorithm.scale_rewards", out.scale_rewards, allow_none=True, choices=("group", "batch", "none"))
        _pos_int("algorithm.num_iterations", out.num_iterations, allow_none=True)
        _pos_int("algorithm.minibatches", out.minibatches, allow_none=True)
        _bool("algorithm.mask_truncated_completions", out.mask_truncated_completions, allow_none=True)
        _bool("algorithm.dynamic_sampling", out.dynamic_sampling, allow_none=True)
        if out.ds_max_rounds is not None:
            _nonneg_int("algorithm.ds_max_rounds", out.ds_max_rounds)
        if out.overlong_buffer is not None:
            _nonneg_int("algorithm.overlong_buffer", out.overlong_buffer)
        _number("algorithm.overlong_weight", out.overlong_weight, lo=0.0, allow_none=True)
        return out


@dataclass(frozen=True)
class SizingSection:
    """The cell's group-size policy: its sizing name and the config block that policy
    reads, under the block's own key (``sizing.sagc`` for SAGC and fixed G; the registry
    ``sagc.controller.registry`` says which). ``params`` is that block."""

    name: str = "sagc"
    params: dict = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Any) -> "SizingSection":
        if d is None:
            d = {}
        if not isinstance(d, Mapping):
            raise _fail("sizing", "a mapping", d)
        name = _str("sizing.name", d.get("name", cls.name))
        sizing = parse_sizing(name, key="sizing.name")
        block = sizing.block
        unknown = sorted(set(d) - {"name", block})
        if unknown:
            raise ValueError(f"unknown key(s) in sizing: {', '.join(f'sizing.{k}' for k in unknown)} "
                             f"(allowed: {sorted({'name', block})})")
        params = d.get(block, {})
        if not isinstance(params, Mapping):
            raise _fail(f"sizing.{block}", f"a mapping of {sizing.config_class.__name__} keys", params)
        if "seed" in params:
            raise ValueError(f"sizing.{block}.seed is not allowed: the controller is seeded with train.seed")
        try:
            sizing.config(params)
        except (ValueError, TypeError) as e:
            raise ValueError(f"sizing.{block} is invalid: {e}") from None
        return cls(name=name, params=dict(params))

    @property
    def parsed(self) -> Sizing:
        return parse_sizing(self.name)

    def policy_config(self, seed: int):
        """The policy's typed config (``SAGCConfig`` for SAGC and fixed G), seeded."""
        return self.parsed.config(self.params, seed=seed)

    def build(self, seed: int):
        """The cell's group sizer, seeded with ``seed`` (the trainer's seed)."""
        return self.parsed.build(self.params, seed=seed)

    def group_sizes(self) -> tuple[int, ...]:
        """Every G this cell can use (sorted): the candidates for SAGC, the one G otherwise."""
        return self.parsed.group_sizes(self.params)

    def to_dict(self) -> dict:
        """The cell-file form: ``{"name": ..., "<block>": {...}}``."""
        return {"name": self.name, self.parsed.block: dict(self.params)}


@dataclass(frozen=True)
class WandbSection:
    mode: str = "offline"
    project: str = "sagc-repro"
    entity: str | None = None
    group: str | None = None
    name: str | None = None
    dir: str | None = None

    @classmethod
    def from_dict(cls, d: Any) -> "WandbSection":
        out = cls(**_section(d, "wandb", cls))
        _str("wandb.mode", out.mode, choices=WANDB_MODES)
        _str("wandb.project", out.project)
        for k in ("entity", "group", "name", "dir"):
            _str(f"wandb.{k}", getattr(out, k), allow_none=True)
        return out


@dataclass(frozen=True)
class DeviceSection:
    use_cpu: bool = True
    bf16: bool = False
    gradient_checkpointing: bool = False
    use_vllm: bool = False
    vllm_mode: str = "colocate"
    vllm_gpu_memory_utilization: float = 0.3
    vllm_tensor_parallel_size: int = 1
    master_weights: str = "fp32"
    gpu_memory_gib: float | None = None
    vllm_importance_sampling_mode: str = "token_truncate"
    vllm_importance_sampling_clip_max: float = 3.0

    @classmethod
    def from_dict(cls, d: Any) -> "DeviceSection":
        """``bf16`` on CPU is allowed (torch autocasts to bf16 on CPU too; slow, for checks)."""
        out = cls(**_section(d, "device", cls))
        for k in ("use_cpu", "bf16", "gradient_checkpointing", "use_vllm"):
            _bool(f"device.{k}", getattr(out, k))
        _str("device.vllm_mode", out.vllm_mode, choices=VLLM_MODES)
        _number("device.vllm_gpu_memory_utilization", out.vllm_gpu_memory_utilization, lo=0.0, hi=1.0, lo_open=True)
        _pos_int("device.vllm_tensor_parallel_size", out.vllm_tensor_parallel_size)
        _str("device.master_weights", out.master_weights, choices=MASTER_WEIGHTS)
        _number("device.gpu_memory_gib", out.gpu_memory_gib, lo=0.0, lo_open=True, allow_none=True)
        _str("device.vllm_importance_sampling_mode", out.vllm_importance_sampling_mode, choices=IS_MODES)
        _number("device.vllm_importance_sampling_clip_max", out.vllm_importance_sampling_clip_max,
                lo=0.0, lo_open=True)
        if out.use_vllm and out.use_cpu:
            raise ValueError("device.use_vllm=true needs a GPU: set device.use_cpu=false")
        if out.master_weights != "fp32" and not out.bf16:
            raise ValueError(f"device.master_weights={out.master_weights!r} needs device.bf16=true "
                             "(without bf16 the weights are fp32)")
        return out

    @property
    def weights_dtype(self) -> str:
        """The dtype the policy (and TRL's reference model) is loaded in: fp32 unless bf16
        weights with the compensated optimizer were chosen (``sagc.train.precision``)."""
        return "bfloat16" if self.bf16 and self.master_weights == "bf16_kahan" else "float32"


@dataclass(frozen=True)
class TrainConfig:
    """One resolved grid cell (see the module docstring and docs in presets.py)."""

    cell: CellSection
    model: ModelSection
    data: DataSection
    output_dir: str
    rewards: dict = field(default_factory=lambda: {"correctness": 1.0, "format": 0.1})
    train: TrainSection = field(default_factory=TrainSection)
    algorithm: AlgorithmSection = field(default_factory=AlgorithmSection)
    sizing: SizingSection = field(default_factory=SizingSection)
    wandb: WandbSection = field(default_factory=WandbSection)
    device: DeviceSection = field(default_factory=DeviceSection)

    @classmethod
    def from_dict(cls, d: Any, check_vllm: bool = True) -> "TrainConfig":
        if not isinstance(d, Mapping):
            raise ValueError(f"a cell config must be a mapping, got {type(d).__name__}")
        allowed = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - allowed)
        if unknown:
            raise ValueError(f"unknown top-level key(s): {', '.join(unknown)} (allowed: {sorted(allowed)})")
        for req in ("cell", "model", "data", "output_dir"):
            if req not in d:
                raise ValueError(f"{req} is required")
        out_dir = _str("output_dir", d["output_dir"])
        rewards = _rewards(d.get("rewards", {"correctness": 1.0, "format": 0.1}))
        cfg = cls(
            cell=CellSection.from_dict(d["cell"]),
            model=ModelSection.from_dict(d["model"]),
            data=DataSection.from_dict(d["data"]),
            output_dir=out_dir,
            rewards=rewards,
            train=TrainSection.from_dict(d.get("train")),
            algorithm=AlgorithmSection.from_dict(d.get("algorithm")),
            sizing=SizingSection.from_dict(d.get("sizing")),
            wandb=WandbSection.from_dict(d.get("wandb")),
            device=DeviceSection.from_dict(d.get("device")),
        )
        cfg._check_cross_keys()
        if check_vllm and cfg.device.use_vllm:
            require_vllm("device.use_vllm=true", instead="set device.use_vllm=false")
        return cfg

    def _check_cross_keys(self) -> None:
        if self.cell.algorithm != self.algorithm.name:
            raise ValueError(
                f"cell.algorithm ({self.cell.algorithm!r}) and algorithm.name ({self.algorithm.name!r}) disagree"
            )
        if self.cell.sizing != self.sizing.name:
            raise ValueError(f"cell.sizing ({self.cell.sizing!r}) and sizing.name ({self.sizing.name!r}) disagree")
        # Deferred import: presets imports nothing heavy either.
        from sagc.train.presets import resolve_algorithm, step_shapes

        algo = resolve_algorithm(self.algorithm, self.train.max_completion_length)
        step_shapes(self.train, algo, self.sizing.group_sizes())  # raises on any split that would not divide

    def to_dict(self) -> dict:
        return {**asdict(self), "sizing": self.sizing.to_dict()}


def _rewards(d: Any) -> dict:
    from sagc.train.rewards import REWARD_NAMES

    if not isinstance(d, Mapping) or not d:
        raise _fail("rewards", "a non-empty mapping of reward name -> weight", d)
    out = {}
    for name, w in d.items():
        if name not in REWARD_NAMES:
            raise ValueError(f"rewards.{name} is not a known reward (known: {list(REWARD_NAMES)})")
        out[name] = _number(f"rewards.{name}", w)
    return out


def _yaml_load(text: str) -> Any:
    """``yaml.safe_load`` that also reads ``5e-05`` as a float: PyYAML follows YAML 1.1,
    where a float needs a dot, so ``json.dumps(5e-5)`` would otherwise come back a string."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                    |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
                    |\.[0-9_]+(?:[eE][-+][0-9]+)?
                    |[-+]?\.(?:inf|Inf|INF)
                    |\.(?:nan|NaN|NAN))$""", re.X),
        list("-+0123456789."),
    )
    return yaml.load(text, Loader=Loader)  # noqa: S506 - a SafeLoader subclass


def load_config_file(path: str | Path) -> dict:
    """Read a cell config from JSON or YAML (chosen by the file suffix)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"config file {path} does not exist")
    text = path.read_text()
    try:
        if path.suffix.lower() in (".yaml", ".yml"):
            data = _yaml_load(text)
        else:
            data = json.loads(text)
    except Exception as e:  # noqa: BLE001 - re-raised with the file name
        raise ValueError(f"config file {path} is not valid {path.suffix.lstrip('.') or 'JSON'}: {e}") from None
    if not isinstance(data, Mapping):
        raise ValueError(f"config file {path} must hold a mapping at the top level")
    return dict(data)


def load_config(path: str | Path, check_vllm: bool = True) -> TrainConfig:
    try:
        return TrainConfig.from_dict(load_config_file(path), check_vllm=check_vllm)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None
