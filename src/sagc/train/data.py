"""A training cell's inputs: its model source, its tokenizer and its prompts.

Each check fails in a second with the key and the file, before a model is loaded: a model
folder without ``config.json`` or a hub id missing from the offline cache, a training JSONL
that is absent, empty, lacks the prompt (or, for the correctness reward, the answer)
column, or whose every prompt is longer than ``train.max_prompt_length``.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

from sagc import tokenizers
from sagc.io import read_jsonl
from sagc.train.config import TrainConfig


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


def load_tokenizer(cfg: TrainConfig):
    """The cell's tokenizer (``sagc.tokenizers``), left-padded for generation."""
    return tokenizers.load_tokenizer(
        cfg.model.tokenizer or cfg.model.path,
        revision=cfg.model.revision,
        trust_remote_code=cfg.model.trust_remote_code,
        padding_side="left",
    )


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
