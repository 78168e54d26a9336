"""A cell's runs from its offline W&B run files or the W&B API (docs/aggregation.md, "Reading a cell's runs")."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from sagc import metrics
from sagc.aggregate.errors import CorruptRunFileError, OnlineSourceError, RunNotFoundError
from sagc.aggregate.grid import CellOutputs, WandbSource
from sagc.aggregate.runlog import read_run_log

#: Run-config keys that must match the grid cell (``config_name`` is checked apart).
_IDENTITY = tuple(k for k in metrics.CELL_KEYS if k != "config_name")


@dataclass
class Segment:
    """One run (file) of a cell."""

    source: str
    rows: dict[int, dict[str, Any]]
    config: dict[str, Any]
    order: tuple
    finished: bool
    truncated: bool = False


@dataclass
class RunData:
    """A cell's merged W&B run."""

    history: pd.DataFrame
    config: dict[str, Any]
    sources: list[str] = field(default_factory=list)
    #: The last segment ended cleanly (offline: an exit record; online: state "finished").
    finished: bool = False
    #: Some segment (``tail_truncated``: the latest) ended inside a record (a killed writer).
    truncated: bool = False
    tail_truncated: bool = False


class RunReader(Protocol):
    def read(self, cell: CellOutputs) -> RunData:
        """The cell's run; ``RunNotFoundError`` when there is none."""


def _item_key(item) -> str:
    # A nested dict {"a": {"b": 1}} is stored as ["a", "b"]; the W&B API shows it as "a.b", so do we.
    return item.key or ".".join(item.nested_key)


def _item_value(item, path: Path) -> Any:
    kind = item.WhichOneof("value") if hasattr(item, "WhichOneof") else None
    if kind == "none":
        return None
    if kind in ("boolean", "integer", "number", "text"):
        return getattr(item, kind)
    raw = item.json if kind == "json" else item.value_json
    try:
        return json.loads(raw)  # json.loads accepts NaN / Infinity as W&B writes them
    except json.JSONDecodeError as exc:
        raise CorruptRunFileError(path, f"value of {_item_key(item)!r} is not JSON: {raw!r}") from exc


def _add_row(rows: dict[int, dict[str, Any]], row: dict[str, Any], where: str) -> None:
    row = {k: v for k, v in row.items() if not k.startswith("_")}
    step = row.get(metrics.STEP)
    if step is None:
        return
    if isinstance(step, bool) or not isinstance(step, (int, float)) or not math.isfinite(step):
        raise ValueError(f"{where}: metric {metrics.STEP!r} must be a number, got {step!r}")
    if step != int(step):
        raise ValueError(f"{where}: metric {metrics.STEP!r} must be an integer, got {step!r}")
    rows.setdefault(int(step), {}).update(row)


def merge_segments(segments: list[Segment]) -> RunData:
    """Merge a cell's segments by step (docs/aggregation.md, "Reading a cell's runs")."""
    segments = sorted(segments, key=lambda s: s.order)
    merged: dict[int, dict[str, Any]] = {}
    config: dict[str, Any] = {}
    for seg in segments:
        if seg.rows:
            first = min(seg.rows)
            merged = {s: r for s, r in merged.items() if s < first}
        merged.update(seg.rows)
        config.update(seg.config)
    steps = sorted(merged)
    history = pd.DataFrame.from_records([merged[s] for s in steps]) if steps else pd.DataFrame()
    if steps:
        # A stable column order whatever the source (wandb-core does not keep the logged order).
        cols = [metrics.STEP] + sorted(c for c in history.columns if c != metrics.STEP)
        history = history[cols].reset_index(drop=True)
    return RunData(
        history=history,
        config=config,
        sources=[s.source for s in segments],
        finished=bool(segments) and segments[-1].finished,
        truncated=any(s.truncated for s in segments),
        tail_truncated=bool(segments) and segments[-1].truncated,
    )


def check_identity(config: dict[str, Any], cell: CellOutputs, where: str, config_name: str | None) -> None:
    """Raise ValueError if the run's config names a different cell than the grid."""
    for key in _IDENTITY:
        if key in config and config[key] != getattr(cell, key):
            raise ValueError(
                f"{where}: run config {key}={config[key]!r} but grid cell {cell.id!r} has "
                f"{key}={getattr(cell, key)!r}: run filed under the wrong cell?"
            )
    if config_name is not None and "config_name" in config and config["config_name"] != config_name:
        raise ValueError(f"{where}: run config config_name={config['config_name']!r} but the grid is {config_name!r}")


def read_run_file(path: str | Path) -> Segment:
    """One offline run file as a segment."""
    path = Path(path)
    log = read_run_log(path)
    rows: dict[int, dict[str, Any]] = {}
    config: dict[str, Any] = {}
    start = (math.inf, str(path))
    finished = False
    for rec in log.records:
        kind = rec.WhichOneof("record_type")
        if kind == "history":
            row = {_item_key(it): _item_value(it, path) for it in rec.history.item}
            _add_row(rows, row, str(path))
        elif kind == "run":
            _apply_config(config, rec.run.config, path)
            if rec.run.HasField("start_time"):
                start = (rec.run.start_time.ToNanoseconds() / 1e9, str(path))
        elif kind == "config":
            _apply_config(config, rec.config, path)
        elif kind == "exit":
            finished = True
    return Segment(str(path), rows, config, start, finished, log.truncated_tail)


