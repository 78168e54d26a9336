"""Every command a user runs as ``python -m ...`` prints its help and exits 0 (argparse
formats help text lazily, so a bad help string fails only here)."""

from __future__ import annotations

import subprocess
import sys

import pytest

COMMANDS = [
    ["sagc.simulate"],
    ["sagc.simulate", "suite"],
    ["sagc.simulate", "run"],
    ["sagc.simulate", "calibrate"],
    ["sagc.tiny"],
    ["sagc.evaluate"],
    ["sagc.aggregate"],
    ["sagc.aggregate.plan"],
    ["sagc.aggregate.compare"],
    ["sagc.pipeline.schema"],
    ["sagc.pipeline.hub"],
    ["sagc.train"],
    ["sagc.train.stops"],
    ["sagc.demo"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_help_prints(command):
    res = subprocess.run([sys.executable, "-m", *command, "--help"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "usage:" in res.stdout
