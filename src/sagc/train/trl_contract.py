"""What ``SAGCGRPOTrainer`` relies on inside TRL 1.16 (private methods and attributes): the
one list, which ``check_contract`` compares with the installed TRL. Every method the trainer
overrides must be listed here. Sources and pitfalls: ``docs/library-notes.md``.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Hook:
    """A method the trainer overrides or calls: its parameters after ``self``, and why."""

    name: str
    params: tuple[str, ...]
    why: str


HOOKS: tuple[Hook, ...] = (
    Hook(
        "get_train_dataloader", (), "replaced: one ticket per micro-step; prompts come from the trainer's PromptStream"
    ),
    Hook(
        "training_step",
        ("model", "inputs", "num_items_in_batch"),
        "wrapped: the step's wall and CPU timers start at its first micro-step; the update's loss",
    ),
    Hook(
        "_generate_and_score_completions",
        ("inputs",),
        "replaced while training: asks the sizer for G, sets num_generations, draws P prompts "
        "repeated G times and calls the parent per round (dynamic sampling); the parent computes "
        "the advantages with rewards.view(-1, G)",
    ),
    Hook(
        "_generate",
        ("prompts",),
        "wrapped: raw completion lengths (EOS-trimmed, truncated rows at the cap), truncation and "
        "the generate calls of each round; returns (prompt_ids, completion_ids, ...)",
    ),
    Hook(
        "_generate_single_turn",
        ("prompt_ids", "images", "multimodal_fields", "num_generations", "has_tool_images"),
        "wrapped: the vLLM weight sync, sleep mode's wake and sleep, the stop trimming and the "
        "wait for the other ranks are timed apart from generation; returns (completion_ids, logprobs, ...)",
    ),
    Hook(
        "compute_loss",
        ("model", "inputs", "return_outputs", "num_items_in_batch"),
        "wrapped: a micro-batch larger than micro_batch_rows runs as passes of that many rows "
        "(each weighted as its share of the loss; the earlier ones back-propagated here)",
    ),
    Hook(
        "_get_per_token_logps_and_entropies",
        (
            "model",
            "input_ids",
            "attention_mask",
            "logits_to_keep",
            "batch_size",
            "compute_entropy",
            "compute_aux_loss",
            "pixel_values",
            "image_grid_thw",
            "num_images",
            "pixel_attention_mask",
            "spatial_shapes",
            "num_tiles",
            "image_sizes",
            "token_type_ids",
            "mm_token_type_ids",
            "image_position_ids",
        ),
        "wrapped: the no-grad scoring passes (old and reference log-probs, chunks of batch_size = "
        "per_device_train_batch_size) run in chunks of micro_batch_rows, the loss pass's rows",
    ),
    Hook(
        "_calculate_rewards",
        ("inputs", "prompts", "completions", "completion_ids_list"),
        "wrapped: the weighted reward of each row (reward metrics) and the correctness column "
        "(dynamic sampling's filter)",
    ),
    Hook(
        "_save_checkpoint",
        ("model", "trial"),
        "extended: sagc_state.json (sizer, prompt stream, step records) written last; the old "
        "checkpoints are rotated out only after it (transformers' rotate_checkpoints)",
    ),
    Hook("_load_optimizer_and_scheduler", ("checkpoint",), "extended: sagc_state.json restored on resume"),
    Hook("_get_output_dir", ("trial",), "called: the folder of the checkpoint being saved"),
)

#: Instance attributes of ``GRPOTrainer`` the trainer reads or writes.
ATTRIBUTES: tuple[str, ...] = (
    "num_generations",  # set to G before each round
    "_metrics",  # TRL's per-update metric buffers (averaged into the step's trl/* metrics)
    "_tokenizer",
    "eos_token_ids",
    "reward_weights",
    "reward_func_names",  # dynamic sampling's filter finds the correctness reward by its name
    "use_vllm",
    "vllm_generation",  # weight sync before a vLLM rollout; its generation_kwargs get stop_token_ids
    "generation_config",  # HF generate: the EOS list gets the stops that are special tokens
    "generation_kwargs",
    "loss_type",  # how a loss pass is weighted (micro_batch_rows)
    "_last_loaded_step",
)


#: Methods of TRL's ``VLLMGeneration`` that ``sagc.train.rollout.sync_weights`` calls.
VLLM_GENERATION_METHODS: tuple[str, ...] = (
    "sync_weights",  # TRL's weight copy (every platform but vLLM's CPU build)
    "_iter_named_params",  # the policy's weights as TRL gathers them, for the CPU build's reload
)

#: Instance attributes of TRL's ``VLLMGeneration`` that ``sagc.train.rollout`` reads.
VLLM_GENERATION_ATTRIBUTES: tuple[str, ...] = (
    "_llm_weights_sleeping",  # sleep mode: the engine discarded its weights (timed_weight_sync re-pushes them)
    "enable_sleep_mode",  # sleep mode: the engine's wake_up / sleep are timed apart (SleepModeTimer)
)


def check_contract(trainer_cls: type | None = None) -> list[str]:
    """Problems of ``trainer_cls`` (default: ``trl.GRPOTrainer``) against the lists, one line
    each naming the hook; empty when all hold."""
    if trainer_cls is None:
        from trl import GRPOTrainer as trainer_cls

    problems = []
    for hook in HOOKS:
        method = getattr(trainer_cls, hook.name, None)
        if not callable(method):
            problems.append(f"TRL hook {hook.name}: {trainer_cls.__name__} has no such method ({hook.why})")
            continue
        params = tuple(p for p in inspect.signature(method).parameters if p != "self")
        if params != hook.params:
            problems.append(
                f"TRL hook {hook.name}: parameters are now {params}, the trainer expects {hook.params} ({hook.why})"
            )
    try:
        source = inspect.getsource(trainer_cls)
    except (OSError, TypeError):
        source = ""
    for attr in ATTRIBUTES:
        if not re.search(rf"self\.{re.escape(attr)}\s*[:=]", source):
            problems.append(f"TRL attribute {attr}: {trainer_cls.__name__} no longer assigns self.{attr}")
    from trl.generation.vllm_generation import VLLMGeneration

    for name in VLLM_GENERATION_METHODS:
        if not callable(getattr(VLLMGeneration, name, None)):
            problems.append(f"TRL VLLMGeneration.{name} is gone (sagc.train.rollout.sync_weights calls it)")
    generation_source = inspect.getsource(VLLMGeneration)
    for attr in VLLM_GENERATION_ATTRIBUTES:
        if not re.search(rf"self\.{re.escape(attr)}\s*[:=]", generation_source):
            problems.append(f"TRL attribute VLLMGeneration.{attr}: no longer assigned (sagc.train.rollout reads it)")
    return problems


def overridden_methods(subclass: type, base: type) -> set[str]:
    """Methods ``subclass`` defines itself that ``base`` (or its parents) also has."""
    return {
        name
        for name, value in vars(subclass).items()
        if callable(value) and not name.startswith("__") and hasattr(base, name)
    }
