"""Checking a pipeline config before any job starts: the pipeline's one validation
boundary (jobs receive already-valid cells and trust them).

Two layers, both run when the Snakefile is parsed (so ``snakemake -n`` already fails): the
JSON schema generated from ``sagc.pipeline.schema.PipelineConfig``, then the checks a schema
cannot express, named by key or cell id; then the schema's defaults are filled in
(``fill_defaults``). What each layer checks: docs/architecture.md ("One source of truth",
validation).
"""

from __future__ import annotations

import copy
import warnings
from pathlib import Path
from typing import Any

import yaml

from sagc.controller import POLICIES, Sizing, parse_sizing
from sagc.evaluate.taskcfg import task_metas
from sagc.pipeline.cells import resolved_cells
from sagc.pipeline.evaluation import eval_settings
from sagc.pipeline.grid import check_name
from sagc.pipeline.launch import config_problems
from sagc.pipeline.memory import cell_kv_shortfall
from sagc.pipeline.world import world_of
from sagc.vllm_support import check_installed_vllm

SCHEMA = Path("workflow/schemas/config.schema.yaml")  # sagc.pipeline.schema.SCHEMA_FILE


class KVCacheWarning(UserWarning):
    """A cell whose largest step does not fit vLLM's KV cache: it runs, but rows queue."""


class ConfigError(ValueError):
    """A pipeline config is invalid; the message names the file and the key."""


def _dotted(path) -> str:
    return ".".join(str(p) for p in path) or "<top level>"


def check_schema(config: dict[str, Any], source: str, schema: Path | str | dict = SCHEMA) -> None:
    import jsonschema

    if not isinstance(schema, dict):
        schema = yaml.safe_load(Path(schema).read_text())
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(
        validator.iter_errors(config), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path)))
    )
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
    problems = []
    try:
        check_name(config["name"])
    except ValueError as err:
        problems.append(str(err))
    problems += world_of(config).problems(config)

    tuned_on = sorted(set(config["seeds"]) & set(config.get("dev_seeds", [])))
    if tuned_on:
        problems.append(
            f"config key 'seeds': {tuned_on} are also dev_seeds (settings were tuned on them); "
            "report seeds must be fresh"
        )
    problems += _evaluate_problems(config)
    problems += _sizing_problems(config)
    problems += config_problems(config)  # launch: strategies, DeepSpeed, the train rule's GPUs
    if problems:
        raise ConfigError(f"{source}: invalid config\n  " + "\n  ".join(problems))


def _evaluate_problems(config: dict[str, Any]) -> list[str]:
    """The evaluated tasks are packaged tasks of the config's world (their YAMLs' metadata,
    ``sagc.evaluate.taskcfg``), and a per-task ``evaluate.repeats`` names only those."""
    try:
        metas = task_metas()
    except ValueError as err:  # a task YAML without the metadata the pipeline reads
        return [f"config key 'evaluate.tasks': {err}"]
    ev = eval_settings(config)
    problems = []
    for task in ev["tasks"]:
        if task not in metas:
            problems.append(f"config key 'evaluate.tasks': unknown task {task!r}; packaged tasks: {sorted(metas)}")
        elif metas[task].world != config["world"]:
            problems.append(
                f"config key 'evaluate.tasks': task {task!r} belongs to world {metas[task].world!r} "
                f"({metas[task].path.name}), not {config['world']!r}"
            )
    repeats = ev.get("repeats")
    if isinstance(repeats, dict):
        problems += [
            f"config key 'evaluate.repeats.{task}': not one of the evaluated tasks {list(ev['tasks'])}"
            for task in sorted(set(repeats) - set(ev["tasks"]))
        ]
    return problems


def _sizing_problems(config: dict[str, Any]) -> list[str]:
    """Each policy's block and every one of its variants (used by a sizing or not: a typo
    in an unused one is still a typo), and each sizing against the variants it needs."""
    problems = []
    used = set()
    for sizing in config["sizings"]:
        try:
            parsed = parse_sizing(sizing, key="config key 'sizings'")
            used.add(parsed.block)
            parsed.cell_block(config)
        except ValueError as err:
            msg = str(err)
            problems.append(msg if msg.startswith("config key") else f"config key 'sizings': {msg}")
    for policy in POLICIES.values():
        if policy.block not in config and policy.block not in used:
            continue
        base = Sizing(policy.name, policy=policy).cell_block(config)
        try:
            policy.config.from_dict(base)
        except ValueError as err:
            problems.append(f"config key '{policy.block}': {err}")
        for variant, overrides in (config.get(policy.variants_block) or {}).items():
            try:
                policy.config.from_dict({**base, **overrides})
            except ValueError as err:
                problems.append(f"config key '{policy.variants_block}.{variant}': {err}")
    return problems


