"""Run one training cell: ``python -m sagc.train --config CELL.json`` (JSON or YAML).

The steps, preemption and the outputs: docs/trainer.md, "Running one cell".
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import warnings
from pathlib import Path
from typing import Any

from sagc import tokenizers
from sagc.io import atomic_write_json, read_jsonl
from sagc.metrics import CELL_KEYS, COST, in_second_half
from sagc.ports import free_port
from sagc.prompts import PromptStream
from sagc.tokenizers import save_tokenizer
from sagc.trace import write_trace
from sagc.train.checkpoint import checkpoint_complete, config_fingerprint, resume_point
from sagc.train.config import TrainConfig, load_config
from sagc.train.presets import grpo_config_kwargs
from sagc.train.rewards import build_reward_funcs
from sagc.train.wandb_log import StepLogger, run_id_for

log = logging.getLogger("sagc.train")

DONE_FILE = "done.json"
#: Exit status of a run stopped by a signal after its checkpoint (EX_TEMPFAIL: the rerun resumes).
PREEMPTED_EXIT = 75
#: The signals that end a run at the next step boundary, checkpointed.
STOP_SIGNALS = ("SIGTERM", "SIGUSR1")
LENGTHS_FILE = "lengths.jsonl"


# -- environment and inputs ---------------------------------------------------------------


def set_job_env(cfg: TrainConfig) -> Path:
    """Per-cell environment: W&B mode and directory, no stats, quiet tokenizers."""
    wandb_dir = Path(cfg.wandb.dir) if cfg.wandb.dir else Path(cfg.output_dir) / "wandb"
    os.environ["WANDB_MODE"] = cfg.wandb.mode
    os.environ["WANDB_DIR"] = str(wandb_dir)
    os.environ.setdefault("WANDB_X_DISABLE_STATS", "true")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("MPLCONFIGDIR", str(Path(cfg.output_dir) / ".mplconfig"))
    if cfg.device.use_vllm and "MASTER_PORT" not in os.environ:
        # TRL's colocated engine takes the first free port of a fixed list: two cells started
        # together would both take 29500.
        os.environ["MASTER_PORT"] = str(free_port())
    return wandb_dir


def check_model_source(path: str) -> None:
    """A local model folder, or a hub id that is cached when running offline."""
    p = Path(path)
    looks_local = p.is_absolute() or path.startswith(".") or path.count("/") != 1 or p.exists()
    if looks_local:
        if not (p / "config.json").is_file():
            raise ValueError(f"model.path {path} is not a model folder (no config.json)")
        return
    from huggingface_hub import constants, try_to_load_from_cache

    offline = constants.HF_HUB_OFFLINE or os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
    if offline and not isinstance(try_to_load_from_cache(path, "config.json"), str):
        raise ValueError(f"model {path} is not in the local cache; run with network or set HF_HOME")


def load_prompts(cfg: TrainConfig, tokenizer):
    """The training JSONL as a ``datasets.Dataset``; prompts longer than
    ``train.max_prompt_length`` tokens are left out (counted in done.json)."""
    from datasets import Dataset

    path = Path(cfg.data.train)
    if not path.is_file():
        raise ValueError(f"data.train file {path} does not exist")
    rows = []
    for i, row in read_jsonl(path):
        prompt = row.get(cfg.data.prompt_column) if isinstance(row, dict) else None
        if not isinstance(prompt, str) or not prompt:
            raise ValueError(f"{path}:{i}: no string column {cfg.data.prompt_column!r}")
        if cfg.data.prompt_column != "prompt":
            row["prompt"] = row.pop(cfg.data.prompt_column)
        rows.append(row)
    if not rows:
        raise ValueError(f"data.train file {path} holds no rows")
    if "correctness" in cfg.rewards and any("answer" not in r for r in rows):
        raise ValueError(f"{path}: the correctness reward needs an 'answer' column in every row")
    lengths = [len(ids) for ids in tokenizer([r["prompt"] for r in rows])["input_ids"]]
    kept = [r for r, n in zip(rows, lengths) if n <= cfg.train.max_prompt_length]
    if not kept:
        raise ValueError(
            f"{path}: every prompt is longer than train.max_prompt_length={cfg.train.max_prompt_length} tokens"
        )
    if len(kept) < len(rows):
        warnings.warn(
            f"{len(rows) - len(kept)} of {len(rows)} prompts exceed train.max_prompt_length="
            f"{cfg.train.max_prompt_length} tokens and are left out",
            RuntimeWarning,
            stacklevel=2,
        )
    return Dataset.from_list(kept), len(rows) - len(kept)


# -- the run ------------------------------------------------------------------------------


def build_trainer(
    cfg: TrainConfig,
    *,
    callbacks: list | None = None,
    step_logger: Any = None,
    reward_funcs: list | None = None,
    reward_weights: list[float] | None = None,
    trainer_cls: type | None = None,
):
    """Everything but ``train()``: tokenizer, data, rewards, sizer and the trainer.

    ``reward_funcs`` / ``reward_weights`` replace the registry's rewards (the preset's
    overlong punishment is still appended); ``trainer_cls`` a ``SAGCGRPOTrainer`` subclass.
    """
    from trl import GRPOConfig

    from sagc.train.precision import optimizer_cls_and_kwargs
    from sagc.train.trainer import SAGCGRPOTrainer, SAGCTrainingArguments

    check_model_source(cfg.model.path)
    tokenizer = tokenizers.load_tokenizer(
        cfg.model.tokenizer or cfg.model.path,
        revision=cfg.model.revision,
        trust_remote_code=cfg.model.trust_remote_code,
        padding_side="left",
    )
    dataset, n_filtered = load_prompts(cfg, tokenizer)
    algo, shapes = cfg.resolved.algorithm, cfg.resolved.layout
    args = GRPOConfig(**grpo_config_kwargs(cfg, algo, shapes))
    funcs, weights, _names = build_reward_funcs(cfg.rewards, algo, cfg.train.max_completion_length)
    if reward_funcs is not None:
        n_registry = len(cfg.rewards)
        funcs = list(reward_funcs) + funcs[n_registry:]
        weights = list(reward_weights or [1.0] * len(reward_funcs)) + weights[n_registry:]
    args.reward_weights = weights
    sizer = cfg.sizing.build(seed=cfg.train.seed)
    # The policy's prompt order over the plain stream (tail batching reads the tokenized prompts).
    stream = sizer.prompt_stream(
        PromptStream(len(dataset), seed=args.seed, shuffle=args.shuffle_dataset),
        token_ids=lambda: tokenizer(list(dataset["prompt"]), add_special_tokens=False)["input_ids"],
    )
    trainer = (trainer_cls or SAGCGRPOTrainer)(
        model=cfg.model.path,
        reward_funcs=funcs,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        group_sizer=sizer,
        sagc_args=SAGCTrainingArguments(
            layout=shapes,
            dynamic_sampling=algo.dynamic_sampling,
            ds_max_rounds=algo.ds_max_rounds,
            stop=cfg.resolved.stops or cfg.train.stop,
        ),
        step_logger=step_logger,
        callbacks=callbacks,
        prompt_stream=stream,
    )
    trainer.optimizer_cls_and_kwargs = optimizer_cls_and_kwargs(cfg.device, args)
    trainer.prompts_filtered = n_filtered
    return trainer


def summarize_history(history: list[dict]) -> dict:
    """Straggler rate, mean G, rollout share of step time, cost totals, ... of a finished run."""
    import numpy as np

    if not history:
        return {"steps": 0}
    step_s = float(sum(h["step_s"] for h in history))
    rollout_s = float(sum(h["rollout_s"] for h in history))
    second_half = [h for h in history if in_second_half(h["step"], history[-1]["step"])]
    return {
        "steps": len(history),
        "wallclock_s": float(history[-1]["wallclock_s"]),
        "cpu_s": float(history[-1]["cpu_total_s"]),
        **{name: int(sum(h[name] for h in history)) for name in COST},
        "straggler_rate": float(np.mean([h["straggler"] for h in history])),
        "straggler_rate_second_half": float(np.mean([h["straggler"] for h in second_half])),
        "mean_group_size": float(np.mean([h["group_size"] for h in history])),
        "rollout_share": rollout_s / step_s if step_s > 0 else float("nan"),
        "reward_mean": float(np.nanmean([h["reward_mean"] for h in history])),
        "reward_mean_last5": float(np.nanmean([h["reward_mean"] for h in history[-5:]])),
        "group_sizes": [int(h["group_size"]) for h in history],
        "stragglers": [bool(h["straggler"]) for h in history],
        "long_rounds": int(sum(bool(h.get("long_round")) for h in history)),  # tail batching's
    }


class Preempted(Exception):
    """The run stopped on a signal after checkpointing its last finished step."""


def check_launch(cfg: TrainConfig) -> None:
    """The processes this job was started with are the ones the cell was laid out for."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world != cfg.launch.processes:
        raise ValueError(
            f"launch: the cell is laid out for {cfg.launch.processes} processes (launch.nodes x "
            f"launch.processes_per_node = {cfg.launch.nodes} x {cfg.launch.processes_per_node}) but this "
            f"job has {world}; start it with `accelerate launch --num_processes {cfg.launch.processes}` "
            "(the pipeline's train rule does) or change the launch section"
        )


