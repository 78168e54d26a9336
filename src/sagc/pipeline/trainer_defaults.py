"""A pipeline config's ``train`` and ``device`` keys with the trainer's defaults: a key the
config leaves out takes ``sagc.train.config``'s ``TrainSection`` / ``DeviceSection`` default
(the one place that states it), so the workflow's rules, the launch and the memory plan read
the value a cell trains with."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sagc.train.config import DeviceSection, TrainSection


def train_setting(config: Mapping[str, Any], key: str) -> Any:
    """A ``train`` key of the pipeline config, or the trainer's default for it."""
    return config["train"].get(key, TrainSection.default(key))


def device_setting(config: Mapping[str, Any], key: str) -> Any:
    """A ``device`` key of the pipeline config, or the trainer's default for it."""
    return (config.get("device") or {}).get(key, DeviceSection.default(key))
