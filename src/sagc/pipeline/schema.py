"""The pipeline config's typed model, and the JSON schema generated from it.

docs/architecture.md, "The pipeline config's schema".
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, create_model, model_validator
from pydantic.json_schema import SkipJsonSchema

from sagc.aggregate.grid import TIME_UNITS
from sagc.aggregate.grid import ResultGrid as AggregateDefaults
from sagc.aggregate.registration import Registration
from sagc.config_models import Number, Text
from sagc.controller import POLICIES, SAGCConfig, sizing_pattern
from sagc.evaluate.config import EvalSettings
from sagc.pipeline.grid import NAME_PATTERN, check_name
from sagc.prompt_aware.config import PromptSAGCConfig
from sagc.settings import block_model
from sagc.train.config import (
    ALGORITHMS,
    STRATEGIES,
    WANDB_MODES,
    DeviceSection,
    LaunchSection,
    PositiveInt,
    TrainSection,
    WandbSection,
)

SCHEMA_FILE = Path("workflow/schemas/config.schema.yaml")
HEADER = "# Generated from sagc.pipeline.schema (python -m sagc.pipeline.schema): do not edit by hand.\n"


class _Block(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


def _unique(values: list) -> list:
    if len(set(map(repr, values))) != len(values):
        raise ValueError(f"has duplicates: {values}")
    return values


def _sizing_item(schema: dict) -> None:
    schema["pattern"] = sizing_pattern()  # the registry's when the schema is written, not at import


#: Seeds: non-negative integers, each once.
Seeds = Annotated[list[Annotated[int, Field(ge=0)]], AfterValidator(_unique)]


#: Marks a ``None`` default the pipeline fills in (``key: null``); other ``None`` defaults
#: leave the key absent, so its consumer's default applies.
FILL_NULL = {"x-fill-null": True}


class ModelSpec(_Block):
    arch: Literal["qwen2", "llama"] = Field(None, description="tiny world: architecture class of the tiny model")
    tiny_model: dict = Field(
        {},
        description="tiny world: flags of `python -m sagc.tiny base-model` for this "
        "model alone, over tiny.model (e.g. a longer warm start for one architecture)",
    )
    draw: int = Field(
        0,
        ge=0,
        description="tiny world: which draw of this model's initialisation and warm start under the world "
        "seed (0: the world seed's own); another draw is another base model of the same settings",
    )
    hub_id: str = Field(None, description="hub world: the model id, e.g. Qwen/Qwen2.5-3B")
    revision: str = Field("main", description="hub world: a pinned revision")
    trust_remote_code: bool = False
    strategy: Literal[STRATEGIES] = Field(
        None,
        description=(  # type: ignore[valid-type]
            "How this model's cells share the model across their processes (launch): ddp (the default: "
            "each process holds all of it), fsdp2 (sharded, torch FSDP2), zero2 / zero3 (DeepSpeed ZeRO, "
            "pip install deepspeed); one accelerate config each under configs/accelerate/."
        ),
    )


#: The policies' blocks, every key optional; ``seed`` comes per cell from the grid.
SAGCBlock = block_model(
    SAGCConfig,
    "SAGCBlock",
    base=_Block,
    exclude=("seed",),
    doc="SAGC hyper-parameters (sagc.SAGCConfig, which checks them as a whole); fixed-G cells use tau and scope too.",
)
SAGCPromptBlock = block_model(
    PromptSAGCConfig,
    "SAGCPromptBlock",
    base=_Block,
    exclude=("seed",),
    doc=(
        "Prompt-aware sizings (sagc.prompt_aware.config.PromptSAGCConfig, which checks them as a whole; "
        "docs/prompt-aware.md): the sagc keys plus the predictor's and the schedule's."
    ),
)


BLOCK_MODELS: dict[str, type[BaseModel]] = {"sagc": SAGCBlock, "sagc_prompt": SAGCPromptBlock}


def policy_block_model(policy: Any) -> type[BaseModel] | None:
    """The typed model of ``policy``'s config block, or ``None`` (its ``from_dict`` checks the block)."""
    if policy.block in BLOCK_MODELS:
        return BLOCK_MODELS[policy.block]
    make = getattr(policy.config, "block_model", None)
    return make(_Block) if make is not None else None


class TinyBlock(_Block):
    world_seed: int = Field(
        0,
        ge=0,
        description=(
            "Which draw of the tiny world: seeds each base model's initialisation and warm start. Another world seed "
            "is another world built by the same code (docs/replication.md checks the world's structure over several)."
        ),
    )
    cpu_isa: Literal["avx2", "default", None] = Field(
        "avx2",
        description=(
            "The vector instruction set every job of the tiny world computes with (torch's ATEN_CPU_CAPABILITY "
            "and MKL's MKL_CBWR, unless already exported): the same on every x86-64 CPU with AVX2, so the same "
            "world and the same runs, bit for bit (docs/replication.md). default = the generic path (also "
            "without AVX2; slower); null = each machine's own fastest path (its own world)."
        ),
    )
    data: dict = Field({}, description="flags of `python -m sagc.tiny data`")
    model: dict = Field({}, description="flags of `python -m sagc.tiny base-model`")
    measure: dict = Field({}, description="flags of `python -m sagc.tiny measure`")


