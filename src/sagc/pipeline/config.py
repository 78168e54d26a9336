"""Checking a pipeline config when the Snakefile is parsed, before any job; docs/architecture.md
("Validation happens at two boundaries")."""

from __future__ import annotations

import json
import typing
import warnings
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import to_jsonable_python

from sagc.config_models import clauses, model_in
from sagc.controller import POLICIES, Sizing, parse_sizing
from sagc.evaluate.taskcfg import task_metas
from sagc.pipeline.cells import resolved_cells
from sagc.pipeline.evaluation import eval_settings
from sagc.pipeline.launch import config_problems
from sagc.pipeline.memory import cell_kv_shortfall
from sagc.pipeline.schema import FILL_NULL, FILLED, PipelineConfig, key_order, pipeline_model
from sagc.pipeline.world import world_of
from sagc.vllm_support import check_installed_vllm


class KVCacheWarning(UserWarning):
    """A cell whose largest step does not fit vLLM's KV cache: it runs, but rows queue."""


class ConfigError(ValueError):
    """A pipeline config is invalid; the message names the file and the key."""


def check_types(config: dict[str, Any], source: str) -> None:
    """The config against the typed model; one line per problem, naming the key."""
    model = pipeline_model()
    try:
        # as JSON, as a config file states it: a list is a valid tuple, "3" is no integer
        model.model_validate_json(json.dumps(config))
    except TypeError as err:
        raise ConfigError(f"{source}: invalid config: not plain YAML data ({err})") from None
    except ValidationError as err:
        raise ConfigError(f"{source}: invalid config\n  " + "\n  ".join(clauses(err, model))) from None


def check_semantics(config: PipelineConfig, source: str) -> None:
    """The checks that need the registry, the task files or the grid (after ``check_types``)."""
    problems = world_of(config).problems(config)
    problems += _evaluate_problems(config)
    problems += _sizing_problems(config.sizings, config.policy_blocks())
    problems += config_problems(config)  # launch: strategies, DeepSpeed, the train rule's GPUs
    if problems:
        raise ConfigError(f"{source}: invalid config\n  " + "\n  ".join(problems))


def _evaluate_problems(config: PipelineConfig) -> list[str]:
    """The evaluated tasks are packaged tasks of the world; ``evaluate.repeats`` names only those."""
    try:
        metas = task_metas()
    except ValueError as err:  # a task YAML without the metadata the pipeline reads
        return [f"config key 'evaluate.tasks': {err}"]
    ev = eval_settings(config)
    problems = []
    for task in ev["tasks"]:
        if task not in metas:
            problems.append(f"config key 'evaluate.tasks': unknown task {task!r}; packaged tasks: {sorted(metas)}")
        elif metas[task].world != config.world:
            problems.append(
                f"config key 'evaluate.tasks': task {task!r} belongs to world {metas[task].world!r} "
                f"({metas[task].path.name}), not {config.world!r}"
            )
    repeats = ev.get("repeats")
    if isinstance(repeats, dict):
        problems += [
            f"config key 'evaluate.repeats.{task}': not one of the evaluated tasks {list(ev['tasks'])}"
            for task in sorted(set(repeats) - set(ev["tasks"]))
        ]
    return problems


def _sizing_problems(sizings: list[str], blocks: dict[str, Any]) -> list[str]:
    """Each sizing, and every policy block and variant in ``blocks``, used or not (a typo is a typo)."""
    problems = []
    used = set()
    for sizing in sizings:
        try:
            parsed = parse_sizing(sizing, key="config key 'sizings'")
            used.add(parsed.block)
            parsed.cell_block(blocks)
        except ValueError as err:
            msg = str(err)
            problems.append(msg if msg.startswith("config key") else f"config key 'sizings': {msg}")
    for policy in POLICIES.values():
        if policy.block not in blocks and policy.block not in used:
            continue
        base = Sizing(policy.name, policy=policy).cell_block(blocks)
        try:
            policy.config.from_dict(base)
        except ValueError as err:
            problems.append(f"config key '{policy.block}': {err}")
        for variant, overrides in (blocks.get(policy.variants_block) or {}).items():
            try:
                policy.config.from_dict({**base, **overrides})
            except ValueError as err:
                problems.append(f"config key '{policy.variants_block}.{variant}': {err}")
    return problems


def load_config(*paths: str | Path) -> PipelineConfig:
    """Read and check a config as the Snakefile does, layering several as ``--configfile a b`` does."""
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


def fill_defaults(config: dict[str, Any], model: type[BaseModel] | None = None, filled=None) -> None:
    """Fill in the typed model's non-null and ``FILL_NULL`` defaults in place (in a ``FILLED`` block:
    the listed keys); every other key stays absent and its consumer's default applies."""
    top = model is None
    model = pipeline_model() if top else model
    fields = model.model_fields
    for key in key_order(model) if top else fields:
        info = fields[key]
        if key not in config and not info.is_required():
            default = info.get_default(call_default_factory=True)
            fill = key in filled if filled is not None else default is not None or _fills_null(info)
            if fill:
                config[key] = to_jsonable_python(default)
        value, sub = config.get(key), model_in(info.annotation)
        if isinstance(value, dict) and sub is not None:
            if typing.get_origin(info.annotation) is dict:  # name -> block (models, resources)
                for block in value.values():
                    if isinstance(block, dict):
                        fill_defaults(block, sub)
            else:
                fill_defaults(value, sub, FILLED.get(key) if top else None)


def _fills_null(info: FieldInfo) -> bool:
    return isinstance(info.json_schema_extra, dict) and all(
        info.json_schema_extra.get(k) == v for k, v in FILL_NULL.items()
    )


def prepare(config: dict[str, Any], source: str) -> PipelineConfig:
    """The one typed config every helper reads: checked, its defaults filled in (in ``config`` too),
    its cells resolved; ``source`` names its files in every error."""
    check_types(config, source)
    fill_defaults(config)
    typed = pipeline_model().model_validate_json(json.dumps(config))
    check_semantics(typed, source)
    check_cells(typed, source)
    check_vllm(typed, source)
    return typed


def check_vllm(config: PipelineConfig, source: str) -> None:
    """Refuse a config that uses vLLM when the installed one is outside TRL's supported window."""
    if config.device.use_vllm or config.evaluate.backend == "vllm":
        check_installed_vllm(f"{source} uses vLLM")


def check_cells(config: PipelineConfig, source: str) -> None:
    """Every training cell resolves; a KV cache too small for a step at G_max is warned about."""
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
