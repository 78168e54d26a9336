"""GPU memory of one training cell: a written-down estimator, and the micro-batch it allows.

TRL runs the loss pass on ``per_device_train_batch_size`` rows at once (one micro-batch);
a step's P x G rollouts are split into ``minibatches x gradient_accumulation_steps``
micro-batches. The estimator below says how large a micro-batch fits a card, so that
``train.gradient_accumulation_steps: auto`` can pick the accumulation for every cell, and
the config check can refuse a cell that would run out of memory at its first step.

What the card holds during the loss pass of a colocated run (bytes; N = parameters):

==================  =========================================================================
weights             N x 4 (fp32 master weights) or N x 2 (bf16 weights, compensated optimizer)
gradients           same dtype as the weights
optimizer           AdamW moments in fp32: N x 8; the compensated optimizer adds a bf16
                    compensation buffer (N x 2)
autocast copies     fp32 master weights under bf16 autocast: a bf16 copy of each weight is
                    cached for the forward pass, N x 2
reference model     GRPO's KL term (beta > 0): TRL loads it like the policy (same dtype)
activations         with gradient checkpointing: each layer's input is kept (L x h per token),
                    plus the working set of the one layer being recomputed in the backward
                    pass, 2 x (4h + 2 kv + 4 I) per token (q/o and norms, k/v, MLP
                    gate/up/act/product; forward values and their gradients); TRL's fused LM
                    head never materialises the (tokens x vocab) logits. Element size: 4 bytes
                    with fp32 master weights (the residual stream stays fp32 under autocast),
                    2 with bf16 weights. Times ``ACTIVATION_MARGIN`` for what the model leaves
                    out (allocator fragmentation, attention kernels' buffers). Tokens = micro-
                    batch x (max_prompt_length + max_completion_length): TRL pads every row
                    to the longest one, and the worst case is the cap.
vLLM reserve        ``vllm_gpu_memory_utilization`` x card (colocated vLLM claims that share
                    of the whole card for its weights and KV cache); in sleep mode
                    (``device.vllm_sleep_mode``) the engine has freed its weights and KV cache
                    during the loss pass and keeps only ``VLLM_WORKSPACE_GIB``
runtime             ``RUNTIME_GIB``: CUDA context, cuBLAS/NCCL workspaces
==================  =========================================================================

In sleep mode the engine takes its share back to generate, while the policy's weights, the
AdamW state and the reference model stay on the card (the gradients are freed after each
optimizer step, autocast's weight copies when the forward pass leaves autocast): that
generation phase must fit the card too (``MemoryEstimate.generating``).

**The vLLM share** (``device.vllm_gpu_memory_utilization: auto``, ``vllm_share``): the
smallest share (in hundredths) that holds the engine's bf16 weights, ``VLLM_WORKSPACE_GIB``
and the KV cache of its rows of the grid's largest step, every row at the length cap (the
worst case a straggler study must plan for: past the cache vLLM queues and preempts rows,
and the rollout's time follows the step's total tokens instead of its longest row). The
same share for every cell of a model, so every cell's engine is the same.

The optimizer step runs after the backward pass has freed the activations; its temporaries
(``CompensatedAdamW`` holds about four fp32 copies of one parameter at a time: ~6 GB for
Llama-3.2-3B's embedding) fit in their place on the paper's micro-batches.

A cell of several processes (``launch``) has one per card, each with its share of the
step: the micro-batch is that share's, and the weights, gradients and optimizer state are
counted whole, as DDP holds them (fsdp2 and ZeRO shard them: for those an upper bound).

The estimate is an upper bound for the first step's loss pass, not a measurement: check
it on the card (``torch.cuda.max_memory_allocated``) before a long run.

The paper's two models are described by their published ``config.json`` fields
(``PAPER_MODEL_CONFIGS``), so resolving the paper grid needs neither network nor cache.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Callable

from sagc.controller import grid_group_sizes
from sagc.train.config import MASTER_WEIGHTS, DeviceSection, LaunchSection, TrainSection

GIB = 1024**3
#: Multiplier on the activation estimate for what it leaves out.
ACTIVATION_MARGIN = 1.25
#: CUDA context and library workspaces.
RUNTIME_GIB = 2.0
#: What a colocated vLLM engine holds besides its weights and KV cache (its activation
#: workspace, CUDA graphs, sampler buffers), asleep too: an assumption, to check against
#: vLLM's log on the card ("Available KV cache memory").
VLLM_WORKSPACE_GIB = 4.0
#: The largest share ``auto`` gives vLLM: the policy's weights must stay on the card.
MAX_VLLM_SHARE = 0.95

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
    def from_config(cls, cfg: dict[str, Any]) -> "Architecture":
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
    def params(self) -> int:
        h, q, kv, i = self.hidden_size, self.num_heads * self.head_dim, self.kv_dim, self.intermediate_size
        layer = h * q + 2 * h * kv + q * h + 3 * h * i + 2 * h + ((q + 2 * kv) if self.qkv_bias else 0)
        embeddings = self.vocab_size * h * (1 if self.tie_word_embeddings else 2)
        return self.num_layers * layer + embeddings + h

    def activation_elements_per_token(self, gradient_checkpointing: bool) -> int:
        h, kv, i = self.hidden_size, self.kv_dim, self.intermediate_size
        working_set = 2 * (4 * h + 2 * kv + 4 * i)
        if gradient_checkpointing:
            return self.num_layers * h + working_set
        return self.num_layers * (h + working_set)

    def kv_cache_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        return 2 * self.num_layers * self.kv_dim * dtype_bytes


def architecture_of(model_spec: dict[str, Any], model_name: str) -> Architecture:
    """The architecture of a config's model entry: a paper model from the table, another hub
    model from its ``config.json`` in the local Hugging Face cache."""
    hub_id = model_spec.get("hub_id")
    if hub_id in PAPER_MODEL_CONFIGS:
        return Architecture.from_config(PAPER_MODEL_CONFIGS[hub_id])
    if hub_id:
        from huggingface_hub import try_to_load_from_cache

        path = try_to_load_from_cache(hub_id, "config.json", revision=model_spec.get("revision"))
        if isinstance(path, str):
            with open(path) as fh:
                return Architecture.from_config(json.load(fh))
    raise ValueError(
        f"models.{model_name}: no architecture known for the memory estimate (hub_id {hub_id!r} is "
        f"neither one of {sorted(PAPER_MODEL_CONFIGS)} nor in the local cache); download it first or "
        "set train.gradient_accumulation_steps to a number and device.gpu_memory_gib to null"
    )


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes per component (see the module docstring) against a card of ``card_bytes``."""

    weights: float
    gradients: float
    optimizer: float
    autocast_copies: float
    reference_model: float
    activations: float
    vllm_reserve: float
    runtime: float
    card_bytes: float
    micro_batch: int
    tokens_per_row: int
    vllm_share: float = 0.0  # what the engine holds while it generates
    vllm_sleep: bool = False

    @property
    def total(self) -> float:
        """The loss pass."""
        return (self.weights + self.gradients + self.optimizer + self.autocast_copies
                + self.reference_model + self.activations + self.vllm_reserve + self.runtime)

    @property
    def generating(self) -> float:
        """The generation phase: the engine awake next to what training keeps between passes
        (at most ``total`` unless the engine sleeps during the loss pass)."""
        return self.weights + self.optimizer + self.reference_model + self.vllm_share + self.runtime

    @property
    def fits(self) -> bool:
        return self.total <= self.card_bytes and self.generating <= self.card_bytes

    def describe(self) -> str:
        parts = ("weights", "gradients", "optimizer", "autocast_copies", "reference_model",
                 "activations", "vllm_reserve", "runtime")
        body = ", ".join(f"{p} {getattr(self, p) / GIB:.1f}" for p in parts if getattr(self, p))
        text = (f"micro-batch {self.micro_batch} x {self.tokens_per_row} tokens: {self.total / GIB:.1f} GiB "
                f"of {self.card_bytes / GIB:.1f} GiB ({body})")
        if self.vllm_sleep:
            text += (f"; generating, vLLM awake: {self.generating / GIB:.1f} GiB (its share "
                     f"{self.vllm_share / GIB:.1f} next to weights, optimizer and reference model)")
        return text


