"""Atomic file writes: the one helper every writer of a result file uses.

A job killed mid-write must never leave a half file where a reader (Snakemake's output
check, a resumed run, the aggregation) would take it for a finished one: the text goes to
a temporary file next to the target, which then replaces the target in one rename.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` via ``<path>.tmp`` and an atomic rename; parents are made."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path


def atomic_write_json(path: str | Path, obj: Any, indent: int | None = 2) -> Path:
    """``atomic_write_text`` of ``obj`` as JSON with a final newline."""
    return atomic_write_text(path, json.dumps(obj, indent=indent) + "\n")
