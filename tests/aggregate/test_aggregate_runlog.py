"""Round trip through real wandb 0.31 offline run files: log, read back, compare."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sagc.aggregate.errors import CorruptRunFileError, RunNotFoundError
from sagc.aggregate.grid import CellOutputs
from sagc.aggregate.reader import OfflineReader, find_run_files, read_run_file
from sagc.aggregate.runlog import BLOCK_SIZE, read_run_log
from tests.aggregate.aggregate_synthetic import log_offline_run


def _same(a, b) -> bool:
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return a == b


def _cell(train_dir: Path, **kw) -> CellOutputs:
    fields = dict(id="m/grpo/g4/seed0", model="m", algorithm="grpo", sizing="g4", seed=0,
                  train_dir=train_dir, eval_summary=train_dir / "none.json")  # fmt: skip
    fields.update(kw)
    return CellOutputs(**fields)


def test_wandb_version_is_the_pinned_one():
    import wandb

    # The record format parsed by sagc.aggregate.runlog was checked against 0.31.0 only.
    assert wandb.__version__ == "0.31.0"


def test_round_trip_every_logged_value(wandb_env, tmp_path):
    rows = []
    for step in range(1, 401):
        rows.append({
            "step": step,
            "sagc/group_size": [4, 8, 16][step % 3],
            "reward/mean": step / 7.0,
            "sagc/straggler": step % 2,
            "tokens/padding_efficiency": 1.0 / (step + 0.5),
            "odd/nan": float("nan") if step == 5 else 0.25,
            "odd/inf": float("inf") if step == 6 else -1.5,
            "odd/text": f"row {step}",
            "odd/flag": step % 4 == 0,
            "odd/big": -(2**40) - step,
            # A few rows far larger than a 32 KiB block: their records span blocks.
            "odd/long": "x" * (70_000 + step) if step % 100 == 0 else "",
        })  # fmt: skip
    config = {"config_name": "rt", "model": "m", "algorithm": "grpo", "sizing": "g4", "seed": 0,
              "train": {"lr": 1e-6, "steps": [1, 2]}}  # fmt: skip
    log_offline_run(tmp_path / "wandb", rows, config)

    files = find_run_files(tmp_path)
    assert len(files) == 1  # latest-run symlink deduplicated
    assert files[0].stat().st_size > 3 * BLOCK_SIZE
    run = OfflineReader().read(_cell(tmp_path))
    assert run.finished and not run.truncated
    assert run.config == config
    h = run.history
    assert len(h) == len(rows)
    assert not [c for c in h.columns if c.startswith("_")]  # wandb's own keys dropped
    for want, got in zip(rows, h.to_dict("records")):
        assert set(got) == set(want)
        for key, value in want.items():
            assert _same(got[key], value), (want["step"], key, got[key], value)


def test_nested_dict_keys_use_dots(wandb_env, tmp_path):
    log_offline_run(tmp_path / "wandb", [{"step": 1, "a": {"b": 2}}], {})
    run = OfflineReader().read(_cell(tmp_path))
    assert run.history.loc[0, "a.b"] == 2


def test_resumed_cell_merges_segments_later_wins(wandb_env, tmp_path):
    # First segment: steps 1..5, killed after the checkpoint at step 3; the resumed
    # segment restarts at step 4 and logs 4..6. Steps 4, 5 of the first are abandoned.
    first = [{"step": s, "v": float(s), "seg": 1} for s in range(1, 6)]
    second = [{"step": s, "v": 10.0 * s, "seg": 2} for s in range(4, 7)]
    # As a trainer resumes: same run id, resume="allow" (offline: a second run directory).
    log_offline_run(tmp_path / "wandb", first, {"seed": 0}, id="cell0run", resume="allow")
    log_offline_run(tmp_path / "wandb", second, {"seed": 0}, id="cell0run", resume="allow")
    run = OfflineReader().read(_cell(tmp_path))
    assert len(run.sources) == 2
    assert run.history["step"].tolist() == [1, 2, 3, 4, 5, 6]
    assert run.history["seg"].tolist() == [1, 1, 1, 2, 2, 2]
    assert run.history["v"].tolist() == [1.0, 2.0, 3.0, 40.0, 50.0, 60.0]


def test_run_of_another_cell_is_rejected(wandb_env, tmp_path):
    log_offline_run(tmp_path / "wandb", [{"step": 1}], {"sizing": "g16", "seed": 0})
    with pytest.raises(ValueError, match=r"sizing='g16'.*wrong cell"):
        OfflineReader().read(_cell(tmp_path))


def test_missing_run_names_the_directory(tmp_path):
    with pytest.raises(RunNotFoundError, match=str(tmp_path / "wandb")):
        OfflineReader().read(_cell(tmp_path))


def test_killed_run_is_readable(wandb_env, tmp_path):
    """A job killed mid-training (SIGKILL to the trainer and its wandb-core helper, as a
    batch scheduler does) leaves a run file without an exit record: still readable."""
    wandb_dir = tmp_path / "wandb"
    wandb_dir.mkdir()
    script = textwrap.dedent(f"""
        import time, wandb
        from pathlib import Path
        run = wandb.init(mode="offline", dir={str(wandb_dir)!r}, project="p",
                         settings=wandb.Settings(silent=True, console="off"))
        for s in range(1, 41):
            run.log({{"step": s, "v": s * 0.5}})
        path = next(Path(run.dir).parent.glob("run-*.wandb"))
        deadline = time.time() + 30
        while path.stat().st_size < 4096 and time.time() < deadline:
            time.sleep(0.1)  # wait for wandb-core to flush some history
        print("flushed", flush=True)
        time.sleep(120)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], env=dict(os.environ),
                            stdout=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    try:
        assert proc.stdout.readline().strip() == "flushed"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the trainer and its wandb-core, mid-run
        proc.wait(timeout=30)
    run = OfflineReader().read(_cell(tmp_path))
    assert not run.finished
    n = len(run.history)
    assert n >= 1
    assert run.history["step"].tolist() == list(range(1, n + 1))
    assert run.history["v"].tolist() == [s * 0.5 for s in range(1, n + 1)]


