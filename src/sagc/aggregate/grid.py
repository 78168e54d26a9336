"""The grid description the pipeline hands to the aggregation (a JSON file).

Shape (keys not listed are rejected, so a typo does not silently fall back to a default)::

    {"name": "default",                      # config name; also W&B config key config_name
     "time_unit": "s",                       # "s" | "min" | "h" (default "s")
     "last_k": 5,                            # final reward = mean of the last k steps
     "allow_partial": false,                 # mark missing cells instead of failing
     "tau": 2.0,                             # optional: straggler threshold, drawn in figures
     "wandb": {"source": "offline"}          # or {"source": "online", "entity": ...,
                                             #     "project": ..., "group": ...}
     "cells": [{"id": "tiny-qwen2/grpo/g4/seed0", "model": "tiny-qwen2", "algorithm": "grpo",
                "sizing": "g4", "seed": 0, "train_dir": "results/default/train/...",
                "eval_summary": "results/default/eval/.../summary.json",
                "max_steps": 20}],            # optional: fewer logged steps = unfinished
     "base": [{"model": "tiny-qwen2", "eval_summary": ".../base/summary.json"}],
     "tables_dir": "results/default/tables",
     "figures_dir": "paper_figures/default"}

Relative paths resolve against ``root`` (the working directory by default: Snakemake runs
jobs from the workflow root, where ``results/`` lives).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TIME_UNITS = {"s": 1.0, "min": 60.0, "h": 3600.0}
SOURCES = ("offline", "online")

_TOP_KEYS = {
    "name", "time_unit", "last_k", "allow_partial", "tau", "wandb", "cells", "base",
    "tables_dir", "figures_dir",
}  # fmt: skip
_CELL_KEYS = {
    "id", "model", "algorithm", "sizing", "seed", "train_dir", "eval_summary", "max_steps",
}  # fmt: skip
_BASE_KEYS = {"model", "eval_summary"}


@dataclass(frozen=True)
class Cell:
    """One training cell: model x algorithm x sizing x seed."""

    id: str
    model: str
    algorithm: str
    sizing: str
    seed: int
    train_dir: Path
    eval_summary: Path
    max_steps: int | None = None


@dataclass(frozen=True)
class BaseModel:
    """An untrained model evaluated as the downstream reference row."""

    model: str
    eval_summary: Path


@dataclass(frozen=True)
class WandbSource:
    source: str = "offline"
    entity: str | None = None
    project: str | None = None
    group: str | None = None


@dataclass(frozen=True)
class Grid:
    name: str
    cells: tuple[Cell, ...]
    base: tuple[BaseModel, ...]
    tables_dir: Path
    figures_dir: Path
    wandb: WandbSource = field(default_factory=WandbSource)
    time_unit: str = "s"
    last_k: int = 5
    allow_partial: bool = False
    tau: float | None = None


def _require(obj: dict, key: str, where: str, kind: type | tuple[type, ...]) -> Any:
    if key not in obj:
        raise ValueError(f"{where}: missing required key {key!r}")
    value = obj[key]
    # bool is an int subclass: a seed of `true` is a typo, not a number.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValueError(f"{where}: key {key!r} must be {_kind_name(kind)}, got {value!r}")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(k.__name__ for k in kinds)


def _reject_unknown(obj: dict, allowed: set[str], where: str) -> None:
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(allowed)}")


def parse_grid(raw: dict, root: str | Path = ".", source: str = "grid") -> Grid:
    """Validate a grid dict (see the module docstring); ``source`` names it in errors."""
    if not isinstance(raw, dict):
        raise ValueError(f"{source}: the grid must be a JSON object, got {type(raw).__name__}")
    root = Path(root)
    _reject_unknown(raw, _TOP_KEYS, source)

    def path(value: str) -> Path:
        p = Path(value)
        return p if p.is_absolute() else root / p

    name = _require(raw, "name", source, str)
    time_unit = raw.get("time_unit", Grid.time_unit)
    if time_unit not in TIME_UNITS:
        raise ValueError(f"{source}: time_unit must be one of {sorted(TIME_UNITS)}, got {time_unit!r}")
    last_k = raw.get("last_k", Grid.last_k)
    if not isinstance(last_k, int) or isinstance(last_k, bool) or last_k < 1:
        raise ValueError(f"{source}: last_k must be a positive integer, got {last_k!r}")
    allow_partial = raw.get("allow_partial", Grid.allow_partial)
    if not isinstance(allow_partial, bool):
        raise ValueError(f"{source}: allow_partial must be true or false, got {allow_partial!r}")
    tau = raw.get("tau")
    if tau is not None and (not isinstance(tau, (int, float)) or isinstance(tau, bool) or tau <= 0):
        raise ValueError(f"{source}: tau must be a positive number, got {tau!r}")

    wb_raw = raw.get("wandb", {"source": "offline"})
    if not isinstance(wb_raw, dict):
        raise ValueError(f"{source}: key 'wandb' must be an object, got {wb_raw!r}")
    _reject_unknown(wb_raw, {"source", "entity", "project", "group"}, f"{source}: wandb")
    wb_source = wb_raw.get("source", "offline")
    if wb_source not in SOURCES:
        raise ValueError(f"{source}: wandb.source must be one of {SOURCES}, got {wb_source!r}")
    if wb_source == "online":
        for key in ("entity", "project", "group"):
            if not isinstance(wb_raw.get(key), str) or not wb_raw[key]:
                raise ValueError(f"{source}: wandb.{key} is required for source 'online'")
    wandb = WandbSource(wb_source, wb_raw.get("entity"), wb_raw.get("project"), wb_raw.get("group"))

    cells_raw = _require(raw, "cells", source, list)
    cells = []
    seen: set[str] = set()
    for i, c in enumerate(cells_raw):
        where = f"{source}: cells[{i}]"
        if not isinstance(c, dict):
            raise ValueError(f"{where} must be an object, got {c!r}")
        _reject_unknown(c, _CELL_KEYS, where)
        cell_id = _require(c, "id", where, str)
        if cell_id in seen:
            raise ValueError(f"{where}: duplicate cell id {cell_id!r}")
        seen.add(cell_id)
        max_steps = c.get("max_steps")
        if max_steps is not None and (not isinstance(max_steps, int) or max_steps < 1):
            raise ValueError(f"{where}: max_steps must be a positive integer, got {max_steps!r}")
        cells.append(
            Cell(
                id=cell_id,
                model=_require(c, "model", where, str),
                algorithm=_require(c, "algorithm", where, str),
                sizing=_require(c, "sizing", where, str),
                seed=_require(c, "seed", where, int),
                train_dir=path(_require(c, "train_dir", where, str)),
                eval_summary=path(_require(c, "eval_summary", where, str)),
                max_steps=max_steps,
            )
        )
    if not cells:
        raise ValueError(f"{source}: key 'cells' is empty: nothing to aggregate")

    base = []
    for i, b in enumerate(raw.get("base", [])):
        where = f"{source}: base[{i}]"
        if not isinstance(b, dict):
            raise ValueError(f"{where} must be an object, got {b!r}")
        _reject_unknown(b, _BASE_KEYS, where)
        base.append(
            BaseModel(
                model=_require(b, "model", where, str),
                eval_summary=path(_require(b, "eval_summary", where, str)),
            )
        )

    return Grid(
        name=name,
        cells=tuple(cells),
        base=tuple(base),
        tables_dir=path(_require(raw, "tables_dir", source, str)),
        figures_dir=path(_require(raw, "figures_dir", source, str)),
        wandb=wandb,
        time_unit=time_unit,
        last_k=last_k,
        allow_partial=allow_partial,
        tau=float(tau) if tau is not None else None,
    )


def load_grid(path: str | Path, root: str | Path = ".") -> Grid:
    """Read and validate the grid JSON at ``path`` (errors name the file and the key)."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"grid file not found: {path}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON: {exc}") from exc
    return parse_grid(raw, root=root, source=str(path))
