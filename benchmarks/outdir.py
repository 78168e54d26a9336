"""The output folder of a benchmark run: emptied when an earlier run of the same benchmark
made it, refused when it holds anything else (a benchmark must never report numbers read
back from an old folder, nor delete a folder it did not make)."""

from __future__ import annotations

import shutil
from pathlib import Path


def prepare_out(out: Path, marker: str, made_by: str) -> Path:
    """``out``, empty, with ``marker`` written into it (``made_by``: the benchmark's path)."""
    if out.exists() and any(out.iterdir()):
        if not (out / marker).is_file():
            raise SystemExit(
                f"error: --out {out} is not empty and was not made by {made_by}; pass an empty or new folder"
            )
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / marker).write_text(f"made by {made_by}; emptied on its next run\n")
    return out
