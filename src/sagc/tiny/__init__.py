"""The embedded offline tiny world: task, tokenizer, tiny Qwen2/Llama base models.

Nothing here is downloaded: data, tokenizer and both base models are built from code and a
seed by ``python -m sagc.tiny {data,tokenizer,base-model,measure}`` (see ``cli.py``). The
rewards it is scored with are the paper's, in ``sagc.rewards``. The public API is
``_EXPORTS`` below, imported lazily so ``import sagc.tiny`` is cheap; the world itself:
src/sagc/tiny/README.md.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "TaskParams": "task", "generate_splits": "task", "write_splits": "task",
    "load_split": "task", "SPLITS": "task", "Problem": "task", "render_completion": "task",
    "behaviour_of": "task", "BEHAVIOURS": "task",
    "train_tokenizer": "tokenizer", "save_tokenizer": "tokenizer", "load_tokenizer": "tokenizer",
    "ModelSize": "models", "build_model": "models", "save_model": "models",
    "load_model": "models", "MODEL_NAMES": "models",
    "WarmStartParams": "warmstart", "warm_start": "warmstart",
    "build_data": "build", "build_tokenizer": "build", "build_base_model": "build",
    "measure_group_sizes": "measure", "accuracy": "measure", "SampleParams": "measure",
    "DEFAULT_TAU": "defaults", "DEFAULT_MAX_COMPLETION_LENGTH": "defaults",
    "DEFAULT_PROMPTS_PER_STEP": "defaults", "DEFAULT_EVAL_MAX_NEW_TOKENS": "defaults",
    "DEFAULT_TEMPERATURE": "defaults",
}  # fmt: skip

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"sagc.tiny.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'sagc.tiny' has no attribute {name!r}")
