"""A short check of the paper's training path on one GPU: a full-size Qwen2.5-3B (random
weights) trained for a few steps as the paper's GRPO/SAGC cell, timed, with its peak GPU
memory against the memory estimate that sized the cell.

On the GPU machine (one GPU, no network, no vLLM; the defaults are sized for ~10 minutes)::

    # here, with network: TRL and the few packages that machine lacks, as wheels, at the
    # versions installed here (the command prints the `pip download` lines, e.g.
    #   pip download trl==1.16.0 --no-deps -d wheels/
    # and the compiled ones for that machine's Python 3.12 / x86-64), then run them:
    python benchmarks/gpu_check.py --wheels-command
    # copy the repository (with wheels/) to the GPU machine; there:
    pip install --no-deps wheels/*.whl
    PYTHONPATH=src python benchmarks/gpu_check.py --out results/gpu_check
    # and bring results/gpu_check/gpu_check.json back (a few kB; the folder holds ~40 GB)

It stops at once, naming them, when a package it needs is missing. Everything is built
locally, nothing comes from a hub: a BPE tokenizer trained on the prompts
(``sagc.tiny.tokenizer``), a JSONL of arithmetic prompts in the paper's prompt template
with their answers, and a random-initialised model of Qwen2.5-3B's published architecture
(``sagc.pipeline.memory.PAPER_MODEL_CONFIGS``) with the tokenizer's vocabulary (the real
one has 151,936 rows: the embedding is smaller than the real model's, ~0.6B parameters
less; ``--real-vocab`` pads it to the real size, so the memory is the real model's; the
padded ids are never sampled). The cell is resolved as the pipeline resolves it
(configs/paper.yaml, ``sagc.pipeline.config.prepare``, ``train_cell_config`` for
qwen2.5-3b/grpo/sagc/seed0) on this card's memory (``device.gpu_memory_gib`` from
``torch.cuda``) and one process, with ``train.gradient_accumulation_steps: auto`` resolved
by the memory estimate with the paper's vLLM share reserved, as on the paper's card. The
paper's precision (bf16 autocast, fp32 master weights), gradient checkpointing, the
maximum prompt length and the stop strings are kept. What differs from the paper, printed
as such:

- HF ``generate`` instead of the colocated vLLM (``device.use_vllm: false``);
- one process: by default P = 8 prompts per step, one GPU's share of the paper's P = 32
  over its 4 processes (``--prompts``), so the micro-batch and accumulation are one rank's;
- completions of at most 512 tokens (``--max-completion``; the paper's 4096 take HF
  ``generate`` too long for a short check); the accumulation is resolved for that length;
- 2 steps (``--steps``), one checkpoint, at the last one (``--save-steps``: a checkpoint
  of fp32 weights and AdamW moments is 31-35 GiB, and the paper's ``save_total_limit`` of
  2 would keep two of them, more than a 64 GiB disk holds), W&B off.

Printed, and written to ``OUT/gpu_check.json`` (one JSON object, also the last line of the
output): the device and the torch / transformers / TRL versions; the resolved layout
(``TrainConfig.resolved``: gradient accumulation, per-device micro-batch at every G) and
the TRL arguments the trainer got; the peak GPU memory (``torch.cuda.max_memory_allocated``,
reset before training, and per step) against ``sagc.pipeline.memory.cell_estimate`` for
the cell (without the vLLM share this run does not reserve; with it; and for this model's
vocabulary); the model's parameter count against the estimator's formula; every step's
time, rollout (generation) time and G; each checkpoint's save time and size on disk.

What it does not check: vLLM (no colocated engine, so neither its memory share nor its KV
cache nor its generation speed: the rollout times are HF ``generate``'s, and the measured
peak may include HF ``generate``'s own KV cache, which the estimate leaves to vLLM's
share), several processes (DDP), the real weights (a random model rarely ends a
completion, so rows run to the cap: the worst case for time and memory, and it earns no
reward, so nothing is learnt), and 4096-token rollouts unless asked for.

``--tiny`` runs the same code at tiny size on CPU (a 2-layer Qwen2 of the same architecture
class, bf16 autocast on CPU, 2 steps of 16-token completions; ``device.use_cpu: true``),
resolved for the config's own card (139 GiB); peak GPU memory is then not measured, the
process's max RSS is reported instead. tests/train/test_gpu_check.py runs it.

The output folder is emptied first if an earlier run of this check made it, refused if it
holds anything else.
"""

from __future__ import annotations