class HubBlock(_Block):
    train_dataset: str = Field(None, description="HF dataset id of the RL training prompts")
    train_split: str = "train"
    train_source: str | None = Field(None, description="a local JSONL instead of the hub", json_schema_extra=FILL_NULL)
    benchmark_source: str | None = Field(
        None, description="a local folder with staged benchmarks", json_schema_extra=FILL_NULL
    )


class TrainBlock(TrainSection):
    """The trainer's ``train`` section (``sagc.train.config.TrainSection``) as a pipeline config
    states it: ``steps`` is required, ``seed`` comes per cell from the grid (refused here)."""

    steps: PositiveInt
    seed: SkipJsonSchema[int] = TrainSection.default("seed")

    @model_validator(mode="before")
    @classmethod
    def _no_seed(cls, d: Any) -> Any:
        if isinstance(d, dict) and "seed" in d:
            raise ValueError("train.seed is not a pipeline key: each cell's seed comes from the grid's seeds")
        return d


class DeviceBlock(DeviceSection):
    """The trainer's ``device`` section (``sagc.train.config.DeviceSection``) as a pipeline
    config states it: ``vllm_gpu_memory_utilization`` may also be "auto"."""

    vllm_gpu_memory_utilization: Number(gt=0.0, le=1.0) | Literal["auto"] = Field(
        DeviceSection.default("vllm_gpu_memory_utilization"),
        description=DeviceSection.model_fields["vllm_gpu_memory_utilization"].description
        + (
            ' "auto": the smallest share that holds the engine\'s weights, a workspace and the KV cache of '
            "its rows of the grid's largest step at the length cap (sagc.pipeline.memory.vllm_share), the "
            "same for every cell of a model; needs device.gpu_memory_gib. With device.vllm_sleep_mode the "
            "loss pass does not pay for it. Where the generation phase leaves less room, the largest share "
            "it leaves (rows may then queue: warned)."
        ),
    )
    # The memory plan's own keys (sagc.pipeline.memory), not the trainer's: no cell carries them.
    memory_margin_gib: Number(ge=0.0) = Field(
        4.0,
        description=(
            "GiB each phase of the memory plan keeps free for what it does not model: the caching "
            "allocator's fragmentation at the peak (a few percent of what it holds) and memory outside "
            "the allocator (NCCL buffers beyond the plan's runtime). Unused with memory_measured."
        ),
    )
    memory_measured: str | None = Field(
        None,
        description=(
            "A JSON of benchmarks/gpu_memory_check.py run on the card: its measured activation factors, "
            "runtime and fragmentation replace the plan's stated margins (memory_margin_gib)."
        ),
    )


#: The train keys whose default the pipeline fills in (the rest stay absent: the trainer's).
TRAIN_FILLED = ("rollout_budget", "gradient_accumulation_steps", "stop")
#: Blocks whose filled-in defaults are a fixed list of keys (a cell gets only the launch keys stated).
FILLED = {"train": TRAIN_FILLED, "device": tuple(DeviceSection.model_fields), "launch": ()}


class LaunchBlock(_Block):
    """The trainer's ``launch`` section (``sagc.train.config.LaunchSection``) but its strategy,
    which is per model (``models.<name>.strategy``). The train rule's SLURM resources follow
    from it (``sagc.pipeline.launch.rule_resources``): one GPU per process."""

    nodes: PositiveInt = Field(
        LaunchSection.default("nodes"),
        description=("Machines per training cell (several: under SLURM only, one task per node)."),
    )
    processes_per_node: PositiveInt = Field(
        LaunchSection.default("processes_per_node"),
        description=(
            "Training processes per machine: one per GPU (device.use_cpu=false), or CPU processes over gloo. "
            "Every step's P x G rollouts must split evenly across all processes."
        ),
    )
    # not the trainer's keys: what a stop on a signal needs (sagc.pipeline.launch.stop_warning_s)
    stop_step_s: PositiveInt = Field(
        300,
        description=(
            "Seconds the longest training step may take (a step at G_max, every row at the cap): a stop "
            "signal lets the running step finish before the checkpoint."
        ),
    )
    stop_save_s: PositiveInt = Field(
        60,
        description=(
            "Seconds a checkpoint save takes (weights and optimizer state to the results' filesystem). SLURM's early "
            "warning (--signal=USR1@N, the train rule's slurm_extra) is stop_step_s + stop_save_s."
        ),
    )

    processes = LaunchSection.processes  # nodes x processes_per_node, the trainer's one formula


