"""Whether this environment lets the Hugging Face libraries reach the hub, and the prefix
that clears the offline switches for the staging commands (the only jobs that reach it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

HUB_OFFLINE_FLAGS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")
# Shell prefix of the staging rules (and of a staging command run by hand in a job shell).
HUB_ACCESS_PREFIX = "env " + " ".join(f"-u {flag}" for flag in HUB_OFFLINE_FLAGS)
_TRUE = {"1", "ON", "YES", "TRUE"}


def offline_switches(environ: Mapping[str, str] | None = None) -> list[str]:
    """The variables that switch the hub off here (``["TRANSFORMERS_OFFLINE=1 ..."]``), read as
    huggingface_hub reads them (``TRANSFORMERS_OFFLINE`` when ``HF_HUB_OFFLINE`` is unset or
    empty). Empty: nothing blocks the hub."""
    env = os.environ if environ is None else environ
    found = []
    if env.get("HF_DATASETS_OFFLINE", "").upper() in _TRUE:
        found.append(f"HF_DATASETS_OFFLINE={env['HF_DATASETS_OFFLINE']}")
    hub_var = "HF_HUB_OFFLINE" if env.get("HF_HUB_OFFLINE") else "TRANSFORMERS_OFFLINE"
    if env.get(hub_var, "").upper() in _TRUE:
        why = " (huggingface_hub reads it as HF_HUB_OFFLINE)" if hub_var == "TRANSFORMERS_OFFLINE" else ""
        found.append(f"{hub_var}={env[hub_var]}{why}")
    return found


def hub_switched_off_reason(switches: list[str]) -> str:
    """Why staging did not reach the hub: a switch, not the network, and how to clear it."""
    return (
        f"the hub is switched off in this environment by {' and '.join(switches)}; the "
        f"staging rules clear these switches, and a staging command run by hand must too "
        f"(prefix it with `{HUB_ACCESS_PREFIX}`)"
    )
