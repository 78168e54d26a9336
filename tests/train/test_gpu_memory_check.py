"""benchmarks/gpu_memory_check.py --tiny: the GPU check's code on CPU (2-layer models of the
paper's architecture classes, gloo). Its JSON has the schema the memory plan reads
(``sagc.pipeline.memory.measured_margins``), and the split-pass comparison on 2 processes is
real: one micro-batch's gradient in one pass equals its two passes accumulated with no_sync."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sagc.pipeline.memory import MEASURED_SCHEMA, PAPER_MODEL_CONFIGS, measured_margins

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu_memory_check")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks/gpu_memory_check.py"), "--tiny", "--out", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads((out / "gpu_memory_check.json").read_text())
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == report
    return out / "gpu_memory_check.json", report


def test_the_tiny_run_measures_both_models_and_splits_passes_exactly(tiny_report):
    _, r = tiny_report
    assert r["schema"] == MEASURED_SCHEMA and r["tiny"] is True and r["device"] == "cpu"
    assert set(r["models"]) == set(PAPER_MODEL_CONFIGS)
    for hub_id, m in r["models"].items():
        assert m["params"] == m["params_by_estimator"] > 0, hub_id
        assert set(m) >= {
            "runtime_gib",
            "fragmentation_gib",
            "reducer",
            "gradients",
            "loss_pass",
            "scoring",
            "after_step",
        }
        assert set(m["reducer"]) == {"bucket_view_off_gib", "bucket_view_on_gib", "planned_gib"}
        assert m["loss_pass"]["activation_factor"] is None  # no device memory to measure on CPU
        assert m["loss_pass"]["planned_activations_gib"] is not None
    split = r["split_passes"]
    assert split["processes"] == 2 and split["passes"] == [2, 2] and split["equal"] is True
    assert 0 < split["max_rel_diff"] <= split["tolerance"]  # two float sums, not one computation


def test_the_plan_refuses_a_tiny_run_and_reads_a_measured_one(tiny_report, tmp_path):
    path, r = tiny_report
    with pytest.raises(ValueError, match="without --tiny"):
        measured_margins(str(path), "Qwen/Qwen2.5-3B", "qwen2.5-3b")
    # the same JSON as a card would fill it in: the plan reads the figures the check writes
    for i, m in enumerate(r["models"].values()):
        m.update(runtime_gib=1.0 + i, fragmentation_gib=3.0 + i)
        m["loss_pass"]["activation_factor"] = 0.9
        m["scoring"]["activation_factor"] = 0.6
    measured = tmp_path / "measured.json"
    measured.write_text(json.dumps({**r, "tiny": False}))
    margins = measured_margins(str(measured), "meta-llama/Llama-3.2-3B", "llama-3.2-3b")
    assert (margins.activation, margins.scoring, margins.runtime_gib, margins.margin_gib) == (0.9, 0.6, 2.0, 4.0)
