"""A real (tiny, CPU) training run with the tail-batching stream and the sagc-prompt policy."""

from __future__ import annotations

import json

import pytest
import torch

from sagc.train.config import TrainConfig
from tests.train.conftest import cell_dict

pytestmark = pytest.mark.slow


def _prompt_cell(world, out, tmp_path, sizing, steps, n_prompts=8):
    """A cell over the first ``n_prompts`` problems, so that a short run spans epochs."""
    data = tmp_path / f"train{n_prompts}.jsonl"
    data.write_text("".join(world["data"].read_text().splitlines(keepends=True)[:n_prompts]))
    cfg = cell_dict({**world, "data": data}, out, sizing=sizing, steps=steps, save_steps=4)
    sagc = cfg["sizing"].pop("sagc")
    cfg["sizing"]["sagc_prompt"] = {
        **sagc,
        "eta": 2.0,
        "long_fraction": 0.25,
        **({"group_size": 8} if sizing.endswith("-g8") else {}),
    }
    cfg["wandb"]["mode"] = "disabled"
    return cfg


@pytest.mark.parametrize("sizing", ["sagc-prompt", "sagc-prompt-g8"])
def test_tail_batched_training_covers_every_prompt_per_epoch_and_checkpoints(train_world, tmp_path, sizing):
    from sagc.train.run import build_trainer

    torch.set_num_threads(1)
    out = tmp_path / "run"
    cfg = TrainConfig.from_dict(_prompt_cell(train_world, out, tmp_path, sizing, steps=8))
    trainer = build_trainer(cfg)
    trainer.train()

    trace = [s.trace_step() for s in trainer.steps]  # what lengths.jsonl holds
    assert len(trace) == 8
    ids = [i for t in trace for i in t.prompts]
    assert sorted(ids[:8]) == sorted(ids[8:]) == list(range(8))  # two epochs, each prompt once
    for t in trace:
        assert len(t.prompts) == len(t.lengths) == 2
    # The second epoch knows every prompt: its 2 predicted-long prompts (a quarter of 8)
    # are deferred into one long round.
    flags = [t.long_round for t in trace]
    assert sum(flags[4:]) == 1
    assert [h["long_round"] for h in trainer.history] == flags
    if sizing == "sagc-prompt-g8":
        assert {h["group_size"] for h in trainer.history} == {8}
    else:
        assert trainer.group_sizer.state_dict()["long"]["step"] == sum(flags)

    # The checkpoint's state restores stream and policy exactly in a fresh trainer.
    state = json.loads((out / "checkpoints" / "checkpoint-8" / "sagc_state.json").read_text())
    fresh = build_trainer(cfg)
    fresh.load_sagc_state(state)
    assert fresh.prompt_stream.state_dict() == trainer.prompt_stream.state_dict()
    assert fresh.group_sizer.state_dict() == trainer.group_sizer.state_dict()
    assert fresh.prompt_stream.take(2) == trainer.prompt_stream.take(2)


def test_killed_tail_batched_run_resumes_exactly(train_world, tmp_path):
    """sagc-prompt over 8 prompts (an epoch every 4 steps), killed (SIGKILL) after step 6
    with the last checkpoint at step 4, restarted with the same command: the same prompts,
    round kinds and G at every step as an uninterrupted run."""
    from sagc.trace import read_trace
    from sagc.train.run import run_cell
    from tests.train.test_cli import KILL_SCRIPT, _run

    def cell(name):
        cfg = _prompt_cell(train_world, tmp_path / name, tmp_path, "sagc-prompt", steps=8)
        cfg["sizing"]["sagc_prompt"]["queue_rounds"] = 1  # long rounds within each epoch
        return cfg

    want = run_cell(TrainConfig.from_dict(cell("ref")))
    (tmp_path / "cut.json").write_text(json.dumps(cell("cut")))
    (tmp_path / "kill.py").write_text(KILL_SCRIPT)
    killed = _run(["kill.py", "cut.json", "6", "1"], tmp_path)
    assert killed.returncode == -9, killed.stderr[-3000:]
    resumed = _run(["-m", "sagc.train", "--config", "cut.json"], tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]

    got = json.loads((tmp_path / "cut" / "done.json").read_text())
    assert got["resumed_from"].endswith("checkpoint-4")
    for key in ("group_size", "straggler", "long_round", "length_max", "reward_mean"):
        assert [h[key] for h in got["history"]] == [h[key] for h in want["history"]], key
    traces = [
        [(t.prompts, t.long_round, [g.tolist() for g in t.lengths]) for t in read_trace(d / "lengths.jsonl")]
        for d in (tmp_path / "ref", tmp_path / "cut")
    ]
    assert traces[0] == traces[1]
    assert any(t[1] for t in traces[0][4:])  # a long round after the resume point