def test_header_only_file_is_an_empty_run(tmp_path):
    path = tmp_path / "run-empty.wandb"
    path.write_bytes(b":W&B\xe1\xbe\x00")  # killed before the first record was flushed
    seg = read_run_file(path)
    assert seg.rows == {} and not seg.finished


@pytest.fixture
def run_file(wandb_env, tmp_path) -> Path:
    log_offline_run(tmp_path / "wandb", [{"step": s, "v": s} for s in range(1, 200)], {})
    return find_run_files(tmp_path)[0]


def test_truncated_tail_drops_only_the_last_record(run_file):
    full = read_run_file(run_file)
    data = run_file.read_bytes()
    run_file.write_bytes(data[: len(data) - 5])  # killed inside the last record
    log = read_run_log(run_file)
    assert log.truncated_tail
    cut = read_run_file(run_file)
    assert cut.truncated and cut.rows == full.rows  # the lost record is the exit record
    assert not cut.finished


def test_flipped_byte_is_a_corrupt_file_naming_it(run_file):
    data = bytearray(run_file.read_bytes())
    data[len(data) // 2] ^= 0xFF
    run_file.write_bytes(bytes(data))
    with pytest.raises(CorruptRunFileError, match="checksum mismatch") as err:
        read_run_file(run_file)
    assert str(run_file) in str(err.value)


def test_foreign_file_is_a_corrupt_file(tmp_path):
    path = tmp_path / "run-x.wandb"
    path.write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)
    with pytest.raises(CorruptRunFileError, match=r"run-x\.wandb.*not a wandb 0\.31 run file"):
        read_run_file(path)
