"""Checking a pipeline config before any job starts.

Two layers, both run when the Snakefile is parsed (so ``snakemake -n`` already fails):

1. the JSON schema ``workflow/schemas/config.schema.yaml`` (types, ranges, unknown keys),
   reported as ``<file>: config key 'train.steps': ...`` rather than jsonschema's dump;
2. what a schema cannot express: world-specific model keys, sizing names against the
   SAGC candidates, the SAGC hyper-parameters themselves (``SAGCConfig``), and every
   cell's trainer config (``sagc.train.config``), named by cell id.

Snakemake's own ``validate`` then fills in the schema's defaults.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

SCHEMA = Path("workflow/schemas/config.schema.yaml")


class ConfigError(ValueError):
    """A pipeline config is invalid; the message names the file and the key."""


def _dotted(path) -> str:
    return ".".join(str(p) for p in path) or "<top level>"


def check_schema(config: dict[str, Any], source: str, schema_path: Path | str = SCHEMA) -> None:
    import jsonschema

    schema = yaml.safe_load(Path(schema_path).read_text())
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    if not errors:
        return
    lines = []
    for err in errors:
        where = _dotted(err.absolute_path)
        if err.validator == "additionalProperties":
            allowed = sorted(err.schema.get("properties", {}))
            extra = sorted(set(err.instance) - set(allowed)) if isinstance(err.instance, dict) else []
            for key in extra:
                key_path = f"{where}.{key}" if err.absolute_path else key
                hint = f" (allowed: {', '.join(allowed)})" if allowed else ""
                lines.append(f"config key '{key_path}': unknown key{hint}")
        else:
            lines.append(f"config key '{where}': {err.message}")
    raise ConfigError(f"{source}: invalid config\n  " + "\n  ".join(lines))


def check_semantics(config: dict[str, Any], source: str) -> None:
    """Checks across keys; assumes the schema passed and defaults are filled."""
    from sagc.controller import SAGCConfig

    from sagc.pipeline.grid import check_name

    problems = []
    try:
        check_name(config["name"])
    except ValueError as err:
        problems.append(str(err))
    world = config["world"]
    for model, spec in config["models"].items():
        if world == "tiny" and "arch" not in spec:
            problems.append(f"config key 'models.{model}.arch': required for world 'tiny' (qwen2 or llama)")
        if world == "hub" and "hub_id" not in spec:
            problems.append(f"config key 'models.{model}.hub_id': required for world 'hub' (e.g. Qwen/Qwen2.5-3B)")
    if world == "hub" and not (config.get("hub", {}).get("train_dataset") or config.get("hub", {}).get("train_source")):
        problems.append("config key 'hub.train_dataset': world 'hub' needs a training dataset (or hub.train_source)")

    try:
        sagc = SAGCConfig.from_dict(config.get("sagc", {}))
    except ValueError as err:
        problems.append(f"config key 'sagc': {err}")
        sagc = None
    variants = config.get("sagc_variants", {})
    for sizing in config["sizings"]:
        if sizing.startswith("sagc-"):
            variant = sizing[len("sagc-"):]
            if variant not in variants:
                problems.append(
                    f"config key 'sizings': '{sizing}' needs 'sagc_variants.{variant}' "
                    f"(known variants: {sorted(variants) or 'none'})"
                )
                continue
            try:
                SAGCConfig.from_dict({**config.get("sagc", {}), **variants[variant]})
            except ValueError as err:
                problems.append(f"config key 'sagc_variants.{variant}': {err}")
        elif sizing.startswith("g") and sagc is not None and int(sizing[1:]) < 2:
            problems.append(f"config key 'sizings': '{sizing}' needs G >= 2")
    if problems:
        raise ConfigError(f"{source}: invalid config\n  " + "\n  ".join(problems))


def load_config(path: str | Path) -> dict[str, Any]:
    """Read, check and default-fill a config file (what the Snakefile does, for tests/CLIs)."""
    config = yaml.safe_load(Path(path).read_text())
    if not isinstance(config, dict):
        raise ConfigError(f"{path}: a config must be a YAML mapping")
    return prepare(config, str(path))


def prepare(config: dict[str, Any], source: str, schema_path: Path | str = SCHEMA) -> dict[str, Any]:
    from snakemake.utils import validate

    check_schema(config, source, schema_path)
    validate(config, str(schema_path), set_default=True)
    check_semantics(config, source)
    check_cells(config, source)
    return config


def check_cells(config: dict[str, Any], source: str) -> None:
    """Every training cell's resolved config passes the trainer's own validation (the
    algorithm overrides, rewards, device keys the schema passes through). vLLM's presence
    is checked by the job itself, so a GPU config still dry-runs on a laptop."""
    from sagc.pipeline.cells import train_cell_config
    from sagc.pipeline.grid import Grid
    from sagc.train.config import TrainConfig

    grid = Grid.from_config(config)
    problems = {}
    for cell in grid.cells():
        try:
            TrainConfig.from_dict(train_cell_config(config, grid, cell), check_vllm=False)
        except ValueError as err:
            problems.setdefault(str(err), []).append(cell.id)
    if problems:
        lines = [f"{msg} (cells: {', '.join(ids)})" for msg, ids in problems.items()]
        raise ConfigError(f"{source}: invalid training config\n  " + "\n  ".join(lines))