def load_config(*paths: str | Path) -> dict[str, Any]:
    """Read, check and default-fill a config (what the Snakefile does, for tests/CLIs).

    Several files are layered as ``snakemake --configfile a.yaml b.yaml`` layers them: each
    later file updates the earlier ones key by key, recursively into mappings (an overlay
    such as ``configs/prompt.yaml`` states only what it changes in ``configs/default.yaml``)."""
    from snakemake.utils import update_config

    if not paths:
        raise TypeError("load_config needs at least one config file")
    config: dict[str, Any] = {}
    for path in paths:
        layer = yaml.safe_load(Path(path).read_text())
        if not isinstance(layer, dict):
            raise ConfigError(f"{path}: a config must be a YAML mapping")
        update_config(config, layer)
    return prepare(config, ", ".join(map(str, paths)))


def fill_defaults(instance: Any, schema: dict[str, Any]) -> None:
    """Fill the schema's defaults into a config that passed it, in place, as Snakemake's
    ``validate(set_default=True)`` does (absent keys of every object, nested ones too),
    without validating the config a second time."""
    if not isinstance(instance, dict):
        return
    props = schema.get("properties", {})
    for key, sub in props.items():
        if key not in instance and "default" in sub:
            instance[key] = copy.deepcopy(sub["default"])
        if key in instance:
            fill_defaults(instance[key], sub)
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        for key, value in instance.items():
            if key not in props:
                fill_defaults(value, extra)


def prepare(config: dict[str, Any], source: str, schema_path: Path | str = SCHEMA) -> dict[str, Any]:
    schema = yaml.safe_load(Path(schema_path).read_text())
    check_schema(config, source, schema)
    check_explicit_device(config, source)  # before the schema's CPU defaults fill the block
    fill_defaults(config, schema)
    check_semantics(config, source)
    check_cells(config, source)
    check_vllm(config, source)
    return config


def check_vllm(config: dict[str, Any], source: str) -> None:
    """A config that uses vLLM is refused before any job when the installed vLLM is outside
    TRL's supported window (no-op where vLLM is not installed: dry runs on a laptop)."""
    if config.get("device", {}).get("use_vllm") or config.get("evaluate", {}).get("backend") == "vllm":
        check_installed_vllm(f"{source} uses vLLM")


def check_explicit_device(config: dict[str, Any], source: str) -> None:
    """A hub world must say where it runs: the device block's defaults are the tiny world's
    CPU, and real 3B models on CPU are a choice to make on purpose, not by omission."""
    if config.get("world") == "hub" and "use_cpu" not in (config.get("device") or {}):
        raise ConfigError(
            f"{source}: invalid config\n  config key 'device.use_cpu': world 'hub' needs an explicit "
            "device block (use_cpu: false with bf16/vLLM for GPUs, or use_cpu: true to run the hub "
            "models on CPU on purpose)"
        )


def check_cells(config: dict[str, Any], source: str) -> None:
    """Every training cell resolves (``sagc.pipeline.cells.resolved_cells``: the trainer's own
    validation of the algorithm overrides, rewards and device keys the schema passes through,
    the step layout, the memory plan on the config's card); a KV cache too small for a
    step at G_max is warned about. vLLM's presence is checked by the job itself, so a GPU
    config still dry-runs on a laptop."""
    problems, shortfalls = {}, {}
    for cell, entry in resolved_cells(config).items():
        if isinstance(entry, ValueError):
            problems.setdefault(str(entry), []).append(cell.id)
            continue
        cfg = entry[1]
        # each process's engine generates its share of the largest step in one pass
        rows = cfg.resolved.layout.max_rollouts // cfg.launch.processes
        short = cell_kv_shortfall(config, cell.model, rows)
        if short:
            shortfalls.setdefault(short, []).append(cell.id)
    if problems:
        lines = [f"{msg} (cells: {', '.join(ids)})" for msg, ids in problems.items()]
        raise ConfigError(f"{source}: invalid training config\n  " + "\n  ".join(lines))
    for msg, ids in shortfalls.items():
        warnings.warn(f"{source}: {msg} (cells: {', '.join(ids)})", KVCacheWarning, stacklevel=2)
