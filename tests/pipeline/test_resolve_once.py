"""A parse of the Snakefile resolves each training cell once and builds each cell's
controller config at most twice (the cell's own check and the TrainConfig read back), however
many helpers (config check, disk check, dry-run lines, the train rule's params) read it."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# Counts calls by code object while Snakemake parses and dry-runs the workflow in-process.
COUNTER = """
import collections, sys
calls = collections.Counter()
def profile(frame, event, arg):
    if event == "call":
        code = frame.f_code
        if code.co_filename.endswith(("sagc/pipeline/cells.py", "sagc/controller/sagc.py")):
            calls[code.co_name] += 1
sys.setprofile(profile)
from snakemake.cli import main
sys.argv = ["snakemake", *sys.argv[1:]]
try:
    main()
except SystemExit as stop:
    sys.setprofile(None)
    print("CALLS", calls["train_cell_config"], calls["__post_init__"], flush=True)
    raise
"""


@pytest.mark.parametrize("configs", [["configs/default.yaml"], ["configs/paper.yaml"]])
def test_a_dry_run_resolves_each_cell_once(tmp_path, configs):
    argv = ["-n", "--cores", "2", "--directory", str(tmp_path), "--configfile", *(str(REPO / c) for c in configs)]
    proc = subprocess.run([sys.executable, "-c", COUNTER, *argv], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("CALLS")]
    resolutions, sagc_configs = map(int, line.split()[1:])
    sys.path.insert(0, str(REPO / "src"))
    from sagc.pipeline.config import load_config
    from sagc.pipeline.grid import Grid

    cells = len(list(Grid.from_config(load_config(*(REPO / c for c in configs))).cells()))
    assert resolutions == cells
    # two per cell, plus a few per grid (the measurement block, each sizing's budget)
    assert 2 * cells <= sagc_configs <= 2 * cells + 16, (sagc_configs, cells)