def estimate(arch: Architecture, *, master_weights: str, reference_model: bool, micro_batch: int,
             tokens_per_row: int, vllm_fraction: float, card_gib: float,
             gradient_checkpointing: bool = True, use_vllm: bool = True,
             vllm_sleep: bool = False) -> MemoryEstimate:
    """Peak memory of a colocated training step's loss pass and generation phase (see the
    module docstring)."""
    if master_weights not in MASTER_WEIGHTS:
        raise ValueError(f"master_weights must be one of {MASTER_WEIGHTS}, got {master_weights!r}")
    n = arch.params
    fp32 = master_weights == "fp32"
    w = 4 if fp32 else 2
    act_elem = arch.activation_elements_per_token(gradient_checkpointing)
    share = vllm_fraction * card_gib * GIB
    return MemoryEstimate(
        weights=n * w,
        gradients=n * w,
        optimizer=n * 8 + (0 if fp32 else n * 2),
        autocast_copies=n * 2 if fp32 else 0,
        reference_model=n * w if reference_model else 0,
        activations=micro_batch * tokens_per_row * act_elem * w * ACTIVATION_MARGIN,
        vllm_reserve=(VLLM_WORKSPACE_GIB * GIB if vllm_sleep else share) if use_vllm else 0,
        runtime=RUNTIME_GIB * GIB,
        card_bytes=card_gib * GIB,
        micro_batch=micro_batch,
        tokens_per_row=tokens_per_row,
        vllm_share=share if use_vllm else 0,
        vllm_sleep=vllm_sleep and use_vllm,
    )


