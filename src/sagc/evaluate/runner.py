"""Evaluate one model on packaged tasks with ``lm_eval.simple_evaluate``, in this process and offline,
writing the files docs/evaluation.md lists (``summary.json`` last)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from sagc.evaluate.backends import make_hf_lm, make_vllm_lm, require_vllm, shutdown_vllm, vllm_model_args
from sagc.evaluate.config import EvalConfig
from sagc.evaluate.recorder import GenerationRecorder
from sagc.evaluate.summary import measure_samples, task_summary, validate_summary
from sagc.evaluate.taskcfg import max_gen_toks_of, write_run_tasks
from sagc.hub_switches import HUB_OFFLINE_FLAGS
from sagc.io import atomic_write_json, atomic_write_text
from sagc.tokenizers import load_tokenizer

OFFLINE_ENV = {flag: "1" for flag in HUB_OFFLINE_FLAGS}


@contextlib.contextmanager
def offline() -> Iterator[None]:
    """Hold the Hugging Face offline switches: in the environment, and in the module flags that
    ``huggingface_hub`` and ``datasets`` read once at import, where already imported."""
    saved_env = {k: os.environ.get(k) for k in OFFLINE_ENV}
    os.environ.update(OFFLINE_ENV)
    patched = []
    for mod_name, attrs in (
        ("huggingface_hub.constants", ("HF_HUB_OFFLINE",)),
        ("datasets.config", ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")),
    ):
        mod = sys.modules.get(mod_name)
        for attr in attrs:
            if mod is not None and hasattr(mod, attr):
                patched.append((mod, attr, getattr(mod, attr)))
                setattr(mod, attr, True)
    try:
        yield
    finally:
        for mod, attr, value in patched:
            setattr(mod, attr, value)
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run_evaluation(cfg: EvalConfig, *, lm=None, tokenizer=None) -> dict:
    """Run lm-eval for ``cfg`` and return the summary (also written to ``out/summary.json``).
    ``lm`` / ``tokenizer``: a built lm-eval model (tests) and the tokenizer that counts its output."""
    model_dir = cfg.model_folder()
    if not model_dir.is_dir():
        raise FileNotFoundError(f"model folder {model_dir} does not exist")
    if not Path(cfg.data_dir).is_dir():
        raise FileNotFoundError(f"data folder {cfg.data_dir} does not exist")
    if (lm is None) != (tokenizer is None):
        raise ValueError("pass lm and tokenizer together")
    if lm is None and cfg.backend == "vllm":
        require_vllm()  # before any task or model is loaded
    if cfg.threads is not None:
        import torch

        torch.set_num_threads(cfg.threads)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").unlink(missing_ok=True)  # never leave a stale summary behind
    configs = write_run_tasks(cfg.tasks, Path(cfg.data_dir), out / "tasks", cfg.generation)
    lm_out = out / "lm_eval"
    shutil.rmtree(lm_out, ignore_errors=True)  # one run's timestamped files, not a pile

    with offline():
        import lm_eval
        from lm_eval.loggers import EvaluationTracker
        from lm_eval.tasks import TaskManager

        recorder = GenerationRecorder()
        if lm is not None:
            model, model_args = lm, ""
            recorder = getattr(lm, "recorder", None)
        elif cfg.backend == "hf":
            model, tokenizer = make_hf_lm(model_dir, recorder, batch_size=cfg.batch_size, device=cfg.device)
            model.recorder = recorder
            model_args = f"pretrained={model_dir}"
        else:
            model_args = vllm_model_args(model_dir, cfg)
            model = make_vllm_lm(model_args, recorder)
            tokenizer = load_tokenizer(model_dir)

        task_manager = TaskManager(include_path=str(out / "tasks"), include_defaults=False)
        tracker = EvaluationTracker(output_path=str(lm_out))

        started = time.perf_counter()
        try:
            results = lm_eval.simple_evaluate(
                model=model,
                model_args=model_args,
                tasks=list(cfg.tasks),
                batch_size=cfg.batch_size,  # HF only: a built vLLM model batches itself ("auto")
                device=cfg.device if cfg.backend == "hf" else None,
                limit=cfg.limit,
                log_samples=True,
                evaluation_tracker=tracker,
                task_manager=task_manager,
                apply_chat_template=cfg.apply_chat_template,
                random_seed=cfg.seed,
                numpy_random_seed=cfg.seed,
                torch_random_seed=cfg.seed,
                fewshot_random_seed=cfg.seed,
            )
        finally:
            if cfg.backend == "vllm" and lm is None:
                shutdown_vllm(model)
        seconds = time.perf_counter() - started
        if results is None:
            raise RuntimeError("lm_eval.simple_evaluate returned no results (non-zero rank?)")
        samples = results.pop("samples")
        tracker.save_results_aggregated(results=results, samples=samples)
        for task in results["configs"]:
            tracker.save_results_samples(task_name=task, samples=samples[task])

    summary = {"model": str(model_dir), "cell": cfg.cell, "tasks": {}}
    length_rows = []
    for task in cfg.tasks:
        task_samples = sorted(samples[task], key=lambda s: s["doc_id"])
        rows = measure_samples(
            task_samples, recorder=recorder, tokenizer=tokenizer, max_gen_toks=max_gen_toks_of(configs[task])
        )
        n_docs = int(results["n-samples"][task]["effective"])
        summary["tasks"][task] = task_summary(results["results"][task], n_docs, rows, task_samples)
        length_rows += [{"task": task, **r} for r in rows]
    atomic_write_text(out / "output_lengths.jsonl", "".join(json.dumps(row) + "\n" for row in length_rows))
    atomic_write_json(
        out / "run_info.json",
        {
            "backend": cfg.backend,
            "model_args": model_args,
            "seconds": round(seconds, 3),
            "seed": cfg.seed,
            "limit": cfg.limit,
            "generation_overrides": cfg.generation.model_dump(),
            "generation_kwargs": {t: configs[t]["generation_kwargs"] for t in cfg.tasks},
            "repeats": {t: configs[t].get("repeats", 1) for t in cfg.tasks},
            "length_sources": sorted({r["source"] for r in length_rows}),
        },
    )
    atomic_write_json(out / "summary.json", validate_summary(summary))
    return summary
