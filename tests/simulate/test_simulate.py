"""Tests of the straggler simulator (sagc.simulate): cost model, flags, replay, seeds, errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sagc.controller import FixedGroupSize, SAGCConfig, SAGCController
from sagc.lengths import as_groups, block_ratios, length_stats
from sagc.simulate import (
    ParametricLengthConfig,
    ParametricLengths,
    ReplayConfig,
    ReplayLengths,
    SimConfig,
    SweepConfig,
    ThroughputConfig,
    TraceStep,
    load_config,
    read_trace,
    run_controller,
    run_fixed,
    simulate,
    step_costs,
    summary_table,
    write_trace,
)
from sagc.simulate.calibrate import calibrate
from sagc.simulate.cli import main as cli_main
from sagc.simulate.sweep import best_settings, run_sweep

TP = ThroughputConfig(
    decode_step_s=0.01,
    decode_token_s=0.001,
    prefill_token_s=0.0001,
    train_token_s=0.002,
    step_overhead_s=1.0,
    prompt_tokens=10,
)


# ------------------------------------------------------------- step-time model


def test_step_costs_match_hand_computation_continuous_padded():
    block = np.array([[[10.0, 30.0], [20.0, 40.0]]])  # 1 step, 2 prompts, G=2
    c = step_costs(block, TP)
    rows, mx, total = 4, 40.0, 100.0
    rollout = 0.0001 * rows * 10 + 0.01 * mx + 0.001 * total  # 0.004 + 0.4 + 0.1
    train = 0.002 * rows * (10 + mx)  # padded to the longest: 0.4
    assert c.rollout_s[0] == pytest.approx(0.504)
    assert c.rollout_s[0] == pytest.approx(rollout)
    assert c.train_s[0] == pytest.approx(train) == pytest.approx(0.4)
    assert c.step_s[0] == pytest.approx(1.0 + 0.504 + 0.4)
    assert c.tokens[0] == total and c.padded_tokens[0] == rows * mx


def test_step_costs_static_batching_and_packed_training():
    tp = ThroughputConfig(**{**TP.__dict__, "decode_batching": "static", "train_padding": False})
    block = np.array([[[10.0, 30.0], [20.0, 40.0]]])
    c = step_costs(block, tp)
    # Static batching decodes every row to the longest; packed training trains on sum(L).
    assert c.rollout_s[0] == pytest.approx(0.004 + 0.4 + 0.001 * 4 * 40)
    assert c.train_s[0] == pytest.approx(0.002 * (4 * 10 + 100))


def test_one_straggler_costs_more_than_many_short_rollouts():
    short = np.full((1, 2, 4), 100.0)
    one_long = short.copy()
    one_long[0, 0, 0] = 1000.0
    assert step_costs(one_long, TP).step_s[0] > step_costs(short, TP).step_s[0] * 3


def test_straggler_ratio_hand_cases_both_scopes():
    block = np.array([[[1.0, 2.0], [3.0, 9.0]]])
    # step: max 9 / median(1,2,3,9)=2.5 ; group: max(2/1.5, 9/6) = 1.5
    assert block_ratios(block, "step")[0] == pytest.approx(9 / 2.5)
    assert block_ratios(block, "group")[0] == pytest.approx(1.5)
    # a median below one token is floored at one (sagc.lengths.MIN_MEDIAN)
    assert block_ratios(np.array([[[0.0, 0.0, 5.0]]]), "step")[0] == 5.0
    with pytest.raises(ValueError, match="scope"):
        block_ratios(block, "batch")


def test_vectorised_ratio_is_bitwise_the_controllers():
    rng = np.random.default_rng(3)
    block = np.rint(rng.lognormal(6, 0.5, size=(200, 3, 6)))
    for scope in ("step", "group"):
        fast = block_ratios(block, scope)
        slow = [length_stats(as_groups(b), scope).ratio for b in block]
        assert fast.tolist() == slow


# ------------------------------------------------------------- fast path == loop


def _cfg(**kw):
    base = dict(steps=300, prompts_per_step=4, sizings=("g4", "g8", "sagc"), seed=5)
    base.update(kw)
    return SimConfig(**base)


@pytest.mark.parametrize("scope", ["step", "group"])
def test_fixed_fast_path_equals_controller_loop(scope):
    cfg = _cfg(sagc=SAGCConfig(scope=scope))
    src = ParametricLengths(cfg.lengths, cfg.steps, cfg.prompts_per_step, cfg.seed)
    fast = run_fixed(8, src, cfg.steps, 16, cfg.throughput, tau=2.0, scope=scope)
    slow = run_controller(FixedGroupSize(8, tau=2.0, scope=scope), src, cfg.steps, 16, cfg.throughput)
    assert fast.straggler.tolist() == slow.straggler.tolist()
    assert 0 < fast.straggler.sum() < cfg.steps  # the case is not trivial
    np.testing.assert_array_equal(fast.ratio, slow.ratio)
    np.testing.assert_array_equal(fast.step_s, slow.step_s)
    assert simulate(cfg, fast_fixed=True)["g4"].summary() == simulate(cfg, fast_fixed=False)["g4"].summary()


def test_simulator_reports_the_issue_metrics_and_smaller_g_is_faster():
    rows = {r["sizing"]: r for r in summary_table(simulate(_cfg()))}
    for key in (
        "straggler_rate",
        "total_hours",
        "mean_group_size",
        "padding_efficiency",
        "rollout_share",
        "speedup_vs_g4",
        "time_saved_vs_g8",
    ):
        assert key in rows["sagc"]
    assert rows["g4"]["total_hours"] < rows["g8"]["total_hours"]
    assert rows["g4"]["straggler_rate"] <= rows["g8"]["straggler_rate"]
    assert rows["g8"]["speedup_vs_g8"] == pytest.approx(1.0)
    assert 4 <= rows["sagc"]["mean_group_size"] <= 16
    assert 0 < rows["g8"]["padding_efficiency"] < 1


def test_any_group_sizer_runs_through_a_factory():
    class Alternating:
        candidates = (4, 8)
        max_group_size = 8

        def __init__(self):
            self.t, self.inner = 0, FixedGroupSize(4)

        def next_group_size(self):
            self.t += 1
            return 4 if self.t % 2 else 8

        def observe(self, lengths):
            return self.inner.observe(lengths)

    def factory(name, sc):
        return Alternating() if name == "sagc-alt" else FixedGroupSize(int(name[1:]), sc.tau)

    res = simulate(_cfg(sizings=("g4", "sagc-alt")), sizer_factory=factory)
    assert res["sagc-alt"].group_size[:4].tolist() == [4, 8, 4, 8]


# ------------------------------------------------------------- determinism, pool


def test_deterministic_per_seed_and_seed_matters():
    a, b, c = simulate(_cfg()), simulate(_cfg()), simulate(_cfg(seed=6))
    for name in a:
        np.testing.assert_array_equal(a[name].step_s, b[name].step_s)
        np.testing.assert_array_equal(a[name].group_size, b[name].group_size)
    assert not np.array_equal(a["g8"].step_s, c["g8"].step_s)
    assert not np.array_equal(a["sagc"].group_size, c["sagc"].group_size)


def test_pool_prefix_does_not_depend_on_width_and_lengths_drift():
    cfg = ParametricLengthConfig(median_start=200, median_end=2000, tail_prob_start=0, tail_prob_end=0)
    src = ParametricLengths(cfg, 2000, 4, seed=1)
    wide = np.concatenate([b for _, b in src.blocks(2000, 16)])
    narrow = np.concatenate([b for _, b in src.blocks(2000, 8)])
    np.testing.assert_array_equal(wide[:, :, :8], narrow)
    assert np.median(wide[-100:]) > 5 * np.median(wide[:100])
    assert wide.min() >= cfg.min_tokens and wide.max() <= cfg.max_tokens
    assert np.all(wide == np.rint(wide))


def test_tail_probability_controls_runaways():
    base = dict(median_start=500, median_end=500, sigma=0.1, prompt_sigma=0.0, tail_min=3.0)
    none = ParametricLengths(ParametricLengthConfig(**base, tail_prob_start=0, tail_prob_end=0), 500, 4, 0)
    some = ParametricLengths(ParametricLengthConfig(**base, tail_prob_start=0.05, tail_prob_end=0.05), 500, 4, 0)
    x0 = np.concatenate([b for _, b in none.blocks(500, 8)])
    x1 = np.concatenate([b for _, b in some.blocks(500, 8)])
    assert (x0 > 1400).mean() == 0
    assert (x1 >= 1500).mean() == pytest.approx(0.05, abs=0.01)


# ------------------------------------------------------------- replay


def _recorded_trace(tmp_path, g=4, steps=60, prompts=3, seed=0):
    """A trace written as the trainer does, with the flags its FixedGroupSize computed."""
    rng = np.random.default_rng(seed)
    ctrl = FixedGroupSize(g, tau=2.0)
    recs = []
    for t in range(1, steps + 1):
        lengths = np.rint(rng.lognormal(5, 0.45, size=(prompts, g))).tolist()
        flag = ctrl.observe(lengths).straggler
        recs.append(TraceStep(t, g, tuple(np.asarray(x) for x in lengths), flag))
    path = tmp_path / "lengths.jsonl"
    write_trace(path, recs)
    return path, [r.straggler for r in recs]


def test_replay_with_fixed_controller_reproduces_recorded_flags(tmp_path):
    path, flags = _recorded_trace(tmp_path)
    assert 0 < sum(flags) < len(flags)
    cfg = SimConfig(source="replay", lengths=ReplayConfig(trace=str(path)), sizings=("g4", "g8", "sagc"), seed=9)
    res = simulate(cfg)  # pool width 16: the recorded G=4 groups are bootstrapped up
    assert res["g4"].straggler.tolist() == flags
    assert res["g4"].steps == len(flags)
    loop = simulate(cfg, fast_fixed=False)
    assert loop["g4"].straggler.tolist() == flags


def test_replay_resampling_definition(tmp_path):
    path, _ = _recorded_trace(tmp_path, g=8, steps=5)
    trace = read_trace(path)
    src = ReplayLengths(trace, ReplayConfig(trace=str(path)), seed=1)
    ((_, pool),) = list(src.blocks(5, 12))
    for t, rec in enumerate(trace):
        for i, grp in enumerate(rec.lengths):
            # first 8 = the recorded group in some order; the extras come from that group
            assert sorted(pool[t, i, :8]) == sorted(grp)
            assert set(pool[t, i, 8:]) <= set(grp)
    with pytest.raises(ValueError, match="cycle"):
        list(src.blocks(6, 12))
    cyc = ReplayLengths(trace, ReplayConfig(trace=str(path), cycle=True), seed=1)
    assert next(iter(cyc.blocks(12, 8)))[1].shape == (12, 3, 8)


def test_replay_of_variable_prompt_counts(tmp_path):
    recs = [
        TraceStep(1, 2, (np.array([10.0, 10.0]),), None),
        TraceStep(2, 2, (np.array([10.0, 50.0]), np.array([10.0, 10.0])), None),
    ]
    write_trace(tmp_path / "l.jsonl", recs)
    cfg = SimConfig(source="replay", lengths=ReplayConfig(trace=str(tmp_path / "l.jsonl")), sizings=("g2",))
    r = simulate(cfg)["g2"]
    assert r.straggler.tolist() == [False, True]
    assert r.summary()["rollouts"] == 6


@pytest.mark.parametrize(
    "line, message",
    [
        ("not json", "not valid JSON"),
        ('{"step": 1, "lengths": [[1, 2]]}', "missing key 'group_size'"),
        ('{"step": 1, "group_size": 2, "lengths": [[1, 2, 3]]}', "group 0 has 3 lengths"),
        ('{"step": 1, "group_size": 2, "lengths": [1, 2]}', "list of lists"),
        ('{"step": 1, "group_size": 2, "lengths": [[1, -2]]}', "negative"),
    ],
)
def test_bad_trace_lines_are_rejected_with_file_and_line(tmp_path, line, message):
    path = tmp_path / "lengths.jsonl"
    path.write_text('{"step": 0, "group_size": 2, "lengths": [[1, 2]]}\n' + line + "\n")
    with pytest.raises(ValueError, match=message) as e:
        read_trace(path)
    assert "lengths.jsonl:2" in str(e.value)


# ------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "data, key",
    [
        ({"steps": 0}, "steps"),
        ({"prompts_per_step": 2.5}, "prompts_per_step"),
        ({"sizings": ["g1"]}, "sizings"),
        ({"sizings": ["fixed16"]}, "sizings"),
        ({"stepz": 10}, "stepz"),
        ({"throughput": {"decode_step_s": -1}}, "throughput.decode_step_s"),
        ({"throughput": {"decode_batching": "paged"}}, "throughput.decode_batching"),
        ({"throughput": {"gpu": "h200"}}, "gpu"),
        ({"lengths": {"sigma": float("nan")}}, "lengths.sigma"),
        ({"lengths": {"tail_prob_end": 1.5}}, "lengths.tail_prob_end"),
        ({"lengths": {"min_tokens": 10, "max_tokens": 5}}, "lengths.max_tokens"),
        ({"sagc": {"delta": 2}}, "delta"),
        ({"source": "replay"}, "lengths.trace"),
        ({"source": "wandb"}, "source"),
        ({"sweep": {"tau": [0.5]}}, "sweep.tau"),
    ],
)
def test_invalid_parameters_are_rejected_naming_the_key(data, key):
    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        SimConfig.from_dict(data)


def test_load_config_names_the_file(tmp_path):
    p = tmp_path / "sim.yaml"
    p.write_text("steps: -3\n")
    with pytest.raises(ValueError, match="sim.yaml.*steps"):
        load_config(p)
    with pytest.raises(ValueError, match="not found"):
        load_config(tmp_path / "missing.yaml")


def test_sizer_wider_than_pool_is_rejected():
    src = ParametricLengths(ParametricLengthConfig(), 10, 2, 0)
    with pytest.raises(ValueError, match="pool"):
        run_controller(SAGCController(SAGCConfig(candidates=(4, 32))), src, 10, 16, TP)


# ------------------------------------------------------------- sweep, calibration, CLI


def test_sweep_grid_and_best_settings():
    cfg = _cfg(steps=200, sizings=("g4", "g16", "sagc"))
    rows = run_sweep(cfg, SweepConfig(tau=(2.0, 3.0), delta=(0.2, 0.4)))
    assert [(r["tau"], r["delta"]) for r in rows] == [(2.0, 0.2), (2.0, 0.4), (3.0, 0.2), (3.0, 0.4)]
    # a larger tau can only lower the fixed-G straggler rate
    assert rows[2]["straggler_rate_g16"] <= rows[0]["straggler_rate_g16"]
    best = best_settings(rows)
    assert best["reference"] == "speedup_vs_g16"
    assert best["fastest"]["speedup_vs_g16"] == max(r["speedup_vs_g16"] for r in rows)


def test_calibration_small_grid_and_the_exchangeability_bound():
    base = SimConfig(steps=200, prompts_per_step=4)
    result = calibrate(base, grid={"sigma": (0.3, 0.4), "tail_prob_end": (0.01,), "delta": (0.3,)})
    losses = [p["loss"] for p in result["points"]]
    assert losses == sorted(losses) and len(losses) == 2
    best = result["best"]
    # at G=16 each prompt holds four G=4 draws: the G=4 rate cannot fall far below the bound
    bound = 1 - (1 - best["straggler_rate_g16"]) ** 0.25
    assert best["straggler_rate_g4"] >= bound - 0.1
    assert result["at_paper_scale"]["g16"]["total_hours"] == pytest.approx(29.5, rel=0.02)
    with pytest.raises(ValueError, match="unknown parameter"):
        calibrate(base, grid={"sigmaa": (0.3,)})


def test_cli_run_writes_the_listed_files(tmp_path, capsys):
    cfg = tmp_path / "sim.yaml"
    cfg.write_text(
        "name: t\nsteps: 150\nprompts_per_step: 2\nsizings: [g4, g8, sagc]\nsweep: {tau: [2.0, 3.0], delta: [0.3]}\n"
    )
    rc = cli_main(
        ["run", "--config", str(cfg), "--out-table", str(tmp_path / "tab"), "--out-figures", str(tmp_path / "fig")]
    )
    assert rc == 0
    for f in ("summary.csv", "summary.json", "sweep.csv"):
        assert (tmp_path / "tab" / f).stat().st_size > 0
    for f in ("sim_sizing.png", "sim_sizing.pdf", "sim_sweep.png", "sim_sweep.pdf"):
        assert (tmp_path / "fig" / f).stat().st_size > 0
    summary = json.loads((tmp_path / "tab" / "summary.json").read_text())
    assert [r["sizing"] for r in summary["sizings"]] == ["g4", "g8", "sagc"]
    assert "sagc:" in capsys.readouterr().out
    bad = tmp_path / "bad.yaml"
    bad.write_text("steps: 0\n")
    assert cli_main(["run", "--config", str(bad), "--out-table", str(tmp_path), "--out-figures", str(tmp_path)]) == 2