def _apply_config(config: dict[str, Any], record, path: Path) -> None:
    for item in record.update:
        key = _item_key(item)
        if key.startswith("_"):
            continue  # wandb's own bookkeeping ("_wandb")
        try:
            config[key] = json.loads(item.value_json)
        except json.JSONDecodeError as exc:
            raise CorruptRunFileError(path, f"config value of {key!r} is not JSON") from exc
    for item in record.remove:
        config.pop(_item_key(item), None)


def find_run_files(train_dir: str | Path) -> list[Path]:
    """The ``run-*.wandb`` files of a cell (under ``<train_dir>/wandb``), symlinks deduplicated."""
    wandb_dir = Path(train_dir) / "wandb"
    if not wandb_dir.is_dir():
        return []
    seen: dict[Path, Path] = {}
    for p in sorted(wandb_dir.rglob("run-*.wandb")):
        seen.setdefault(p.resolve(), p)
    return sorted(seen.values())


class OfflineReader:
    """Reads each cell's own offline W&B directory (``<train_dir>/wandb``)."""

    def __init__(self, config_name: str | None = None):
        self.config_name = config_name

    def read(self, cell: CellOutputs) -> RunData:
        files = find_run_files(cell.train_dir)
        if not files:
            raise RunNotFoundError(f"no W&B run file (run-*.wandb) under {Path(cell.train_dir) / 'wandb'}")
        segments = [read_run_file(f) for f in files]
        for seg in segments:
            check_identity(seg.config, cell, seg.source, self.config_name)
        return merge_segments(segments)


def online_filters(group: str) -> dict[str, Any]:
    """The W&B API filter that selects the pipeline's runs (one group per config)."""
    return {"group": group}


class OnlineReader:
    """Reads the runs of ``entity/project`` in ``group`` through ``wandb.Api`` (``api``, or one made
    at the first ``read``), listed once and matched to cells by their config."""

    def __init__(self, source: WandbSource, config_name: str | None = None, api: Any = None,
                 timeout: int = 30):  # fmt: skip
        self.source = source
        self.config_name = config_name
        self._api = api
        self._timeout = timeout
        self._runs: list | None = None

    @property
    def path(self) -> str:
        return f"{self.source.entity}/{self.source.project}"

    def _connect(self):
        if self._api is None:
            import wandb

            try:
                self._api = wandb.Api(timeout=self._timeout)
            except Exception as exc:  # UsageError (no key), AuthenticationError, CommError
                raise OnlineSourceError(
                    f"cannot use the W&B API for {self.path} (group {self.source.group!r}): "
                    f"{type(exc).__name__}: {exc}. Set WANDB_API_KEY, or aggregate the "
                    "offline run files with wandb.source: offline."
                ) from exc
        return self._api

    def runs(self) -> list:
        """All runs of the group (fetched once)."""
        if self._runs is None:
            api = self._connect()
            try:
                self._runs = list(api.runs(self.path, filters=online_filters(self.source.group)))
            except Exception as exc:
                raise OnlineSourceError(
                    f"cannot list the runs of {self.path} in group {self.source.group!r}: {type(exc).__name__}: {exc}"
                ) from exc
        return self._runs

    def _matches(self, run, cell: CellOutputs) -> bool:
        config = dict(run.config)
        want = {key: getattr(cell, key) for key in _IDENTITY}
        if self.config_name is not None:
            want["config_name"] = self.config_name
        return all(config.get(k) == v for k, v in want.items())

    def read(self, cell: CellOutputs) -> RunData:
        matching = [r for r in self.runs() if self._matches(r, cell)]
        if not matching:
            raise RunNotFoundError(
                f"no run in {self.path} group {self.source.group!r} with config "
                f"{cell.model}/{cell.algorithm}/{cell.sizing}/seed{cell.seed}"
            )
        return merge_segments([self._segment(run) for run in matching])

    def _segment(self, run) -> Segment:
        where = f"{self.path}/{run.id}"
        rows: dict[int, dict[str, Any]] = {}
        try:
            for row in run.scan_history():  # unsampled, all keys
                _add_row(rows, dict(row), where)
        except (ValueError, RunNotFoundError):
            raise
        except Exception as exc:
            raise OnlineSourceError(f"cannot read the history of {where}: {exc}") from exc
        config = {k: v for k, v in dict(run.config).items() if not k.startswith("_")}
        order = (str(getattr(run, "created_at", "")), run.id)
        return Segment(where, rows, config, order, getattr(run, "state", "") == "finished")


def make_reader(source: WandbSource, config_name: str | None = None) -> RunReader:
    """The reader the grid's ``wandb.source`` asks for."""
    return OnlineReader(source, config_name) if source.source == "online" else OfflineReader(config_name)
