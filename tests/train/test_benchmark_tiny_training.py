"""benchmarks/tiny_training.py measures fresh runs every time, in its own folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "tiny_training.py"


def _bench(cell: Path, out: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("WANDB_SERVICE", None)
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--cell", str(cell), "--steps", "1", "--out", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_a_second_run_measures_new_runs_instead_of_reading_back_the_old_ones(make_cell, tmp_path):
    cell = tmp_path / "cell.json"
    cell.write_text(json.dumps(make_cell(tmp_path / "unused", steps=1, save_steps=1, prompts=1)))
    out = tmp_path / "bench"
    first = _bench(cell, out)
    assert first.returncode == 0, first.stderr[-3000:]
    done = {s: json.loads((out / s / "done.json").read_text()) for s in ("g16", "sagc")}

    second = _bench(cell, out)
    assert second.returncode == 0, second.stderr[-3000:]
    for sizing in ("g16", "sagc"):
        again = json.loads((out / sizing / "done.json").read_text())
        assert again["resumed_from"] is None and again["steps"] == 1
        # Trained again: a reused done.json would carry the first run's timings.
        assert again["wallclock_s"] != done[sizing]["wallclock_s"], sizing


def test_a_folder_it_did_not_make_is_refused(make_cell, tmp_path):
    cell = tmp_path / "cell.json"
    cell.write_text(json.dumps(make_cell(tmp_path / "unused", steps=1, save_steps=1, prompts=1)))
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    proc = _bench(cell, out)
    assert proc.returncode != 0
    assert f"--out {out} is not empty and was not made by benchmarks/tiny_training.py" in proc.stderr
    assert (out / "notes.txt").read_text() == "keep me"


def test_the_default_folder_is_inside_the_repository_and_ignored_by_git():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import tiny_training
    finally:
        sys.path.pop(0)
    assert tiny_training.DEFAULT_OUT.is_relative_to(REPO)
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", str(tiny_training.DEFAULT_OUT / "g16" / "done.json")], cwd=REPO
    )
    assert ignored.returncode == 0, "benchmark outputs must not show up in git status"
