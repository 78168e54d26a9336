"""The environment the workflow gives its jobs: offline switches and the tiny world's
pinned CPU instruction set (the same world on every AVX2 machine)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from sagc.pipeline.env import CPU_ISA_ENV, configure_job_environment

PINS = ("ATEN_CPU_CAPABILITY", "MKL_CBWR")


@pytest.fixture
def clean_env(monkeypatch):
    for key in PINS + ("WANDB_MODE",):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("PYTHONPATH", "")
    return monkeypatch


def test_tiny_world_pins_torch_and_mkl(clean_env, tmp_path):
    configure_job_environment(str(tmp_path), str(tmp_path / "results"), "offline", "avx2")
    assert (os.environ["ATEN_CPU_CAPABILITY"], os.environ["MKL_CBWR"]) == ("avx2", "AVX2")


def test_no_pin_for_the_hub_world_and_the_user_wins(clean_env, tmp_path):
    configure_job_environment(str(tmp_path), str(tmp_path / "results"), "offline", None)
    assert not any(k in os.environ for k in PINS)
    clean_env.setenv("ATEN_CPU_CAPABILITY", "default")
    configure_job_environment(str(tmp_path), str(tmp_path / "results"), "offline", "avx2")
    assert os.environ["ATEN_CPU_CAPABILITY"] == "default" and os.environ["MKL_CBWR"] == "AVX2"


@pytest.mark.parametrize("isa, expected", [("avx2", "AVX2"), ("default", "DEFAULT")])
def test_torch_computes_with_the_pinned_instruction_set(isa, expected):
    """The variable does what the pin relies on: a fresh torch dispatches to that level
    (on this x86-64 CI machine, which has AVX2)."""
    env = {**os.environ, **CPU_ISA_ENV[isa]}
    out = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.backends.cpu.get_cpu_capability())"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.strip()
    assert out == expected
