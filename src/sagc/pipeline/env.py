"""The environment every job of the workflow inherits (set once when the Snakefile loads)."""

from __future__ import annotations

import os

#: ``tiny.cpu_isa`` -> the variables that pin torch's (ATen) and MKL's kernel dispatch.
CPU_ISA_ENV = {
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2"},
    "default": {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"},
}


def configure_job_environment(basedir: str, root: str, wandb_mode: str, cpu_isa: str | None = None) -> None:
    """Jobs never phone home: W&B writes offline run files unless the config says online,
    and the Hugging Face libraries read the local cache only (the hub world stages it
    first, in the one rule allowed to reach the network). Jobs import ``sagc`` from this
    checkout, also inside conda environments, which don't install it. With ``cpu_isa``
    (the tiny world's ``tiny.cpu_isa``) torch and MKL compute with that instruction set on
    every machine, so floating point and the world built from it are the same bit for bit.
    Values the user already exported win, except PYTHONPATH, which is extended."""
    defaults = {
        "WANDB_MODE": wandb_mode,
        "WANDB_X_DISABLE_STATS": "true",
        "WANDB_SILENT": "true",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "MPLCONFIGDIR": os.path.abspath(os.path.join(root, ".cache", "matplotlib")),
    }
    defaults.update(CPU_ISA_ENV.get(cpu_isa, {}))
    for key, value in defaults.items():
        os.environ.setdefault(key, value)
    src = os.path.join(os.path.abspath(basedir), "src")
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if src not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([src, *paths])
