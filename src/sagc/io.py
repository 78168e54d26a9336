"""Result files: atomic writes (a killed job leaves no half file a reader would take for a
finished one), and the one JSONL reader.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def read_jsonl(path: str | Path) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` of each non-blank line of a JSONL file; ``ValueError``
    naming the file and the line on one that is not JSON."""
    path = Path(path)
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{lineno}: not valid JSON ({e.msg})") from None


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
