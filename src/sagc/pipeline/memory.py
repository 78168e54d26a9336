"""GPU memory of one training cell: an upper bound per phase of a step, and the micro-batch it
allows (``gradient_accumulation_steps: auto``); docs/cluster.md, "GPU memory plan"."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from sagc.controller import grid_group_sizes as _group_sizes
from sagc.pipeline.memo import per_config
from sagc.pipeline.schema import ModelSpec, PipelineConfig
from sagc.train.config import MASTER_WEIGHTS, AlgorithmSection, DeviceSection, LaunchSection, TrainSection
from sagc.train.presets import resolve_algorithm, step_shapes
from sagc.train.resolve import MemoryPlan, ResolvedCell

GIB = 1024**3
#: Multiplier on the activation estimates (loss pass and scoring) for what they leave out.
ACTIVATION_MARGIN = 1.25
#: CUDA context and library workspaces.
RUNTIME_GIB = 2.0
#: What a colocated vLLM engine holds besides weights and KV cache, asleep too (an assumption:
#: check vLLM's "Available KV cache memory" log line on the card).
VLLM_WORKSPACE_GIB = 4.0
#: The largest share ``auto`` gives vLLM: the policy's weights must stay on the card.
MAX_VLLM_SHARE = 0.95
#: The phases of a step the plan checks, in the order a step runs them.
PHASES = ("generating", "scoring", "loss_pass")
#: The ``schema`` field of ``benchmarks/gpu_memory_check.py``'s JSON.
MEASURED_SCHEMA = "sagc.gpu_memory_check/1"


@per_config
def grid_group_sizes(config: PipelineConfig) -> tuple[int, ...]:
    """Every G of the grid, once per parse (every cell's plan reads it)."""
    return _group_sizes(config.sizings, config.policy_blocks())


#: ``config.json`` of the paper's base models (the fields the architecture classes read).
PAPER_MODEL_CONFIGS: dict[str, dict[str, Any]] = {
    "Qwen/Qwen2.5-3B": {
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_act": "silu",
        "hidden_size": 2048, "intermediate_size": 11008, "num_hidden_layers": 36,
        "num_attention_heads": 16, "num_key_value_heads": 2, "max_position_embeddings": 32768,
        "max_window_layers": 36, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
        "sliding_window": 32768, "use_sliding_window": False, "tie_word_embeddings": True,
        "vocab_size": 151936, "bos_token_id": 151643, "eos_token_id": 151643,
        "attention_dropout": 0.0, "initializer_range": 0.02, "torch_dtype": "bfloat16",
    },
    "meta-llama/Llama-3.2-3B": {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
        "hidden_size": 3072, "intermediate_size": 8192, "num_hidden_layers": 28,
        "num_attention_heads": 24, "num_key_value_heads": 8, "head_dim": 128,
        "max_position_embeddings": 131072, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
        "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                         "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": True,
        "vocab_size": 128256, "bos_token_id": 128000, "eos_token_id": 128001,
        "attention_dropout": 0.0, "initializer_range": 0.02, "pretraining_tp": 1,
        "torch_dtype": "bfloat16",
    },
}  # fmt: skip


@dataclass(frozen=True)
class Architecture:
    """The dimensions the estimate needs, from a ``config.json``."""

    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool
    qkv_bias: bool

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> Architecture:
        h, heads = int(cfg["hidden_size"]), int(cfg["num_attention_heads"])
        return cls(
            hidden_size=h,
            num_layers=int(cfg["num_hidden_layers"]),
            num_heads=heads,
            num_kv_heads=int(cfg.get("num_key_value_heads", heads)),
            head_dim=int(cfg.get("head_dim") or h // heads),
            intermediate_size=int(cfg["intermediate_size"]),
            vocab_size=int(cfg["vocab_size"]),
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            qkv_bias=cfg.get("model_type") == "qwen2" or bool(cfg.get("attention_bias", False)),
        )

    @property
    def kv_dim(self) -> int:
        return self.num_kv_heads * self.head_dim

    @property
    def layer_params(self) -> int:
        h, q, kv, i = self.hidden_size, self.num_heads * self.head_dim, self.kv_dim, self.intermediate_size
        return h * q + 2 * h * kv + q * h + 3 * h * i + 2 * h + ((q + 2 * kv) if self.qkv_bias else 0)

    @property
    def params(self) -> int:
        embeddings = self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2)
        return self.num_layers * self.layer_params + embeddings + self.hidden_size

    def activation_elements_per_token(self, gradient_checkpointing: bool) -> int:
        h, kv, i = self.hidden_size, self.kv_dim, self.intermediate_size
        working_set = 2 * (4 * h + 2 * kv + 4 * i)
        if gradient_checkpointing:
            return self.num_layers * h + working_set
        return self.num_layers * (h + working_set)

    def scoring_elements_per_token(self) -> int:
        """A no-grad forward pass: the residual stream and one layer's working set."""
        h, kv, i = self.hidden_size, self.kv_dim, self.intermediate_size
        return h + 4 * h + 2 * kv + 4 * i

    def kv_cache_bytes_per_token(self) -> int:
        """K and V of every layer, in bf16."""
        return 2 * self.num_layers * self.kv_dim * 2


def architecture_of(model_spec: ModelSpec, model_name: str) -> Architecture:
    """The architecture of a config's model entry: a paper model from the table, another hub
    model from its ``config.json`` in the local Hugging Face cache."""
    hub_id = model_spec.hub_id
    if hub_id in PAPER_MODEL_CONFIGS:
        return Architecture.from_config(PAPER_MODEL_CONFIGS[hub_id])
    if hub_id:
        from huggingface_hub import try_to_load_from_cache

        path = try_to_load_from_cache(hub_id, "config.json", revision=model_spec.revision)
        if isinstance(path, str):
            with open(path) as fh:
                return Architecture.from_config(json.load(fh))
    raise ValueError(
        f"models.{model_name}: no architecture known for the memory estimate (hub_id {hub_id!r} is "
        f"neither one of {sorted(PAPER_MODEL_CONFIGS)} nor in the local cache); download it first or "
        "set train.gradient_accumulation_steps to a number and device.gpu_memory_gib to null"
    )


@dataclass(frozen=True)
class Margins:
    """The plan's allowances for what it leaves out: stated or measured (``measured_margins``)."""

    activation: float = ACTIVATION_MARGIN  # multiplier on the loss pass's activations
    scoring: float = ACTIVATION_MARGIN  # multiplier on a scoring chunk's activations
    runtime_gib: float = RUNTIME_GIB
    margin_gib: float = 0.0
    source: str = "stated"


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes per component (docs/cluster.md) against a card of ``card_bytes``."""

    weights: float
    gradients: float
    optimizer: float
    autocast_copies: float
    reference_model: float
    activations: float
    vllm_reserve: float  # the engine outside generation: its workspace asleep, its share awake
    runtime: float
    card_bytes: float
    micro_batch: int
    tokens_per_row: int
    vllm_share: float = 0.0  # what the engine holds while it generates
    ddp_buckets: float = 0.0
    scoring_activations: float = 0.0
    margin: float = 0.0

    @property
    def held(self) -> float:
        """What stays on the card through a step (from the first optimizer step on)."""
        return self.weights + self.reference_model + self.optimizer + self.ddp_buckets + self.runtime + self.margin

    @property
    def total(self) -> float:
        """The loss pass."""
        return self.held + self.gradients + self.autocast_copies + self.activations + self.vllm_reserve

    loss_pass = total

    @property
    def scoring(self) -> float:
        """A no-grad scoring chunk (old or reference log-probs), the engine asleep."""
        return self.held + self.autocast_copies + self.scoring_activations + self.vllm_reserve

    @property
    def generating(self) -> float:
        """The generation phase: the engine awake next to what training keeps between passes."""
        return self.held + self.vllm_share

    @property
    def peak(self) -> float:
        return max(getattr(self, phase) for phase in PHASES)

    @property
    def fits(self) -> bool:
        return self.peak <= self.card_bytes

    def describe(self) -> str:
        parts = (
            "weights",
            "reference_model",
            "optimizer",
            "ddp_buckets",
            "gradients",
            "autocast_copies",
            "activations",
            "scoring_activations",
            "vllm_reserve",
            "runtime",
            "margin",
        )
        body = ", ".join(f"{p} {getattr(self, p) / GIB:.1f}" for p in parts if getattr(self, p))
        phases = ", ".join(f"{p.replace('_', ' ')} {getattr(self, p) / GIB:.1f}" for p in PHASES)
        return (
            f"{self.micro_batch} rows x {self.tokens_per_row} tokens a pass: {phases} GiB of "
            f"{self.card_bytes / GIB:.1f} GiB (generating: vLLM's share {self.vllm_share / GIB:.1f} awake; {body})"
        )


def estimate(
    arch: Architecture,
    *,
    master_weights: str,
    reference_model: bool,
    micro_batch: int,
    tokens_per_row: int,
    vllm_fraction: float,
    card_gib: float,
    gradient_checkpointing: bool = True,
    use_vllm: bool = True,
    vllm_sleep: bool = False,
    strategy: str = "ddp",
    processes: int = 1,
    bucket_view: bool = False,
    margins: Margins = Margins(),
) -> MemoryEstimate:
    """The phases of a colocated step for one of ``processes`` processes; ``micro_batch`` rows a pass."""
    if master_weights not in MASTER_WEIGHTS:
        raise ValueError(f"master_weights must be one of {MASTER_WEIGHTS}, got {master_weights!r}")
    n = arch.params
    fp32 = master_weights == "fp32"
    w = 4 if fp32 else 2
    state = n * 8 + (0 if fp32 else n * 2)
    weights, gradients, buckets = n * w, n * w, 0
    if processes > 1 and strategy == "ddp":
        buckets = n * w
        gradients = 0 if bucket_view else n * w
    elif processes > 1 and strategy == "fsdp2":
        # the root unit (embedding) and two layers (the one computed, the one prefetched) unsharded
        in_flight = arch.vocab_size * arch.hidden_size + 2 * arch.layer_params
        weights = n * w / processes + in_flight * w
        gradients = n * w + n * w / processes
        state /= processes
    share = vllm_fraction * card_gib * GIB
    tokens = micro_batch * tokens_per_row
    return MemoryEstimate(
        weights=weights,
        gradients=gradients,
        optimizer=state,
        autocast_copies=n * 2 if fp32 else 0,
        reference_model=weights if reference_model else 0,
        activations=tokens * arch.activation_elements_per_token(gradient_checkpointing) * w * margins.activation,
        vllm_reserve=(VLLM_WORKSPACE_GIB * GIB if vllm_sleep else share) if use_vllm else 0,
        runtime=margins.runtime_gib * GIB,
        card_bytes=card_gib * GIB,
        micro_batch=micro_batch,
        tokens_per_row=tokens_per_row,
        vllm_share=share if use_vllm else 0,
        ddp_buckets=buckets,
        scoring_activations=tokens * arch.scoring_elements_per_token() * w * margins.scoring,
        margin=margins.margin_gib * GIB,
    )


def vllm_kv_capacity_tokens(arch: Architecture, vllm_fraction: float, card_gib: float) -> int:
    """Tokens of KV cache the colocated vLLM has left after its bf16 weights (an upper bound)."""
    free = vllm_fraction * card_gib * GIB - arch.params * 2
    return max(0, int(free // arch.kv_cache_bytes_per_token()))


def vllm_share_for(arch: Architecture, *, rows: int, tokens_per_row: int, card_gib: float, room_gib: float) -> float:
    """The smallest share of the card (in hundredths) holding the engine's weights, workspace and
    KV cache of ``rows`` rows, capped by ``room_gib``; ``ValueError`` when not one row fits."""
    need = arch.params * 2 + rows * tokens_per_row * arch.kv_cache_bytes_per_token() + VLLM_WORKSPACE_GIB * GIB
    share = math.ceil(need / (card_gib * GIB) * 100 - 1e-9) / 100
    room = min(room_gib, MAX_VLLM_SHARE * card_gib)
    cap = math.floor(room / card_gib * 100 + 1e-9) / 100
    if share <= cap:
        return share
    if (
        vllm_kv_capacity_tokens(arch, cap, card_gib) - VLLM_WORKSPACE_GIB * GIB // arch.kv_cache_bytes_per_token()
        < tokens_per_row
    ):
        raise ValueError(
            f"device.vllm_gpu_memory_utilization=auto: {rows} rows of up to {tokens_per_row} tokens per engine "
            f"need {need / GIB:.1f} GiB of vLLM (weights, KV cache at the cap, {VLLM_WORKSPACE_GIB:g} GiB "
            f"workspace), {need / (card_gib * GIB):.2f} of a {card_gib} GiB card, and the generation phase leaves "
            f"it {room:.1f} GiB, not one row; spread the cell over more GPUs (launch.processes_per_node), lower "
            "train.prompts_per_step or shorter sequences, or free the card (device.master_weights=bf16_kahan)"
        )
    return cap


@per_config
def vllm_share(config: PipelineConfig, model: str) -> float:
    """``device.vllm_gpu_memory_utilization`` of ``model``'s cells; ``auto``: ``vllm_share_for`` the
    grid's largest step, within what the model's heaviest algorithm leaves (docs/cluster.md)."""
    device = config.device
    value = device.vllm_gpu_memory_utilization
    if value != "auto":
        return value
    if not device.use_vllm:
        return DeviceSection.default("vllm_gpu_memory_utilization")  # no engine: the key is unused
    card = card_gib(config)
    if card is None:
        raise ValueError(
            "device.vllm_gpu_memory_utilization=auto needs device.gpu_memory_gib (and "
            "device.use_cpu=false): the card the share is a part of"
        )
    algorithms = [
        resolve_algorithm({"name": a, **config.algorithm_overrides_of(a)}, config.train.max_completion_length)
        for a in config.algorithms
    ]
    held = max(cell_estimate(config, model, algo, 1, vllm_fraction=0.0).held for algo in algorithms)
    return vllm_share_for(
        architecture_of(config.models[model], model),
        rows=-(-_max_rollouts(config) // config.launch.processes),
        tokens_per_row=_tokens_per_row(config),
        card_gib=card,
        room_gib=card - held / GIB,
    )


def _max_rollouts(config: PipelineConfig) -> int:
    """Rollouts of the grid's largest step: the rollout budget, or P x G_max."""
    train = config.train
    return train.rollout_budget or train.prompts_per_step * max(grid_group_sizes(config))


def _tokens_per_row(config: PipelineConfig) -> int:
    """A row at the length cap (TRL pads every row to the longest)."""
    return config.train.max_prompt_length + config.train.max_completion_length


def card_gib(config: PipelineConfig) -> float | None:
    """``device.gpu_memory_gib``, the card the config is sized for; None on CPU or unset."""
    return None if config.device.use_cpu else config.device.gpu_memory_gib


def margins(config: PipelineConfig, model: str) -> Margins:
    """The plan's allowances for ``model``: measured (``device.memory_measured``) or stated."""
    measured = config.device.memory_measured
    if measured:
        return measured_margins(measured, config.models[model].hub_id, model)
    return Margins(margin_gib=config.device.memory_margin_gib)


def measured_margins(path: str, hub_id: str | None, model: str) -> Margins:
    """``model``'s allowances measured by ``benchmarks/gpu_memory_check.py`` (its JSON at ``path``)."""
    key = "device.memory_measured"
    try:
        report = json.loads(open(path).read())
    except (OSError, ValueError) as err:
        raise ValueError(f"{key}: cannot read {path}: {err}") from None
    found = (report.get("models") or {}).get(hub_id)
    if report.get("schema") != MEASURED_SCHEMA or report.get("tiny") or not found:
        raise ValueError(
            f"{key}: {path} holds no measurement of models.{model} ({hub_id}) on a card (a "
            f"{MEASURED_SCHEMA} JSON of benchmarks/gpu_memory_check.py without --tiny); measure it "
            "or unset the key to use device.memory_margin_gib"
        )
    return Margins(
        activation=found["loss_pass"]["activation_factor"],
        scoring=found["scoring"]["activation_factor"],
        runtime_gib=found["runtime_gib"],
        margin_gib=found["fragmentation_gib"],
        source=path,
    )


def cell_estimate(
    config: PipelineConfig, model: str, algo: Any, micro_batch: int, vllm_fraction: float | None = None
) -> MemoryEstimate:
    """One cell's plan with ``micro_batch`` rows a pass (``algo``: its ``AlgorithmSettings``)."""
    if vllm_fraction is None:
        vllm_fraction = vllm_share(config, model)
    device = config.device
    card = card_gib(config)
    if card is None:
        raise ValueError("device.gpu_memory_gib is needed for a memory estimate (and device.use_cpu=false)")
    return estimate(
        architecture_of(config.models[model], model),
        master_weights=device.master_weights,
        reference_model=algo.beta > 0,
        micro_batch=micro_batch,
        tokens_per_row=_tokens_per_row(config),
        vllm_fraction=vllm_fraction,
        card_gib=card,
        gradient_checkpointing=device.gradient_checkpointing,
        use_vllm=device.use_vllm,
        vllm_sleep=device.vllm_sleep_mode,
        strategy=config.models[model].strategy or LaunchSection.default("strategy"),
        processes=config.launch.processes,
        margins=margins(config, model),
    )


def cell_kv_shortfall(config: PipelineConfig, model: str, rows: int) -> str | None:
    """Why one engine's KV cache cannot hold ``rows`` rows at the length cap (a step at G_max, the
    worst case a straggler study plans for), or ``None`` (also without vLLM or a card size)."""
    card = card_gib(config)
    if card is None or not config.device.use_vllm:
        return None
    arch = architecture_of(config.models[model], model)
    tokens_per_row = _tokens_per_row(config)
    vllm_fraction = vllm_share(config, model)
    capacity = vllm_kv_capacity_tokens(arch, vllm_fraction, card)
    need = rows * tokens_per_row
    if need <= capacity:
        return None
    return (
        f"vLLM's KV cache holds at most {capacity:,} tokens ({vllm_fraction} of {card} GiB less its "
        f"bf16 weights, {arch.kv_cache_bytes_per_token() // 1024} KiB a token), {capacity // tokens_per_row} rows "
        f"at the cap, but a step at G_max gives each engine {rows} rows of up to {tokens_per_row} tokens "
        f"({need:,}): rows will queue and be preempted; raise device.vllm_gpu_memory_utilization (auto: the "
        "share that holds them where the generation phase leaves it room; with device.vllm_sleep_mode the "
        "loss pass does not pay for it), free the card for it, spread the cell over more GPUs "
        "(launch.processes_per_node) or lower train.prompts_per_step"
    )


def auto_accumulation(config: PipelineConfig, model: str, settings: dict[str, Any]) -> dict[str, int]:
    """``gradient_accumulation_steps: auto``: the smallest accumulation whose micro-batch at the grid's
    smallest G fits the card, and that micro-batch as ``micro_batch_rows`` unless set."""
    if card_gib(config) is None:
        return {}  # auto stays: resolve_cell refuses it, naming the card key it needs
    train = TrainSection.from_dict(settings["train"])
    algo = resolve_algorithm(AlgorithmSection.from_dict(settings["algorithm"]), train.max_completion_length)
    smallest = min(grid_group_sizes(config))
    processes = LaunchSection.from_dict(settings.get("launch")).processes
    last = None
    first_split_error = None
    for ga in range(1, _max_rollouts(config) + 1):
        try:
            shapes = step_shapes(
                algo,
                (smallest,),
                prompts_per_step=train.prompts_per_step,
                rollout_budget=train.rollout_budget,
                gradient_accumulation_steps=ga,
                processes=processes,
            )
        except ValueError as err:
            first_split_error = first_split_error or err
            continue
        last = cell_estimate(config, model, algo, shapes.max_micro_batch)
        if last.fits:
            rows = shapes.shapes[smallest].micro_batch if train.micro_batch_rows is None else train.micro_batch_rows
            return {"gradient_accumulation_steps": ga, "micro_batch_rows": rows}
    if last is None:
        raise first_split_error  # no accumulation splits the step: the split's own message (G, counts)
    raise ValueError(
        f"train.gradient_accumulation_steps=auto: no micro-batch fits device.gpu_memory_gib="
        f"{card_gib(config)} ({last.describe()}); use a larger card, "
        "device.master_weights=bf16_kahan, a smaller vLLM share or shorter sequences"
    )


def memory_plan(config: PipelineConfig, model: str, resolved: ResolvedCell) -> MemoryPlan | None:
    """A resolved cell's plan on the config's card (None without one); ``ValueError`` when it does not fit."""
    if card_gib(config) is None:
        return None
    layout = resolved.layout
    cap = layout.micro_batch_rows  # the trainer runs a larger micro-batch as passes of this many rows
    rows = layout.max_micro_batch if cap is None else min(cap, layout.max_micro_batch)
    est = cell_estimate(config, model, resolved.algorithm, rows)
    if not est.fits:
        raise ValueError(
            f"train.gradient_accumulation_steps={layout.gradient_accumulation_steps}, train.micro_batch_rows="
            f"{cap} do not fit device.gpu_memory_gib: {est.describe()}; lower micro_batch_rows, raise the "
            "accumulation or set it to auto"
        )
    return MemoryPlan(
        card_gib=est.card_bytes / GIB,
        rows_per_pass=rows,
        tokens_per_row=est.tokens_per_row,
        loss_pass_gib=round(est.total / GIB, 2),
        generating_gib=round(est.generating / GIB, 2),
        scoring_gib=round(est.scoring / GIB, 2),
        vllm_share=vllm_share(config, model) if est.vllm_share else 0.0,
    )
