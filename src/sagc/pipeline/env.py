"""The environment every job of the workflow inherits (set once when the Snakefile loads)."""

from __future__ import annotations

import os

#: ``tiny.cpu_isa`` -> the variables that pin torch's (ATen) and MKL's kernel dispatch.
CPU_ISA_ENV = {
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2"},
    "default": {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"},
}


def configure_job_environment(basedir: str, root: str, wandb_mode: str, cpu_isa: str | None = None) -> None:
    """Jobs never phone home, import ``sagc`` from this checkout, and compute with ``cpu_isa``
    (docs/replication.md). Values already exported win; PYTHONPATH is extended."""
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