import argparse
import copy
import gc
import importlib.util
import json
import logging
import os
import platform
import resource
import sys
import time
from pathlib import Path
from typing import Any

import outdir  # benchmarks/outdir.py: this script's folder is on sys.path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "results" / "gpu_check"
#: Written into the output folder: only a folder holding it is emptied on the next run.
MARKER = ".sagc-gpu-check"
RESULT_FILE = "gpu_check.json"
PAPER_CONFIG = REPO / "configs" / "paper.yaml"
MODEL, HUB_ID, ALGORITHM, SIZING, SEED = "qwen2.5-3b", "Qwen/Qwen2.5-3B", "grpo", "sagc", 0
GIB = 1024**3
#: Defaults of the two modes (the paper's values, where kept, come from configs/paper.yaml).
DEFAULTS = {
    "gpu": {"steps": 2, "prompts": 8, "max_completion": 512, "torch_threads": None},
    "tiny": {"steps": 2, "prompts": 2, "max_completion": 16, "torch_threads": 1},
}
#: The BPE's target size (the prompts' text gives it ~400 tokens; the model's vocabulary is
#: the tokenizer's, or the real one with --real-vocab).
TOKENIZER_VOCAB = 400
#: The sizes of the tiny model (tests/train/paper_world.py shrinks the paper configs alike):
#: the architecture class, biases, tied embeddings, norms and grouped-query attention stay.
TINY_SIZES = dict(
    hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1
)
#: Modules the check imports, and the distribution that provides each (for the message).
NEEDED = {
    "torch": "torch",
    "transformers": "transformers",
    "trl": "trl",
    "accelerate": "accelerate",
    "datasets": "datasets",
    "dill": "dill",
    "multiprocess": "multiprocess",
    "tokenizers": "tokenizers",
    "pydantic": "pydantic",
    "pydantic_core": "pydantic-core",
    "annotated_types": "annotated-types",
    "typing_inspection": "typing-inspection",
    "jsonschema": "jsonschema",
    "jsonschema_specifications": "jsonschema-specifications",
    "referencing": "referencing",
    "rpds": "rpds-py",
    "yaml": "pyyaml",
    "jinja2": "jinja2",
    "numpy": "numpy",
}
#: What the GPU machine's image lacks of them (pure Python, then compiled), to carry as wheels.
CARRY_PURE = (
    "trl",
    "datasets",
    "dill",
    "multiprocess",
    "pydantic",
    "annotated-types",
    "typing-inspection",
    "jsonschema",
    "jsonschema-specifications",
    "referencing",
)
CARRY_COMPILED = ("pydantic-core", "rpds-py")
#: The GPU machine's Python and platform, for the compiled wheels.
TARGET_PYTHON = "3.12"
TARGET_PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")


def missing_packages() -> list[str]:
    return [dist for mod, dist in NEEDED.items() if importlib.util.find_spec(mod) is None]


def wheels_commands(dest: str = "wheels/") -> list[str]:
    """``pip download`` lines for the packages to carry, at the versions installed here."""
    from importlib.metadata import PackageNotFoundError, version

    def pinned(name: str) -> str:
        try:
            return f"{name}=={version(name)}"
        except PackageNotFoundError:
            return name

    platforms = " ".join(f"--platform {p}" for p in TARGET_PLATFORMS)
    return [
        f"pip download {' '.join(pinned(n) for n in CARRY_PURE)} --no-deps -d {dest}",
        f"pip download {' '.join(pinned(n) for n in CARRY_COMPILED)} --no-deps --only-binary=:all: "
        f"--python-version {TARGET_PYTHON} --implementation cp {platforms} -d {dest}",
    ]


def _gib(n_bytes: float | None) -> float | None:
    return None if n_bytes is None else round(n_bytes / GIB, 3)


def _folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


# -- the local world ------------------------------------------------------------------------


def math_rows(n: int) -> list[dict]:
    """``n`` arithmetic problems in the paper's prompt template, with their answers."""
    from sagc.pipeline.hub import render_prompt

    rows = []
    ops = (("+", lambda a, b: a + b), ("-", lambda a, b: a - b), ("*", lambda a, b: a * b))
    i = 0
    while len(rows) < n:
        a, b = 3 + (7 * i) % 89, 2 + (13 * i) % 47
        sym, fn = ops[i % 3]
        problem = f"Compute {a} {sym} {b}. Show your work, then give the final answer."
        rows.append({"prompt": render_prompt(problem), "answer": str(fn(a, b)), "problem": problem})
        i += 1
    return rows