def vllm_kv_capacity_tokens(arch: Architecture, vllm_fraction: float, card_gib: float) -> int:
    """Tokens of KV cache the colocated vLLM has left after its bf16 weights (an upper
    bound: vLLM also keeps activations and CUDA graphs in its share)."""
    free = vllm_fraction * card_gib * GIB - arch.params * 2
    return max(0, int(free // arch.kv_cache_bytes_per_token()))


def kv_shortfall(arch: Architecture, *, rows: int, tokens_per_row: int, vllm_fraction: float,
                 card_gib: float) -> str | None:
    """Why one engine's KV cache cannot hold its share of a step at G_max (``rows`` rows of up
    to ``tokens_per_row`` tokens), or ``None``. The expectation is the worst case a straggler
    study must plan for: every row at the length cap. Past the cache, vLLM queues and preempts
    rows, and the rollout time follows the step's total tokens instead of its longest row,
    the very effect SAGC is credited with removing."""
    capacity = vllm_kv_capacity_tokens(arch, vllm_fraction, card_gib)
    need = rows * tokens_per_row
    if need <= capacity:
        return None
    return (f"vLLM's KV cache holds at most {capacity:,} tokens ({vllm_fraction} of {card_gib} GiB less its "
            f"bf16 weights, {arch.kv_cache_bytes_per_token() // 1024} KiB a token), {capacity // tokens_per_row} rows "
            f"at the cap, but a step at G_max gives each engine {rows} rows of up to {tokens_per_row} tokens "
            f"({need:,}): rows will queue and be preempted; raise device.vllm_gpu_memory_utilization (auto: the "
            "share that holds them; with device.vllm_sleep_mode the loss pass does not pay for it), spread "
            "the cell over more GPUs (launch.processes_per_node) or lower train.prompts_per_step")


def vllm_share_for(arch: Architecture, *, rows: int, tokens_per_row: int, card_gib: float) -> float:
    """The smallest share of the card (in hundredths) whose engine holds its bf16 weights,
    ``VLLM_WORKSPACE_GIB`` and the KV cache of ``rows`` rows of ``tokens_per_row`` tokens
    (``vllm_kv_capacity_tokens`` of it holds them)."""
    need = arch.params * 2 + rows * tokens_per_row * arch.kv_cache_bytes_per_token() + VLLM_WORKSPACE_GIB * GIB
    share = math.ceil(need / (card_gib * GIB) * 100 - 1e-9) / 100
    if share > MAX_VLLM_SHARE:
        raise ValueError(
            f"device.vllm_gpu_memory_utilization=auto: {rows} rows of up to {tokens_per_row} tokens per engine "
            f"need {need / GIB:.1f} GiB of vLLM (weights, KV cache at the cap, {VLLM_WORKSPACE_GIB:g} GiB "
            f"workspace), {need / (card_gib * GIB):.2f} of a {card_gib} GiB card; spread the cell over more "
            "GPUs (launch.processes_per_node), lower train.prompts_per_step, or set a share (rows then "
            "queue: the warning names the cells)")
    return share


# -- a pipeline config's cells --------------------------------------------------------------


def vllm_share(config: dict[str, Any], model: str) -> float:
    """``device.vllm_gpu_memory_utilization`` of ``model``'s cells: the config's number, or for
    ``auto`` ``vllm_share_for`` one engine's rows of the grid's largest step (P x G_max, or the
    rollout budget, over the cell's processes), the same for every cell of the model (without
    ``use_vllm``, where the key is unused, the trainer's default)."""
    device, train = _settings(config)
    value = device("vllm_gpu_memory_utilization")
    if value != "auto":
        return value
    if not device("use_vllm"):
        return DeviceSection.default("vllm_gpu_memory_utilization")  # no engine: the key is unused
    card = card_gib(config)
    if card is None:
        raise ValueError("device.vllm_gpu_memory_utilization=auto needs device.gpu_memory_gib (and "
                         "device.use_cpu=false): the card the share is a part of")
    rollouts = train("rollout_budget") or train("prompts_per_step") * max(grid_group_sizes(config))
    processes = LaunchSection.from_dict(dict(config.get("launch") or {})).processes
    return vllm_share_for(architecture_of(config["models"][model], model), rows=-(-rollouts // processes),
                          tokens_per_row=train("max_prompt_length") + train("max_completion_length"), card_gib=card)


def card_gib(config: dict[str, Any]) -> float | None:
    """The card the config is sized for (``device.gpu_memory_gib``); None on CPU or unset."""
    device = config.get("device", {})
    if device.get("use_cpu", True):
        return None
    return device.get("gpu_memory_gib")


def cell_estimate(config: dict[str, Any], model: str, algo: Any, micro_batch: int) -> MemoryEstimate:
    """The estimate of one cell of a checked pipeline config with a given micro-batch;
    ``algo`` is the cell's ``sagc.train.presets.AlgorithmSettings``."""
    device, train = _settings(config)
    card = card_gib(config)
    if card is None:
        raise ValueError("device.gpu_memory_gib is needed for a memory estimate (and device.use_cpu=false)")
    return estimate(
        architecture_of(config["models"][model], model),
        master_weights=device("master_weights"),
        reference_model=algo.beta > 0,
        micro_batch=micro_batch,
        tokens_per_row=train("max_prompt_length") + train("max_completion_length"),
        vllm_fraction=vllm_share(config, model),
        card_gib=card,
        gradient_checkpointing=device("gradient_checkpointing"),
        use_vllm=device("use_vllm"),
        vllm_sleep=device("vllm_sleep_mode"),
    )


def _settings(config: dict[str, Any]):
    """``(device(key), train(key))``: a checked config's device and train values, the
    trainer's defaults where the config states none."""

    def device(key: str) -> Any:
        return config.get("device", {}).get(key, DeviceSection.default(key))

    def train(key: str) -> Any:
        return config["train"].get(key, TrainSection.default(key))

    return device, train


def cell_kv_shortfall(config: dict[str, Any], model: str, rows: int) -> str | None:
    """``kv_shortfall`` for one engine of a cell of a checked pipeline config (``None`` without
    vLLM or a card size)."""
    device, train = _settings(config)
    card = card_gib(config)
    if card is None or not device("use_vllm"):
        return None
    return kv_shortfall(architecture_of(config["models"][model], model), rows=rows,
                        tokens_per_row=train("max_prompt_length") + train("max_completion_length"),
                        vllm_fraction=vllm_share(config, model), card_gib=card)


def auto_accumulation(config: dict[str, Any], model: str, algo: Any, layout_at: Callable[[int], Any]) -> int:
    """The smallest ``gradient_accumulation_steps`` (largest micro-batch) whose micro-batch
    fits the card and whose step ``layout_at(accumulation)`` can be laid out (its split
    divides; each GPU holds one process's micro-batch: its share of the step, split further)."""
    train = config["train"]
    last = None
    first_split_error = None
    max_rollouts = train.get("rollout_budget") or train["prompts_per_step"] * max(grid_group_sizes(config))
    for ga in range(1, max_rollouts + 1):
        try:
            shapes = layout_at(ga)
        except ValueError as err:
            first_split_error = first_split_error or err
            continue
        last = cell_estimate(config, model, algo, shapes.max_micro_batch)
        if last.fits:
            return ga
    if last is None:
        raise first_split_error  # no accumulation splits the step: the split's own message (G, counts)
    raise ValueError(
        f"train.gradient_accumulation_steps=auto: no micro-batch fits device.gpu_memory_gib="
        f"{card_gib(config)} ({last.describe()}); use a larger card, "
        "device.master_weights=bf16_kahan, a smaller vLLM share or shorter sequences"
    )


@dataclass(frozen=True)
class CardFit:
    """The card of a pipeline config's ``model`` cells, as a cell's resolution asks it
    (``sagc.train.resolve``): the automatic accumulation, and each cell's memory plan."""

    config: dict[str, Any]
    model: str

    def accumulation(self, algo: Any, layout: Callable[..., Any]) -> tuple[int, int]:
        """``train.gradient_accumulation_steps: auto``: ``(accumulation, rows per loss pass)``,
        the same for every cell of a model and algorithm, so that every cell trains in passes
        of the same size whatever its G. The pass is the largest micro-batch of a step at the
        grid's smallest G that fits the card (one process's share of the step when the cell
        has several); a step at a larger G has micro-batches that many times larger, which the
        trainer runs as passes of that size (``train.micro_batch_rows``). Sized at the cell's
        own largest G instead, a SAGC cell would train its G = 4 steps in passes a quarter of
        the g4 cell's."""
        smallest = min(grid_group_sizes(self.config))
        ga = auto_accumulation(self.config, self.model, algo, lambda ga: layout(ga, (smallest,)))
        return ga, layout(ga, (smallest,)).shapes[smallest].micro_batch

    def plan(self, algo: Any, layout: Any):
        """The cell's memory plan: a pass of its micro-batch (at most ``micro_batch_rows``
        rows) must fit the card by the estimate, or the cell is refused before any job (a
        first-step out-of-memory, caught when the config is read)."""
        from sagc.train.resolve import MemoryPlan

        cap = layout.micro_batch_rows  # the trainer runs a larger micro-batch as passes of this many rows
        rows = layout.max_micro_batch if cap is None else min(cap, layout.max_micro_batch)
        est = cell_estimate(self.config, self.model, algo, rows)
        if not est.fits:
            raise ValueError(
                f"train.gradient_accumulation_steps={layout.gradient_accumulation_steps}, train.micro_batch_rows="
                f"{cap} do not fit device.gpu_memory_gib: {est.describe()}; lower micro_batch_rows, raise the "
                "accumulation or set it to auto")
        return MemoryPlan(card_gib=est.card_bytes / GIB, rows_per_pass=rows, tokens_per_row=est.tokens_per_row,
                          loss_pass_gib=round(est.total / GIB, 2), generating_gib=round(est.generating / GIB, 2),
                          vllm_share=vllm_share(self.config, self.model) if est.vllm_share else 0.0)


def card_fit(config: dict[str, Any], model: str) -> CardFit | None:
    """The card ``model``'s cells are sized for, or None without one (CPU, or no
    ``device.gpu_memory_gib``)."""
    return CardFit(config, model) if card_gib(config) is not None else None
