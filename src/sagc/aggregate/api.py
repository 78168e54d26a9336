"""The aggregation as one call (what ``python -m sagc.aggregate`` runs)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from sagc.aggregate.collect import Collected, collect
from sagc.aggregate.errors import MissingCellsError
from sagc.aggregate.grid import ResultGrid
from sagc.aggregate.reader import RunReader

MISSING_FILE = "missing.json"


@dataclass
class AggregateResult:
    collected: Collected
    tables: list[Path]
    figures: list[Path]
    missing: dict[str, list[str]]


def aggregate(grid: ResultGrid, allow_partial: bool | None = None, reader: RunReader | None = None,
              figures: bool = True) -> AggregateResult:  # fmt: skip
    """Write the tables and figures; missing cells raise ``MissingCellsError`` before anything is
    written unless partial tables are allowed (``allow_partial`` overrides the grid's when given)."""
    from sagc.aggregate.figures import write_figures
    from sagc.aggregate.tables import write_tables

    partial = grid.allow_partial if allow_partial is None else allow_partial
    collected = collect(grid, reader)
    missing = collected.missing()
    if missing and not partial:
        raise MissingCellsError(missing)
    tables = write_tables(collected, grid.tables_dir)
    missing_path = Path(grid.tables_dir) / MISSING_FILE
    missing_path.write_text(json.dumps(missing, indent=2, sort_keys=True) + "\n")
    tables.append(missing_path)
    figs = write_figures(collected, grid.figures_dir) if figures else []
    return AggregateResult(collected, tables, figs, missing)
