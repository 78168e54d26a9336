"""A cell trained in a fork of the warm interpreter (sagc.warm) is the cell trained in a
fresh one, bit for bit: the same model file, the same G trajectory, straggler flags,
rewards and losses. The pipeline runs every local tiny-world cell the first way."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sagc import warm

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forks")]

SRC = str(Path(__file__).resolve().parents[2] / "src")
TIMING = {"wallclock_s", "cpu_s", "rollout_share", "step_s", "rollout_s", "cpu_total_s", "final_dir"}


def _untimed(done: dict) -> dict:
    strip = lambda row: {k: v for k, v in row.items() if k not in TIMING}  # noqa: E731
    return {**strip(done), "history": [strip(r) for r in done["history"]]}


def _sha(path: Path) -> str:
    return hashlib.sha1(path.read_bytes()).hexdigest()


def test_a_cell_trained_warm_equals_the_cell_trained_fresh(make_cell, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAGC_WARM")}
    env["PYTHONPATH"] = os.pathsep.join([SRC, *filter(None, [env.get("PYTHONPATH")])])
    env["WANDB_MODE"] = "offline"
    socket_path = tmp_path / "socket"
    server = subprocess.Popen([sys.executable, "-m", "sagc.warm", "serve", "--socket", str(socket_path),
                               "--preload", ",".join(warm.TINY_PRELOAD)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        runs = {}
        for how in ("fresh", "warm"):
            out = tmp_path / how
            config = tmp_path / f"{how}.json"
            cell = make_cell(out, sizing="sagc", steps=6, save_steps=3)
            config.write_text(json.dumps(cell))
            if how == "warm":
                deadline = time.monotonic() + 300
                while not socket_path.exists():
                    assert server.poll() is None, server.stdout.read()
                    assert time.monotonic() < deadline, "the warm server did not start"
                    time.sleep(0.1)
                cmd = [sys.executable, "-m", "sagc.warm", "-m", "sagc.train", "--config", str(config)]
                job_env = {**env, warm.SOCKET_ENV: str(socket_path)}
            else:
                cmd, job_env = [sys.executable, "-m", "sagc.train", "--config", str(config)], env
            proc = subprocess.run(cmd, env=job_env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
            assert proc.returncode == 0, proc.stderr[-3000:]
            assert "sagc.warm: a fresh interpreter" not in proc.stderr
            runs[how] = (json.loads((out / "done.json").read_text()), _sha(out / "final" / "model.safetensors"))
    finally:
        server.terminate()
        server.wait(timeout=30)
    (fresh, fresh_sha), (forked, forked_sha) = runs["fresh"], runs["warm"]
    assert forked_sha == fresh_sha
    assert len(set(fresh["group_sizes"])) > 1, "a cell whose G never moved would show little"
    assert _untimed(forked) == {**_untimed(fresh), "config_fingerprint": forked["config_fingerprint"]}