@contextlib.contextmanager
def stop_on_signals(trainer):
    """While training: SIGTERM/SIGUSR1 ask ``trainer`` to stop at the step boundary (a repeated
    signal asks again, no more: under SLURM a rank gets the scheduler's and the launcher's)."""
    import signal

    def handler(signum, frame):
        log.warning("got %s: stopping after the running step", signal.Signals(signum).name)
        trainer.request_stop(signum)

    sigs = [getattr(signal, name) for name in STOP_SIGNALS]
    previous = {s: signal.signal(s, handler) for s in sigs}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def run_cell(cfg: TrainConfig, *, callbacks: list | None = None, trainer_cls: type | None = None) -> dict:
    """Train one cell (resuming an interrupted run) and return done.json's content (``{}``
    on the ranks other than 0); ``Preempted`` when a stop signal ended it after a
    checkpoint. ``trainer_cls``: a ``SAGCGRPOTrainer`` subclass (``build_trainer``)."""
    out = Path(cfg.output_dir)
    done_path = out / DONE_FILE
    fingerprint = config_fingerprint(cfg)
    check_launch(cfg)
    main = int(os.environ.get("RANK", "0")) == 0
    if done_path.is_file():
        done = json.loads(done_path.read_text())
        if done.get("config_fingerprint") == fingerprint:
            log.info("%s exists: cell %s is finished", done_path, cfg.cell.id)
            return done
    wandb_dir = set_job_env(cfg)
    if cfg.train.torch_threads is not None:
        import torch

        torch.set_num_threads(cfg.train.torch_threads)

    run_config = {**{k: getattr(cfg.cell, k) for k in CELL_KEYS}, "cell_id": cfg.cell.id, "config": cfg.to_dict()}
    # Load everything before W&B starts, so a bad cell leaves no run behind.
    trainer = build_trainer(cfg, callbacks=callbacks, trainer_cls=trainer_cls)
    checkpoint = None
    if main:
        if done_path.is_file():
            log.warning("%s was written for another config of cell %s: training again", done_path, cfg.cell.id)
            done_path.unlink()
        out.mkdir(parents=True, exist_ok=True)
        leftovers = [out / LENGTHS_FILE] + ([wandb_dir] if wandb_dir.resolve().is_relative_to(out.resolve()) else [])
        checkpoint = resume_point(out, fingerprint, cfg.cell.id, leftovers)
    if trainer.accelerator.num_processes > 1:
        from accelerate.utils import broadcast_object_list

        checkpoint = broadcast_object_list([checkpoint])[0]  # rank 0's
    logger = None
    if main:
        logger = StepLogger(
            mode=cfg.wandb.mode, project=cfg.wandb.project, entity=cfg.wandb.entity,
            group=cfg.wandb.group, name=cfg.wandb.name or cfg.cell.id,
            run_id=run_id_for(out, resuming=checkpoint is not None), directory=wandb_dir, config=run_config,
        )  # fmt: skip
        trainer.step_logger = logger
    try:
        with stop_on_signals(trainer):
            trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
        if trainer.preempted:
            raise Preempted(
                f"cell {cfg.cell.id}: stopped by signal {trainer.stop_signal} after step "
                f"{trainer.step} (checkpointed); rerun the job to resume"
            )
        final = out / "final"
        trainer.save_model(str(final))  # every rank: a sharded model is gathered
        if not main:
            return {}
        save_tokenizer(trainer.processing_class, final, like=cfg.model.tokenizer or cfg.model.path)
        write_trace(out / LENGTHS_FILE, [s.trace_step() for s in trainer.steps])
        history = trainer.history
        done = {
            "cell": cfg.cell.id,
            "config_fingerprint": fingerprint,
            **summarize_history(history),
            "updates": trainer.state.global_step,
            "updates_per_step": trainer.updates_per_rollout,
            "resumed_from": str(checkpoint) if checkpoint else None,
            "prompts_filtered": trainer.prompts_filtered,
            "final_dir": str(final),
            "history": history,
        }
        atomic_write_json(done_path, done, indent=1)
    except Preempted:
        if logger is not None:
            logger.finish(exit_code=PREEMPTED_EXIT)
        checkpoint_complete(trainer)
        raise
    except BaseException:
        if logger is not None:
            logger.finish(exit_code=1)
        raise
    if logger is not None:
        logger.finish()
    return done


def run_job(cfg: TrainConfig) -> int:
    """Train a valid cell and print done.json's summary line; 0 on success, 2 on a ``ValueError``."""
    # An inherited wandb-core service would still hold a killed attempt's run id.
    os.environ.pop("WANDB_SERVICE", None)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    try:
        done = run_cell(cfg)
    except ValueError as e:
        print(f"error: {cfg.cell.id}: {e}", file=sys.stderr)
        return 2
    except Preempted as e:
        print(f"preempted: {e}", file=sys.stderr)
        return PREEMPTED_EXIT
    if done:  # rank 0's
        print(json.dumps({k: v for k, v in done.items() if k != "history"}))
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m sagc.train --config CELL``: validate the cell file, then ``run_job``."""
    parser = argparse.ArgumentParser(prog="python -m sagc.train", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="cell config (JSON or YAML)")
    ns = parser.parse_args(argv)
    try:
        cfg = load_config(ns.config)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return run_job(cfg)
