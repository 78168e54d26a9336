"""Aggregation: from the cells' W&B runs and evaluation summaries to the paper's
tables (``results/<name>/tables/``) and figures (``paper_figures/<name>/``).

Modules: ``runlog`` (wandb 0.31 run-file records), ``reader`` (offline / online run
readers, one interface), ``grid`` (the grid JSON), ``collect`` (what exists, what is
missing), ``stats`` (definitions), ``perseed`` (one value per seed), ``paired`` (seed-level
and pooled intervals), ``power``, ``registration`` (the config's pre-registered claims),
``verdicts`` (claims, families, Holm), ``primary`` (the headline's families), ``tables``,
``figures``, ``palette``, ``outputs`` (the fixed file names), ``api`` (``aggregate``). CLIs:
``python -m sagc.aggregate --grid grid.json [--allow-partial]``, ``python -m
sagc.aggregate.compare A B`` (replication), ``python -m sagc.aggregate.plan RESULTS``
(planned power from a development-seed run).

The names below are imported lazily, so that ``sagc.aggregate.outputs`` stays cheap to
import (a Snakefile reads it at parse time) and matplotlib loads only when drawing.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "AggregateResult": "api", "aggregate": "api",
    "Collected": "collect", "collect": "collect", "read_eval_summary": "collect",
    "CorruptRunFileError": "errors", "DamagedRunError": "errors", "MissingCellsError": "errors",
    "OnlineSourceError": "errors", "RunNotFoundError": "errors",
    "ResultGrid": "grid", "load_grid": "grid", "parse_grid": "grid",
    "OfflineReader": "reader", "OnlineReader": "reader", "RunData": "reader",
    "make_reader": "reader", "read_run_file": "reader",
}  # fmt: skip

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"sagc.aggregate.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'sagc.aggregate' has no attribute {name!r}")
