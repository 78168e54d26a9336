"""benchmarks/warm_mix_tail.py: the length table of a warm-start mix follows the mix."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

from sagc.tiny.warmstart import WarmStartParams

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "warm_mix_tail.py"
_spec = importlib.util.spec_from_file_location("warm_mix_tail", SCRIPT)
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def test_the_tail_comes_from_the_checks(tiny_data_dir, tiny_tokenizer_dir):
    def table(**kw):
        return bench.mix_table(tiny_data_dir, WarmStartParams(**kw).validate(), tokenizer=tiny_tokenizer_dir)

    plain = table(miscount_frac=0.0, slip_frac=0.0, check_frac=0.0)
    assert plain["over_2x_median"] == 0.0 and plain["sd_log_within_group"] == 0.0
    few, many = table(check_frac=0.05), table(check_frac=0.2)
    assert 0.0 < few["over_2.5x_median"] < many["over_2.5x_median"]
    assert few["groups_max_over_2x"] < many["groups_max_over_2x"]


def test_the_command_prints_the_table_beside_the_real_run(tiny_data_dir, tiny_tokenizer_dir):
    out = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            str(tiny_data_dir),
            "--tokenizer",
            str(tiny_tokenizer_dir),
            "--warm-check-frac",
            "0.1",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    rows = {line.split()[0]: line.split()[1:] for line in out.stdout.splitlines()[1:]}
    assert rows["sd_log_within_group"][1] == "0.850" and rows["over_2.5x_median"][1] == "0.062"
    bad = subprocess.run(
        [sys.executable, str(SCRIPT), str(tiny_data_dir), "--warm-check-frac", "1.5"], capture_output=True, text=True
    )
    assert bad.returncode != 0 and "check_frac" in bad.stderr
