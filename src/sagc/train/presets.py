"""Algorithm presets (GRPO, DAPO), the step shape and the TRL ``GRPOConfig`` keyword arguments
of a cell. The values with their sources: docs/trainer.md, "Algorithm presets and the step shape".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from sagc.config_models import Section

GRPO_PRESET: dict[str, Any] = dict(
    loss_type="grpo", beta=0.04, epsilon=0.2, epsilon_high=None, scale_rewards="group",
    num_iterations=1, minibatches=1, mask_truncated_completions=False,
    dynamic_sampling=False, ds_max_rounds=0, overlong_buffer=None, overlong_weight=0.0,
)  # fmt: skip

DAPO_PRESET: dict[str, Any] = dict(
    loss_type="dapo", beta=0.0, epsilon=0.2, epsilon_high=0.28, scale_rewards="group",
    num_iterations=1, minibatches=2, mask_truncated_completions=True,
    dynamic_sampling=True, ds_max_rounds=3, overlong_buffer=None, overlong_weight=1.0,
)  # fmt: skip

PRESETS = {"grpo": GRPO_PRESET, "dapo": DAPO_PRESET}

#: DAPO's soft-punishment buffer when unset, as a fraction of max_completion_length.
OVERLONG_BUFFER_FRACTION = 0.2


class AlgorithmSettings(Section):
    """A preset with the cell's overrides applied: nothing is left to a library default."""

    section_key: ClassVar[str] = "resolved.algorithm"
    name: str
    loss_type: str
    beta: float
    epsilon: float
    epsilon_high: float | None
    scale_rewards: str
    num_iterations: int
    minibatches: int
    mask_truncated_completions: bool
    dynamic_sampling: bool
    ds_max_rounds: int
    overlong_buffer: int | None
    overlong_weight: float

    @property
    def uses_overlong_punishment(self) -> bool:
        return self.overlong_weight > 0 and self.overlong_buffer is not None


def resolve_algorithm(section: Any, max_completion_length: int) -> AlgorithmSettings:
    """Apply ``section``'s non-null keys (an ``AlgorithmSection`` or a dict) to its preset."""
    values = section if isinstance(section, dict) else section.model_dump()
    name = values.get("name", "grpo")
    if name not in PRESETS:
        raise ValueError(f"algorithm.name must be one of {list(PRESETS)}, got {name!r}")
    merged = dict(PRESETS[name])
    for k, v in values.items():
        if k == "name" or v is None:
            continue
        if k not in merged:
            raise ValueError(f"unknown key algorithm.{k}")
        merged[k] = v
    if merged["overlong_weight"] > 0 and merged["overlong_buffer"] is None:
        merged["overlong_buffer"] = max(1, round(OVERLONG_BUFFER_FRACTION * max_completion_length))
    if merged["overlong_buffer"] is not None and merged["overlong_buffer"] > max_completion_length:
        raise ValueError(
            f"algorithm.overlong_buffer ({merged['overlong_buffer']}) must not exceed "
            f"train.max_completion_length ({max_completion_length})"
        )
    if merged["epsilon_high"] is not None and merged["epsilon_high"] < merged["epsilon"]:
        raise ValueError(
            f"algorithm.epsilon_high ({merged['epsilon_high']}) must be >= algorithm.epsilon ({merged['epsilon']})"
        )
    return AlgorithmSettings(name=name, **merged)


class StepShape(Section):
    """How a step at group size G is laid out."""

    group_size: int
    prompts: int
    rollouts: int
    micro_batch: int  # rollouts per forward/backward micro-batch of one process


class StepShapes(Section):
    """A cell's step layout at every G it can use."""

    section_key: ClassVar[str] = "resolved.layout"
    shapes: dict[int, StepShape]
    steps_per_generation: int  # TRL: micro-batches per rollout batch
    gradient_accumulation_steps: int
    updates_per_rollout: int  # optimizer steps per rollout step (minibatches x num_iterations)
    micro_batch_rows: int | None = None  # rows of one loss pass (None: a micro-batch at once)

    @property
    def max_rollouts(self) -> int:
        return max(s.rollouts for s in self.shapes.values())

    @property
    def max_micro_batch(self) -> int:
        return max(s.micro_batch for s in self.shapes.values())