class EvaluateBlock(EvalSettings):
    """How every model is evaluated: the evaluation cell's settings
    (``sagc.evaluate.config.EvalSettings``) with only the pipeline's own changes: ``tasks``
    defaults to the world's, ``threads`` to the evaluation job's one thread, and
    ``base_models`` chooses the jobs."""

    tasks: list[Text] = Field(
        None,
        min_length=1,
        description=("packaged task names (python -m sagc.evaluate tasks); default: every task of the config's world"),
    )
    threads: PositiveInt = Field(1, description="torch CPU threads of an evaluation job (its rule's threads)")
    base_models: bool = Field(True, description="evaluate the base models as the reference row")


class WandbBlock(_Block):
    mode: Literal[WANDB_MODES] = WandbSection.default("mode")  # type: ignore[valid-type]
    project: str = WandbSection.default("project")
    entity: str | None = Field(WandbSection.default("entity"), json_schema_extra=FILL_NULL)
    source: Literal["offline", "online"] = Field(
        "offline", description="where the aggregation reads the runs: the cells' run files or the W&B API"
    )


class AggregateBlock(_Block):
    last_k: int = Field(AggregateDefaults.default("last_k"), ge=1)
    time_unit: Literal[tuple(TIME_UNITS)] = AggregateDefaults.default("time_unit")  # type: ignore[valid-type]
    allow_partial: bool = AggregateDefaults.default("allow_partial")


class SimulateBlock(_Block):
    enabled: bool = Field(True, description="run the simulator rule as part of `all`")
    config: str | None = Field(
        None,
        description="a simulator config (sagc.simulate); null = the packaged paper_calibrated.yaml",
        json_schema_extra=FILL_NULL,
    )


class RuleResources(_Block):
    gpu: int = Field(None, ge=0)
    gpu_model: str = None
    mem_mb: int = Field(None, ge=1)
    runtime: int = Field(None, ge=1, description="minutes")
    cpus_per_task: int = Field(None, ge=1)
    threads: int = Field(None, ge=1)
    slurm_partition: str = None
    slurm_account: str = None
    constraint: str = None
    qos: str = None


class AlgorithmOverrides(_Block):
    grpo: dict = None
    dapo: dict = None


