"""The prompt-heterogeneous simulator: worlds, replay with prompt ids, tail batching's effect."""

import json

import numpy as np
import pytest

from sagc.simulate import prompt_world as pw
from sagc.trace import TraceStep, write_trace


def _world(sigma=1.0, k=1.0, n=32, seed=0):
    cfg = pw.PromptWorldConfig(n_prompts=n, tail_coupling=k, lengths={**pw.HETERO, "prompt_sigma": sigma})
    return pw.PromptWorld(cfg, 64, seed)


def test_smaller_groups_see_a_subset_of_the_larger_ones():
    w = _world()
    for prompt, visit in ((0, 0), (5, 3)):
        np.testing.assert_array_equal(w.lengths(10, prompt, visit, 4), w.lengths(10, prompt, visit, 16)[:4])
    assert not np.array_equal(w.lengths(10, 0, 0, 16), w.lengths(10, 0, 1, 16))


def test_prompts_keep_their_own_scale_and_token_feature():
    w = _world(sigma=0.8, k=0.0, n=64)
    means = np.array([np.log(np.concatenate([w.lengths(0, i, v, 16) for v in range(8)])).mean() for i in range(64)])
    assert np.corrcoef(means, w.log_scale)[0, 1] > 0.95
    assert 0.3 < np.corrcoef(np.log(w.tokens), w.log_scale)[0, 1] < 0.9  # feature_corr 0.6


def test_tail_batching_cuts_decode_steps_when_prompts_differ():
    """Fixed G=16, same world and seeds: gathering long prompts lowers the summed longest
    rollouts, and every prompt is still visited equally often."""
    suite = pw.hetero_suite(
        seeds=4,
        steps=64,
        n_prompts=32,
        prompt_sigma=1.0,
        tail_coupling=1.0,
        policies=tuple(p for p in pw.POLICIES if p.name in ("g16", "sagc-prompt-g16")),
    )
    rows, summary = pw.run(suite)
    tail = next(r for r in summary if r["policy"] == "sagc-prompt-g16")
    assert tail["decode_speedup"] > 1.1
    assert 0.1 < tail["long_share"] < 0.4
    world = suite.world(0)
    for p in suite.policies:
        sizer, stream = pw.build(p, world, pw.PromptStream(world.n, 0), suite.blocks())
        seen = []
        for _ in range(16):  # 16 steps x 4 prompts = 2 epochs of 32
            sizer.next_group_size()
            idx = stream.take(4)
            seen += idx
            block = np.stack([world.lengths(0, i, 0, 16) for i in idx])
            sizer.observe(block)
            stream.observe(idx, block)
        assert sorted(seen) == sorted(list(range(32)) * 2)


def test_replay_uses_each_prompts_recorded_groups(tmp_path):
    steps = [
        TraceStep(1, 4, (np.array([10, 11, 12, 13.0]), np.array([90, 91, 92, 93.0]))),
        TraceStep(2, 4, (np.array([20, 21, 22, 23.0]), np.array([14, 15, 16, 17.0]))),
    ]
    path = tmp_path / "lengths.jsonl"
    write_trace(path, steps)
    lines = path.read_text().splitlines()
    ids = [[7, 3], [3, 7]]
    path.write_text("".join(json.dumps({**json.loads(line), "prompts": p}) + "\n" for line, p in zip(lines, ids)))
    replay = pw.PromptReplay(str(path), seed=0)
    assert replay.n == 2  # prompt 7 -> 0, prompt 3 -> 1
    assert sorted(replay.lengths(0, 0, 0, 4)) == [10, 11, 12, 13]
    assert sorted(replay.lengths(0, 0, 1, 4)) == [14, 15, 16, 17]
    assert set(replay.lengths(0, 1, 0, 8)) <= {90, 91, 92, 93}
    old = tmp_path / "old.jsonl"
    write_trace(old, steps)
    assert pw.read_trace(path)[1].prompts == (3, 7)
    with pytest.raises(ValueError, match="no 'prompts' key"):
        pw.PromptReplay(str(old))


@pytest.mark.parametrize(
    "kw, key",
    [
        ({"n_prompts": 1}, "world.n_prompts"),
        ({"tail_coupling": -1}, "world.tail_coupling"),
        ({"feature_corr": 2}, "world.feature_corr"),
        ({"lengths": {**pw.HETERO, "sigma": -1}}, "lengths.sigma"),
    ],
)
def test_bad_world_values_name_the_key(kw, key):
    with pytest.raises(ValueError, match=key):
        pw.PromptWorldConfig(**kw)


def test_cli_writes_the_comparison(tmp_path, capsys):
    from sagc.simulate.cli import main

    assert main(["prompt", "--out", str(tmp_path), "--seeds", "2", "--steps", "16", "--prompt-sigma", "0.5"]) == 0
    table = (tmp_path / "prompt.md").read_text()
    for p in pw.POLICIES:
        assert f"| {p.name} |" in table
    assert "sagc-prompt-fast / sagc-fast" in table
    assert (tmp_path / "runs.csv").read_text().count("\n") == 1 + 2 * len(pw.POLICIES)
    assert main(["prompt", "--out", str(tmp_path), "--seeds", "1"]) == 2  # an interval needs two seeds