def model_config(tokenizer, *, tiny: bool, real_vocab: bool):
    """Qwen2.5-3B's published config (shrunk with ``tiny``) with this tokenizer's
    vocabulary, or the real vocabulary size with ``real_vocab``."""
    from transformers import AutoConfig

    from sagc.pipeline.memory import PAPER_MODEL_CONFIGS

    published = dict(PAPER_MODEL_CONFIGS[HUB_ID])
    model_type = published.pop("model_type")
    published.pop("architectures", None)
    vocab = published["vocab_size"] if real_vocab else len(tokenizer)
    sizes = dict(TINY_SIZES) if tiny else {}
    sizes.update(
        vocab_size=vocab, bos_token_id=None, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id
    )
    return AutoConfig.for_model(model_type, **{**published, **sizes})


def build_world(root: Path, *, tiny: bool, real_vocab: bool, n_rows: int, on_gpu: bool) -> dict[str, Any]:
    """Prompts (JSONL), a tokenizer trained on them and a random model saved with it."""
    import torch
    from transformers import AutoModelForCausalLM

    from sagc.tiny.models import save_model
    from sagc.tiny.tokenizer import train_tokenizer

    root.mkdir(parents=True, exist_ok=True)
    rows = math_rows(n_rows)
    data = root / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tok = train_tokenizer(
        [r["prompt"] + f" so \\boxed{{{r['answer']}}}\nUser: next" for r in rows], vocab_size=TOKENIZER_VOCAB
    )
    config = model_config(tok, tiny=tiny, real_vocab=real_vocab)
    torch.manual_seed(0)
    t0 = time.perf_counter()
    # bf16 as published (the trainer loads it in the cell's weights dtype); on the GPU the
    # random init runs there (seconds, not minutes of CPU time for 3B parameters).
    with torch.device("cuda" if on_gpu else "cpu"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    init_s = time.perf_counter() - t0
    params = sum(p.numel() for p in model.parameters())
    arch = type(model).__name__
    t0 = time.perf_counter()
    folder = save_model(model, tok, root / "model")
    save_s = time.perf_counter() - t0
    del model
    gc.collect()
    if on_gpu:
        torch.cuda.empty_cache()
    fields = (
        "hidden_size",
        "intermediate_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "vocab_size",
        "tie_word_embeddings",
    )
    return {
        "data": str(data),
        "rows": len(rows),
        "model_dir": str(folder),
        "architecture": arch,
        "config": {"model_type": config.model_type, **{k: getattr(config, k) for k in fields}},
        "tokenizer_size": len(tok),
        "params": params,
        "init_s": init_s,
        "save_s": save_s,
        "bytes": _folder_bytes(folder),
    }


# -- the cell -------------------------------------------------------------------------------


def resolve_cell(
    world: dict,
    out: Path,
    *,
    tiny: bool,
    card_gib: float,
    steps: int,
    prompts: int,
    max_completion: int,
    save_steps: int,
    torch_threads: int | None,
    real_vocab: bool,
) -> tuple[dict, dict, dict]:
    """The paper's qwen2.5-3b/grpo/sagc/seed0 cell as the pipeline resolves it for this card
    and one process, pointed at the local world. Returns (checked pipeline config, cell,
    what differs from the paper)."""
    import yaml

    from sagc.pipeline.cells import train_cell_config
    from sagc.pipeline.config import prepare
    from sagc.pipeline.grid import Cell, Grid

    config = yaml.safe_load(PAPER_CONFIG.read_text())
    paper = copy.deepcopy(config)
    from sagc.pipeline.launch import STOP_KEYS
    from sagc.train.config import LaunchSection

    # The stop keys are the SLURM profile's, not the trainer's launch section.
    launch = {k: v for k, v in (paper.get("launch") or {}).items() if k not in STOP_KEYS}
    paper_processes = LaunchSection.from_dict(launch).processes
    # What shapes the step, before the pipeline resolves it (auto accumulation included).
    config["device"]["gpu_memory_gib"] = card_gib
    if "launch" in config:  # one GPU: one process (a config without the section has one)
        config["launch"] = {"nodes": 1, "processes_per_node": 1}
    config["train"]["prompts_per_step"] = prompts
    config["train"]["max_completion_length"] = max_completion
    config = prepare(config, f"{PAPER_CONFIG.relative_to(REPO)} (gpu check)")
    grid = Grid.from_config(config)
    cell = train_cell_config(config, grid, Cell(MODEL, ALGORITHM, SIZING, SEED))
    # Then what the check must change in the resolved cell.
    cell["model"]["path"] = world["model_dir"]
    cell["model"]["revision"] = None
    cell["data"]["train"] = world["data"]
    cell["device"]["use_vllm"] = False
    cell["device"]["use_cpu"] = tiny  # bf16, master weights, checkpointing: as the paper
    cell["train"]["steps"] = steps
    cell["train"]["save_steps"] = save_steps
    if torch_threads is not None:
        cell["train"]["torch_threads"] = torch_threads
    if real_vocab and world["config"]["vocab_size"] > world["tokenizer_size"]:
        # rows past the tokenizer's ids are never sampled (nor are a real model's padding rows)
        cell["train"].setdefault("generation_kwargs", {})
        cell["train"]["generation_kwargs"]["suppress_tokens"] = list(
            range(world["tokenizer_size"], world["config"]["vocab_size"])
        )
    cell["wandb"]["mode"] = "disabled"
    cell["wandb"]["dir"] = str(out / "train" / "wandb")
    cell["output_dir"] = str(out / "train")
    # Edited here, so resolved again when loaded; the layout must stay the pipeline's (the
    # same train, algorithm and sizing: the accumulation it chose is in train).
    pipeline_layout = cell.pop("resolved")["layout"]
    from sagc.train.config import TrainConfig

    if TrainConfig.from_dict(cell, check_vllm=False).resolved.layout.model_dump() != pipeline_layout:
        raise AssertionError("the edited cell lays out its steps unlike the pipeline's")
    pt = paper["train"]
    differs = {
        "use_vllm": "false (HF generate; the paper: a colocated vLLM)" if paper["device"]["use_vllm"] else "false",
        "processes": f"1 (the paper: {paper_processes})",
        "steps": f"{steps} (the paper: {pt['steps']})",
        "save_steps": f"{save_steps} (the paper: {pt['save_steps']})",
    }
    if card_gib != paper["device"]["gpu_memory_gib"]:
        differs["gpu_memory_gib"] = f"{card_gib:g} (this card; configs/paper.yaml: {paper['device']['gpu_memory_gib']})"
    if prompts != pt["prompts_per_step"]:
        differs["prompts_per_step"] = (
            f"{prompts} (the paper: {pt['prompts_per_step']} over {paper_processes} "
            f"processes, {pt['prompts_per_step'] / paper_processes:g} per process)"
        )
    if max_completion != pt["max_completion_length"]:
        differs["max_completion_length"] = f"{max_completion} (the paper: {pt['max_completion_length']})"
    if tiny:
        differs["use_cpu"] = "true (--tiny: a 2-layer model of the architecture, on CPU)"
    if world["config"]["vocab_size"] != 151936:
        differs["vocab_size"] = f"{world['config']['vocab_size']} (the tokenizer's; the real model: 151936)"
    return config, cell, differs


def estimates(config, cfg, world: dict) -> dict[str, Any]:
    """The memory estimate of the cell: as this run has it (no vLLM share), as the pipeline
    sized it (vLLM share reserved), and for the model actually built."""
    from sagc.pipeline.memory import Architecture, cell_estimate, estimate

    algo, shapes = cfg.resolved.algorithm, cfg.resolved.layout
    micro = shapes.max_micro_batch
    sized = cell_estimate(config, MODEL, algo, micro)
    run_config = config.model_copy(update={"device": config.device.model_copy(update={"use_vllm": False})})
    run = cell_estimate(run_config, MODEL, algo, micro)
    arch = Architecture.from_config(world["config"])
    built = estimate(
        arch,
        master_weights=cfg.device.master_weights,
        reference_model=algo.beta > 0,
        micro_batch=micro,
        tokens_per_row=cfg.train.max_prompt_length + cfg.train.max_completion_length,
        vllm_fraction=cfg.device.vllm_gpu_memory_utilization,
        card_gib=run.card_bytes / GIB,
        gradient_checkpointing=cfg.device.gradient_checkpointing,
        use_vllm=False,
    )
    parts = (
        "weights",
        "gradients",
        "optimizer",
        "autocast_copies",
        "reference_model",
        "activations",
        "vllm_reserve",
        "runtime",
    )
    return {
        "estimate_gib": _gib(run.total),
        "estimate_components_gib": {p: _gib(getattr(run, p)) for p in parts},
        "estimate_describe": run.describe(),
        "estimate_with_vllm_share_gib": _gib(sized.total),
        "estimate_with_vllm_share_fits": sized.fits,
        "estimate_this_model_gib": _gib(built.total),
        "estimate_micro_batch": micro,
        "estimate_tokens_per_row": run.tokens_per_row,
        "card_gib": round(run.card_bytes / GIB, 3),
        "params_by_estimator_this_model": arch.params,
    }


def layout_of(cfg) -> dict[str, Any]:
    algo, shapes = cfg.resolved.algorithm, cfg.resolved.layout
    return {
        "gradient_accumulation_steps": shapes.gradient_accumulation_steps,
        "steps_per_generation": shapes.steps_per_generation,
        "updates_per_rollout": shapes.updates_per_rollout,
        "per_device_train_batch_size": shapes.max_micro_batch,
        "minibatches": algo.minibatches,
        "by_group_size": {
            str(g): {"prompts": s.prompts, "rollouts": s.rollouts, "micro_batch": s.micro_batch}
            for g, s in sorted(shapes.shapes.items())
        },
    }


# -- training -------------------------------------------------------------------------------


def train(cfg, *, on_gpu: bool) -> dict[str, Any]:
    """Build the trainer as the pipeline's job does and train, timing the steps, the
    checkpoint saves and (on a GPU) each step's peak memory."""
    import torch
    from transformers import TrainerCallback

    from sagc.train.run import build_trainer
    from sagc.train.trainer import SAGCGRPOTrainer

    saves: list[dict] = []
    step_peaks: dict[int, dict] = {}

    class TimedSaves(SAGCGRPOTrainer):
        def _save_checkpoint(self, model, trial):
            t0 = time.perf_counter()
            super()._save_checkpoint(model, trial)
            if on_gpu:
                torch.cuda.synchronize()
            save_s = time.perf_counter() - t0
            folder = Path(self._get_output_dir(trial=trial)) / f"checkpoint-{self.state.global_step}"
            saves.append(
                {
                    "name": folder.name,
                    "update": self.state.global_step,
                    "step": self.step,
                    "save_s": save_s,
                    "bytes": _folder_bytes(folder) if folder.is_dir() else 0,
                }
            )

    class StepPeaks(TrainerCallback):
        """Peak memory of every rollout step (reset at its end; runs before the save)."""

        def __init__(self, updates_per_step: int) -> None:
            self.u = updates_per_step

        def on_step_end(self, args, state, control, **kwargs):
            if on_gpu and state.global_step % self.u == 0:
                step_peaks[state.global_step // self.u] = {
                    "peak_allocated_gib": _gib(torch.cuda.max_memory_allocated()),
                    "peak_reserved_gib": _gib(torch.cuda.max_memory_reserved()),
                }
                torch.cuda.reset_peak_memory_stats()

    if cfg.train.torch_threads is not None:
        torch.set_num_threads(cfg.train.torch_threads)
    shapes = cfg.resolved.layout
    t0 = time.perf_counter()
    trainer = build_trainer(cfg, callbacks=[StepPeaks(shapes.updates_per_rollout)], trainer_cls=TimedSaves)
    build_s = time.perf_counter() - t0
    args = trainer.args
    trainer_args = {
        k: getattr(args, k)
        for k in (
            "per_device_train_batch_size",
            "gradient_accumulation_steps",
            "steps_per_generation",
            "num_generations",
            "max_steps",
            "save_steps",
            "bf16",
            "gradient_checkpointing",
            "use_vllm",
            "max_completion_length",
            "beta",
            "loss_type",
        )
    }
    trainer_args["weights_dtype"] = str(next(trainer.model.parameters()).dtype).replace("torch.", "")
    if on_gpu:
        torch.cuda.synchronize()
        loaded = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    trainer.train()
    if on_gpu:
        torch.cuda.synchronize()
    train_s = time.perf_counter() - t0
    memory: dict[str, Any]
    if on_gpu:
        peaks = [p["peak_allocated_gib"] for p in step_peaks.values()] + [_gib(torch.cuda.max_memory_allocated())]
        reserved = [p["peak_reserved_gib"] for p in step_peaks.values()] + [_gib(torch.cuda.max_memory_reserved())]
        memory = {
            "measured": "torch.cuda.max_memory_allocated (reset before training)",
            "peak_allocated_gib": max(peaks),
            "peak_reserved_gib": max(reserved),
            "allocated_before_training_gib": _gib(loaded),
        }
    else:
        memory = {"measured": "not measured: no CUDA (CPU run)", "peak_allocated_gib": None, "peak_reserved_gib": None}
    # ru_maxrss: KiB on Linux
    memory["max_rss_gib"] = _gib(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    steps = []
    for s in trainer.steps:
        flat = [n for g in s.lengths for n in g]
        steps.append(
            {
                "step": s.step,
                "group_size": s.group_size,
                "step_s": s.step_s,
                "rollout_s": s.rollout_s,
                "post_s": s.post_s,
                "prompts": s.prompts,
                "rollouts": s.rollouts,
                "length_max": max(flat) if flat else 0,
                "length_mean": sum(flat) / len(flat) if flat else 0.0,
                "truncated_frac": sum(s.truncated) / len(s.truncated) if s.truncated else 0.0,
                "straggler": bool(s.straggler),
                "loss": float(sum(s.losses) / len(s.losses)) if s.losses else None,
                **step_peaks.get(s.step, {}),
            }
        )
    return {
        "trainer_args": trainer_args,
        "memory": memory,
        "steps": steps,
        "checkpoints": saves,
        "trainer_build_s": build_s,
        "train_s": train_s,
        "global_step": trainer.state.global_step,
    }


# -- reporting ------------------------------------------------------------------------------


def device_info(on_gpu: bool) -> dict[str, Any]:
    import torch
    import transformers
    import trl

    info = {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "trl": trl.__version__,
        "python": platform.python_version(),
        "cuda": torch.version.cuda,
    }
    if on_gpu:
        props = torch.cuda.get_device_properties(0)
        info.update(
            name=torch.cuda.get_device_name(0),
            total_memory_gib=round(props.total_memory / GIB, 3),
            capability=f"{props.major}.{props.minor}",
        )
    else:
        info.update(
            name=f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)", total_memory_gib=None
        )
    return info


def _yes(flag: bool) -> str:
    return "true" if flag else "false"


def report_lines(r: dict[str, Any]) -> list[str]:
    d, m, w, lay = r["device"], r["memory"], r["model"], r["layout"]
    lines = [
        f"device: {d['name']}" + (f", {d['total_memory_gib']} GiB" if d["total_memory_gib"] else ""),
        f"versions: torch {d['torch']}, transformers {d['transformers']}, trl {d['trl']}, "
        f"python {d['python']}, cuda {d['cuda']}",
        f"cell: {r['cell']['id']} (configs/paper.yaml, resolved by the pipeline for {m['card_gib']} GiB and 1 process)",
        f"model: random-init {w['architecture']} {'(tiny)' if r['mode'] == 'tiny' else '(full size)'}, "
        f"{w['params']:,} parameters (estimator's formula: {w['params_by_estimator']:,}), "
        f"vocab {w['vocab_size']:,} (tokenizer {w['tokenizer_size']:,}; the real vocab is 151,936"
        + ("" if w["vocab_size"] == 151936 else ", so the embedding is smaller than the real model's")
        + ")",
    ]
    lines.append("differs from the paper: " + "; ".join(f"{k} {v}" for k, v in r["differs_from_paper"].items()))
    s = r["settings"]
    lines.append(
        f"kept from the paper: bf16 {_yes(s['bf16'])}, master weights {s['master_weights']}, gradient "
        f"checkpointing {_yes(s['gradient_checkpointing'])}, max prompt {s['max_prompt_length']} tokens, "
        f"stop {s['stop']}"
    )
    per_g = ", ".join(
        f"G={g}: {v['rollouts']} rollouts, micro-batch {v['micro_batch']}" for g, v in lay["by_group_size"].items()
    )
    lines.append(
        f"layout: gradient_accumulation_steps {lay['gradient_accumulation_steps']}, steps_per_generation "
        f"{lay['steps_per_generation']}, per-device batch {lay['per_device_train_batch_size']}; {per_g}"
    )
    ta = r["trainer_args"]
    lines.append(
        f"trainer args: per_device_train_batch_size {ta['per_device_train_batch_size']}, "
        f"gradient_accumulation_steps {ta['gradient_accumulation_steps']}, bf16 {_yes(ta['bf16'])}, "
        f"gradient_checkpointing {_yes(ta['gradient_checkpointing'])}, weights {ta['weights_dtype']}"
    )
    for st in r["steps"]:
        peak = f", peak {st['peak_allocated_gib']} GiB" if st.get("peak_allocated_gib") is not None else ""
        lines.append(
            f"step {st['step']}: G={st['group_size']}, {st['rollouts']} rollouts, step {st['step_s']:.2f} s, "
            f"rollout {st['rollout_s']:.2f} s, longest {st['length_max']} tokens, truncated "
            f"{st['truncated_frac']:.2f}{peak}"
        )
    for c in r["checkpoints"]:
        lines.append(f"checkpoint {c['name']}: saved in {c['save_s']:.2f} s, {c['bytes'] / GIB:.3f} GiB on disk")
    if m["peak_allocated_gib"] is not None:
        lines.append(
            f"peak GPU memory: {m['peak_allocated_gib']} GiB allocated, {m['peak_reserved_gib']} GiB "
            f"reserved ({m['measured']})"
        )
    else:
        lines.append(
            f"peak GPU memory: {m['measured']}; max RSS of the process {m['max_rss_gib']} GiB "
            "(CPU memory, not comparable to the estimate)"
        )
    lines.append(
        f"memory estimate (sagc.pipeline.memory.cell_estimate, full-size Qwen2.5-3B, no vLLM share as "
        f"run): {m['estimate_gib']} GiB; with the paper's vLLM share (what sized the micro-batch): "
        f"{m['estimate_with_vllm_share_gib']} GiB of {m['card_gib']} GiB; for the model built here: "
        f"{m['estimate_this_model_gib']} GiB"
    )
    lines.append(f"  {m['estimate_describe']}")
    if m["peak_allocated_gib"] is not None and m["estimate_this_model_gib"]:
        lines.append(
            f"peak / estimate for the model built here: {m['peak_allocated_gib'] / m['estimate_this_model_gib']:.2f}"
        )
    t = r["timings"]
    lines.append(
        f"times: world {t['world_build_s']:.1f} s, resolve {t['resolve_s']:.1f} s, trainer build "
        f"{t['trainer_build_s']:.1f} s, training {t['train_s']:.1f} s ({r['steps_trained']} steps), "
        f"total {t['total_s']:.1f} s"
    )
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tiny", action="store_true", help="the same path at tiny size on CPU (tested here)")
    ap.add_argument(
        "--out",
        default=str(DEFAULT_OUT),
        help="output folder, emptied first if this check made it (default: %(default)s)",
    )
    ap.add_argument("--steps", type=int, help="training steps (default: 2)")
    ap.add_argument("--save-steps", type=int, help="checkpoint every N steps (default: the last step only)")
    ap.add_argument("--prompts", type=int, help="prompts per step P (default: 8 on the GPU, 2 with --tiny)")
    ap.add_argument(
        "--max-completion",
        type=int,
        help="max completion tokens (default: 512 on the GPU, 16 with --tiny; the paper: 4096)",
    )
    ap.add_argument("--real-vocab", action="store_true", help="pad the model's vocabulary to the real 151,936 rows")
    ap.add_argument(
        "--card-gib",
        type=float,
        help="card memory the cell is sized for (default: this GPU's; configs/paper.yaml's with --tiny)",
    )
    ap.add_argument(
        "--wheels-command",
        action="store_true",
        help="print the `pip download` lines of the wheels the GPU machine needs, and exit",
    )
    args = ap.parse_args(argv)
    if args.wheels_command:
        print("\n".join(wheels_commands()))
        return 0
    t_start = time.perf_counter()
    mode = "tiny" if args.tiny else "gpu"
    defaults = DEFAULTS[mode]
    missing = missing_packages()
    if missing:
        print(
            f"error: missing Python packages: {', '.join(missing)} (carry them as wheels: see the header of "
            f"{Path(__file__).name})",
            file=sys.stderr,
        )
        return 2
    for key, value in (
        ("WANDB_MODE", "disabled"),
        ("HF_HUB_OFFLINE", "1"),
        ("HF_DATASETS_OFFLINE", "1"),
        ("TRANSFORMERS_OFFLINE", "1"),
        ("WANDB_X_DISABLE_STATS", "true"),
        ("TOKENIZERS_PARALLELISM", "false"),
    ):
        os.environ.setdefault(key, value)
    import torch
    import yaml

    on_gpu = not args.tiny
    if on_gpu and not torch.cuda.is_available():
        print("error: no CUDA device (torch.cuda.is_available() is false); on CPU run it with --tiny", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    for noisy in ("httpx", "datasets", "transformers", "accelerate"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    out = outdir.prepare_out(Path(args.out).resolve(), MARKER, "benchmarks/gpu_check.py")
    os.chdir(REPO)  # the pipeline's config check reads repository paths
    steps = args.steps or defaults["steps"]
    prompts = args.prompts or defaults["prompts"]
    max_completion = args.max_completion or defaults["max_completion"]
    save_steps = args.save_steps or steps
    if args.card_gib is not None:
        card = args.card_gib
    elif on_gpu:
        card = torch.cuda.get_device_properties(0).total_memory / GIB
    else:
        card = float(yaml.safe_load(PAPER_CONFIG.read_text())["device"]["gpu_memory_gib"])

    print(f"building the local world in {out / 'world'} ({mode})", flush=True)
    t0 = time.perf_counter()
    world = build_world(
        out / "world", tiny=args.tiny, real_vocab=args.real_vocab, n_rows=max(64, 8 * prompts), on_gpu=on_gpu
    )
    world_s = time.perf_counter() - t0
    print(
        f"model {world['architecture']}: {world['params']:,} parameters, {world['bytes'] / GIB:.2f} GiB saved "
        f"(init {world['init_s']:.1f} s, save {world['save_s']:.1f} s)",
        flush=True,
    )

    from sagc.train.config import TrainConfig

    t0 = time.perf_counter()
    config, cell, differs = resolve_cell(
        world,
        out,
        tiny=args.tiny,
        card_gib=card,
        steps=steps,
        prompts=prompts,
        max_completion=max_completion,
        save_steps=save_steps,
        torch_threads=defaults["torch_threads"],
        real_vocab=args.real_vocab,
    )
    cfg = TrainConfig.from_dict(cell, check_vllm=False)
    resolve_s = time.perf_counter() - t0
    cell_file = out / "cell.json"
    cell_file.write_text(json.dumps(cell, indent=1) + "\n")  # `python -m sagc.train --config` reads it
    mem_est = estimates(config, cfg, world)
    layout = layout_of(cfg)
    print(
        f"cell {cfg.cell.id} resolved (written to {cell_file}): gradient_accumulation_steps "
        f"{layout['gradient_accumulation_steps']}, per-device batch {layout['per_device_train_batch_size']}; "
        f"estimate {mem_est['estimate_gib']} GiB without the vLLM share",
        flush=True,
    )

    trained = train(cfg, on_gpu=on_gpu)
    result = {
        "mode": mode,
        "device": device_info(on_gpu),
        "cell": {
            "id": cfg.cell.id,
            "model": MODEL,
            "algorithm": ALGORITHM,
            "sizing": SIZING,
            "candidates": list(cfg.sizing.group_sizes()),
            "cell_file": str(cell_file),
        },
        "settings": {
            "steps": cfg.train.steps,
            "save_steps": cfg.train.save_steps,
            "prompts_per_step": cfg.train.prompts_per_step,
            "max_prompt_length": cfg.train.max_prompt_length,
            "max_completion_length": cfg.train.max_completion_length,
            "bf16": cfg.device.bf16,
            "master_weights": cfg.device.master_weights,
            "gradient_checkpointing": cfg.device.gradient_checkpointing,
            "use_vllm": cfg.device.use_vllm,
            "use_cpu": cfg.device.use_cpu,
            "processes": cfg.launch.processes,
            "stop": list(cfg.train.stop),
            "torch_threads": cfg.train.torch_threads,
        },
        "differs_from_paper": differs,
        "model": {
            "architecture": world["architecture"],
            **world["config"],
            "tokenizer_size": world["tokenizer_size"],
            "real_vocab_size": 151936,
            "params": world["params"],
            "params_by_estimator": mem_est.pop("params_by_estimator_this_model"),
            "full_size": not args.tiny,
            "saved_bytes": world["bytes"],
            "dir": world["model_dir"],
        },
        "layout": layout,
        "trainer_args": trained["trainer_args"],
        "memory": {**trained["memory"], **mem_est},
        "steps": trained["steps"],
        "steps_trained": len(trained["steps"]),
        "updates": trained["global_step"],
        "checkpoints": trained["checkpoints"],
        "timings": {
            "world_build_s": world_s,
            "model_init_s": world["init_s"],
            "model_save_s": world["save_s"],
            "resolve_s": resolve_s,
            "trainer_build_s": trained["trainer_build_s"],
            "train_s": trained["train_s"],
            "total_s": time.perf_counter() - t_start,
        },
    }
    (out / RESULT_FILE).write_text(json.dumps(result, indent=1) + "\n")
    print()
    for line in report_lines(result):
        print(line)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