class PipelineConfig(_Block):
    """Config of the SAGC reproduction pipeline (configs/*.yaml), validated before any job
    starts; sagc.pipeline.config then checks what needs the registry or the grid (sizing names,
    each policy's hyper-parameters as a whole, the trainer's cell config), naming the key."""

    name: Annotated[str, AfterValidator(check_name)] = Field(
        ...,
        json_schema_extra={"pattern": f"^{NAME_PATTERN.pattern}$"},  # anchored: JSON Schema searches
        description="Output namespace, results/<name>/ and paper_figures/<name>/.",
    )
    world: Literal["tiny", "hub"] = Field(
        ...,
        description=(
            "tiny = the embedded offline world the pipeline builds itself (tokenizer, data, tiny models "
            "warm-started on a synthetic task); hub = real models and datasets from the Hugging Face cache "
            "(HF_HOME), staged once with network."
        ),
    )
    models: dict[str, ModelSpec] = Field(
        ..., min_length=1, description="Model name -> how to get it. Names appear in paths and tables."
    )
    algorithms: Annotated[list[Literal[ALGORITHMS]], AfterValidator(_unique)] = Field(  # type: ignore[valid-type]
        ..., min_length=1, json_schema_extra={"uniqueItems": True}
    )
    sizings: Annotated[list[Annotated[str, Field(json_schema_extra=_sizing_item)]], AfterValidator(_unique)] = Field(
        ...,
        min_length=1,
        json_schema_extra={"uniqueItems": True},
        description=(
            "g<N> = fixed G=N; <policy> = a registered group-size policy (sagc = the controller); "
            "<policy>-<variant> = the policy with <block>_variants.<variant> applied."
        ),
    )
    seeds: Seeds = Field(
        ...,
        min_length=1,
        json_schema_extra={"uniqueItems": True},
        description=(
            "The report seeds: the grid trains every cell once per seed, and the tables and headline report these. No "
            "setting may have been tuned on them."
        ),
    )
    dev_seeds: Seeds = Field(
        [],
        json_schema_extra={"uniqueItems": True},
        description=(
            "Development seeds: those the config's settings were tuned on. Declared so that they stay out of `seeds` "
            "(checked); the grid never trains them unless a config lists them in `seeds`."
        ),
    )
    tiny: TinyBlock = Field({}, description="Parameters of the tiny world's build steps (world tiny only).")
    hub: HubBlock = Field({}, description="Datasets of the hub world.")
    train: TrainBlock
    rewards: dict[str, float] = Field(
        {"correctness": 1.0, "format": 0.1}, description="Reward function name -> weight."
    )
    algorithm_overrides: AlgorithmOverrides = Field(
        {}, description="Per-algorithm keys passed to the trainer's preset (see sagc.train.presets)."
    )
    evaluate: EvaluateBlock = {}
    wandb: WandbBlock = {}
    aggregate: AggregateBlock = {}
    claims: Registration = Field(
        {},
        description=(
            "The headline's pre-registered claims (sagc.aggregate.registration): the controller of the primary "
            "family, the registered cost, the margins and why, the level, and the planned effects and spreads "
            "the dry run turns into planned power."
        ),
    )
    simulate: SimulateBlock = {}
    device: DeviceBlock = {}
    launch: LaunchBlock = Field(
        {},
        description=(
            "How many processes train each cell: nodes x processes_per_node, one GPU each; started with "
            "accelerate launch when more than one (sagc.pipeline.launch)."
        ),
    )
    resources: dict[str, RuleResources] = Field(
        {},
        description=(
            "Per-rule cluster resources: rule name -> {gpu, mem_mb, runtime, cpus_per_task, slurm_partition, ...}"
        ),
    )

    def stated(self, key: str) -> Any:
        """A top-level key as stated (filled-in defaults included), in JSON form: what a cell carries."""
        return self.model_dump(mode="json", include={key}, exclude_unset=True)[key]

    def algorithm_overrides_of(self, algorithm: str) -> dict[str, Any]:
        """The keys ``algorithm_overrides`` passes to ``algorithm``'s preset (none: ``{}``)."""
        return getattr(self.algorithm_overrides, algorithm, None) or {}

    def policy_blocks(self) -> dict[str, Any]:
        """Each policy's block and variants block as stated, for the controller registry."""
        names = [p.block for p in POLICIES.values()] + [p.variants_block for p in POLICIES.values()]
        return {k: self.stated(k) for k in names if k in self.model_fields_set}

    @model_validator(mode="after")
    def _fresh_report_seeds(self) -> PipelineConfig:
        tuned_on = sorted(set(self.seeds) & set(self.dev_seeds))
        if tuned_on:
            raise ValueError(
                f"config key 'seeds': {tuned_on} are also dev_seeds (settings were tuned on them); "
                "report seeds must be fresh"
            )
        return self

    @model_validator(mode="after")
    def _hub_states_its_device(self) -> PipelineConfig:
        # the device defaults are the tiny world's CPU: 3B models on CPU must be chosen on purpose
        stated = self.device.model_fields_set if isinstance(self.device, BaseModel) else set()  # absent: {}
        if self.world == "hub" and "use_cpu" not in stated:
            raise ValueError(
                "config key 'device.use_cpu': world 'hub' needs an explicit device block (use_cpu: false "
                "with bf16/vLLM for GPUs, or use_cpu: true to run the hub models on CPU on purpose)"
            )
        return self


def pipeline_model() -> type[BaseModel]:
    """``PipelineConfig`` with a block and a variants block per registered policy."""
    return _pipeline_model(tuple(POLICIES))


@functools.cache
def _pipeline_model(names: tuple[str, ...]) -> type[BaseModel]:
    fields: dict[str, Any] = {}
    for name in names:
        policy = POLICIES[name]
        fields[policy.block] = (
            policy_block_model(policy) or dict,
            Field({}, description=f"Hyper-parameters of the {name!r} policy ({policy.config.__name__})."),
        )
        fields[policy.variants_block] = (
            dict[str, dict],
            Field({}, description=f"Named overrides of the {policy.block} block, used by sizings {name}-<variant>."),
        )
    return create_model("PipelineConfigWithPolicies", __base__=PipelineConfig, **fields)


def key_order(model: type[BaseModel]) -> list[str]:
    """The model's keys in a filled config's order: the policies' blocks right after ``seeds``."""
    keys = list(PipelineConfig.model_fields)
    at = keys.index("seeds") + 1
    return keys[:at] + [k for k in model.model_fields if k not in keys] + keys[at:]


def config_schema() -> dict[str, Any]:
    """The JSON schema (draft 2020-12) of a pipeline config, as pydantic writes it."""
    return pipeline_model().model_json_schema()


def schema_text() -> str:
    return HEADER + yaml.safe_dump(
        config_schema(), sort_keys=False, width=110, allow_unicode=True, default_flow_style=None
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sagc.pipeline.schema", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the schema file is out of date")
    parser.add_argument("--path", type=Path, default=SCHEMA_FILE)
    ns = parser.parse_args(argv)
    text = schema_text()
    if ns.check:
        if not ns.path.is_file() or ns.path.read_text() != text:
            print(f"{ns.path} is out of date: run python -m sagc.pipeline.schema", file=sys.stderr)
            return 1
        return 0
    ns.path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
