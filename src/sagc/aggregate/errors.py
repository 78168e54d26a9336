"""Errors of the aggregation, each naming what the researcher has to look at."""

from __future__ import annotations

from pathlib import Path


class CorruptRunFileError(ValueError):
    """A W&B run file that cannot be parsed; the message starts with the file's path."""

    kind = "corrupt"

    def __init__(self, path: str | Path, reason: str):
        self.path = Path(path)
        self.reason = reason
        super().__init__(f"{self.path}: {self.kind} W&B run file: {reason}")


class DamagedRunError(CorruptRunFileError):
    """The run file of a cell that finished training lost its end (damage, not an unfinished run)."""

    kind = "damaged"

    def __init__(self, path: str | Path, cell_id: str, reason: str, rerun: str):
        self.cell_id = cell_id
        super().__init__(path, f"cell {cell_id}: {reason}. Recover by training the cell again: {rerun}")


class MissingCellsError(RuntimeError):
    """Cells are missing or unfinished and partial tables are not allowed; ``missing``: cell id -> reasons."""

    def __init__(self, missing: dict[str, list[str]]):
        self.missing = dict(missing)
        lines = [f"  {cell}: {'; '.join(reasons)}" for cell, reasons in self.missing.items()]
        super().__init__(
            f"{len(self.missing)} cell(s) missing or unfinished (set allow_partial: true or pass "
            "--allow-partial to write tables that mark them as missing):\n" + "\n".join(lines)
        )


class OnlineSourceError(RuntimeError):
    """The W&B API could not be used (no API key, unreachable server, unknown project)."""


class RunNotFoundError(LookupError):
    """No W&B run was found for a cell (no run file offline, no matching run online)."""