def step_shapes(
    algo: AlgorithmSettings,
    group_sizes: tuple[int, ...],
    *,
    prompts_per_step: int | None,
    rollout_budget: int | None,
    gradient_accumulation_steps: int,
    processes: int = 1,
    micro_batch_rows: int | None = None,
) -> StepShapes:
    """The step at every G: P fixed, or P = budget / G, its rollouts split into
    ``processes x steps_per_generation`` equal micro-batches; ``ValueError`` naming the
    settings when a budget or a split does not divide (TRL would drop a remainder)."""
    ga = gradient_accumulation_steps
    spg = algo.minibatches * ga
    split_name = f"algorithm.minibatches x train.gradient_accumulation_steps = {algo.minibatches} x {ga} = {spg}"
    if processes > 1:
        split_name = f"launch processes x {split_name} = {processes} x {spg} = {processes * spg}"
    splits = spg * processes
    shapes = {}
    for g in sorted(group_sizes):
        if rollout_budget is not None:
            if rollout_budget % g:
                raise ValueError(
                    f"train.rollout_budget ({rollout_budget}) must be divisible by every group size "
                    f"of the cell ({sorted(group_sizes)}); {g} does not divide it"
                )
            prompts = rollout_budget // g
        else:
            prompts = prompts_per_step
        rollouts = prompts * g
        if rollouts < 1 or rollouts % splits:
            raise ValueError(
                f"a step at G={g} holds {rollouts} rollouts, which cannot be split into {split_name} "
                f"equal micro-batches (TRL would drop the remainder); change train.prompts_per_step "
                f"/ train.rollout_budget or the split"
            )
        shapes[g] = StepShape(group_size=g, prompts=prompts, rollouts=rollouts, micro_batch=rollouts // splits)
    return StepShapes(
        shapes=shapes,
        steps_per_generation=spg,
        gradient_accumulation_steps=ga,
        # optimizer updates per step: the step's minibatches, each repeated num_iterations times
        updates_per_rollout=spg // ga * algo.num_iterations,
        micro_batch_rows=micro_batch_rows,
    )


def grpo_config_kwargs(cfg: Any, algo: AlgorithmSettings, shapes: StepShapes) -> dict[str, Any]:
    """The ``trl.GRPOConfig`` keyword arguments of a cell. The per-device batch is the largest
    micro-batch, so that TRL's buffers and vLLM's ``max_num_seqs`` cover a step at G_max;
    ``num_generations`` is G_max (the trainer sets each step's G)."""
    t, dev = cfg.train, cfg.device
    u = shapes.updates_per_rollout
    g_max = max(shapes.shapes)
    kw: dict[str, Any] = dict(
        output_dir=str(Path(cfg.output_dir) / "checkpoints"),
        seed=t.seed,
        data_seed=t.seed,
        max_steps=t.steps * u,
        learning_rate=t.learning_rate,
        lr_scheduler_type=t.lr_scheduler_type,
        max_grad_norm=t.max_grad_norm,
        per_device_train_batch_size=shapes.max_micro_batch,
        gradient_accumulation_steps=shapes.gradient_accumulation_steps,
        steps_per_generation=shapes.steps_per_generation,
        num_generations=g_max,
        max_completion_length=t.max_completion_length,
        temperature=t.temperature,
        top_p=t.top_p,
        generation_kwargs=generation_kwargs(t, dev),
        loss_type=algo.loss_type,
        beta=algo.beta,
        epsilon=algo.epsilon,
        epsilon_high=algo.epsilon_high,
        scale_rewards=algo.scale_rewards,
        num_iterations=algo.num_iterations,
        mask_truncated_completions=algo.mask_truncated_completions,
        # checkpoints: in optimizer steps, at rollout-step boundaries only
        save_strategy="steps",
        save_steps=t.save_steps * u,
        save_total_limit=t.save_total_limit,
        save_only_model=False,
        # our own per-step W&B row replaces TRL's logging (see trainer.py)
        report_to="none",
        logging_strategy="steps",
        logging_steps=1,
        disable_tqdm=True,
        log_completions=False,
        shuffle_dataset=t.shuffle,
        disable_dropout=True,
        remove_unused_columns=False,
        dataloader_num_workers=0,
        # several processes: every parameter gets a gradient (no extra DDP graph traversal)
        ddp_find_unused_parameters=False,
        use_cpu=dev.use_cpu,
        bf16=dev.bf16,
        gradient_checkpointing=dev.gradient_checkpointing,
        use_vllm=dev.use_vllm,
        model_init_kwargs={
            "trust_remote_code": cfg.model.trust_remote_code,
            "dtype": dev.weights_dtype,
            **({"revision": cfg.model.revision} if cfg.model.revision else {}),
        },
        trust_remote_code=cfg.model.trust_remote_code,
    )
    if dev.use_vllm:
        kw.update(
            vllm_mode=dev.vllm_mode,
            vllm_gpu_memory_utilization=dev.vllm_gpu_memory_utilization,
            vllm_tensor_parallel_size=dev.vllm_tensor_parallel_size,
            vllm_enable_sleep_mode=dev.vllm_sleep_mode,
            vllm_max_model_length=t.max_prompt_length + t.max_completion_length,
            vllm_importance_sampling_mode=dev.vllm_importance_sampling_mode,
            vllm_importance_sampling_clip_max=dev.vllm_importance_sampling_clip_max,
        )
    return kw


def generation_kwargs(train: Any, device: Any) -> dict[str, Any] | None:
    """TRL's ``generation_kwargs``: the cell's extra keys, plus the stop strings for vLLM (HF
    ``generate`` cannot get them through TRL; ``rollout.trim_at_stop`` trims both alike)."""
    kw = dict(train.generation_kwargs)
    if device.use_vllm and train.stop:
        kw["stop"] = list(train.stop)
    return kw or None


def vllm_max_num_seqs(kwargs: dict[str, Any]) -> int:
    """What TRL 1.16 passes to vLLM as ``max_num_seqs`` for these GRPOConfig kwargs."""
    return (
        kwargs["per_device_train_batch_size"]
        * kwargs.get("vllm_tensor_parallel_size", 1)
        * kwargs["steps_per_generation"]
    )
