"""Tables from known synthetic runs equal values computed by hand (see conftest.CELL_SPECS)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from sagc import metrics
from sagc.aggregate.api import aggregate
from sagc.aggregate.collect import collect
from sagc.aggregate.grid import parse_grid
from sagc.aggregate.outputs import table_files, table_outputs
from sagc.aggregate.primary import headline_claims
from sagc.aggregate.tables import downstream_table, efficiency_table
from sagc.costs import step_cost
from tests.aggregate.aggregate_synthetic import SEEDS, STEPS, history_rows

SQRT2 = math.sqrt(2)


@pytest.fixture(scope="module")
def collected(synthetic_world):
    root, grid = synthetic_world
    return collect(parse_grid(grid, root=root))


def _row(frame: pd.DataFrame, sizing: str) -> pd.Series:
    rows = frame[frame["sizing"] == sizing]
    assert len(rows) == 1
    return rows.iloc[0]


def test_every_cell_complete(collected):
    assert collected.missing() == {}
    assert [r.run.history["step"].tolist() for r in collected.cells] == [[1, 2, 3, 4, 5, 6]] * 6


def test_efficiency_values_by_hand(collected):
    f = efficiency_table(collected).frame
    assert f["sizing"].tolist() == ["g4", "g16", "sagc"]  # fixed G ascending, then SAGC
    g4, g16, sagc = (_row(f, s) for s in ("g4", "g16", "sagc"))
    # straggler rate: g4 seeds 0 and 2/6; g16 5/6 and 6/6; sagc 2/6 twice
    assert g4["straggler_rate_mean"] == pytest.approx(1 / 6)
    assert g4["straggler_rate_std"] == pytest.approx((2 / 6) / SQRT2)
    assert g16["straggler_rate_mean"] == pytest.approx(11 / 12)
    assert sagc["straggler_rate_mean"] == pytest.approx(1 / 3)
    assert sagc["straggler_rate_std"] == pytest.approx(0.0)
    # wall-clock in minutes: 6 steps x (10, 12) s; (20, 22) s; (12, 14) s
    assert g4["wallclock_min_mean"] == pytest.approx(1.1)
    assert g4["wallclock_min_std"] == pytest.approx(0.2 / SQRT2)
    assert g16["wallclock_min_mean"] == pytest.approx(2.1)
    assert sagc["wallclock_min_mean"] == pytest.approx(1.3)
    # speed-up vs the largest fixed G (g16): geometric mean over seeds of each seed's ratio
    # (seed 0: 20 s / 12 s per step, seed 1: 22 / 14; g4: 20 / 10 and 22 / 12)
    assert set(f["speedup_reference"]) == {"g16"}
    assert g16["speedup"] == pytest.approx(1.0)
    assert sagc["speedup"] == pytest.approx(math.sqrt(20 / 12 * 22 / 14))
    assert g4["speedup"] == pytest.approx(math.sqrt(20 / 10 * 22 / 12))
    # final reward = mean of the last 3 steps: seed 0 (0.4+0.5+0.6)/3, seed 1 +0.1
    assert sagc["final_reward_mean"] == pytest.approx(0.55)
    assert sagc["final_reward_std"] == pytest.approx(0.1 / SQRT2)
    # mean G: sagc seed 0 48/6, seed 1 32/6
    assert sagc["mean_group_size_mean"] == pytest.approx((8 + 32 / 6) / 2)
    assert g16["mean_group_size_mean"] == pytest.approx(16)
    assert g4["mean_length_mean"] == pytest.approx(14.5)
    assert g4["padding_efficiency_mean"] == pytest.approx(0.625)
    # rollout share: g16 15/20 and 11/22
    assert g16["rollout_share_mean"] == pytest.approx((0.75 + 0.5) / 2)
    assert (f["seeds"] == 2).all() and (f["status"] == "complete").all()


def test_efficiency_markdown_and_latex(collected):
    table = efficiency_table(collected)
    md, tex = table.markdown(), table.latex()
    assert (
        "| Model | Algorithm | Sizing | Seeds | Straggler rate (%) | 2nd-half straggler rate (%) | "
        "Mean G | Decode steps / step | Cost speed-up vs g16 |"
    ) in md
    sagc_line = next(line for line in md.splitlines() if "| sagc |" in line)
    cells = [c.strip() for c in sagc_line.strip("|").split("|")]
    assert cells[:4] == ["tiny-a", "grpo", "sagc", "2/2"]
    assert cells[4].startswith("33.3 [")  # 4 of 12 steps straggle
    # steps 4-6: seed 0 quiet, seed 1 straggles once; the t interval over (0, 1/3) reaches
    # below 0 and is cut there
    assert cells[5].startswith("16.7 [0.0, ")
    assert cells[7].startswith("20.0 [")  # decode steps: (4 x 30 + 8 x 15) / 12
    assert cells[8].startswith("1.44× [")  # g16: 11 x 30 + 15 = 345 decode steps; sagc 240
    # Paired CPU and wall-clock ratios, one per seed (20/12 and 22/14): two seeds give one
    # degree of freedom, so the interval is wide although both seeds agree closely.
    logs = np.log([20 / 12, 22 / 14])
    half = stats.t.ppf(0.975, 1) * logs.std(ddof=1) / math.sqrt(2)
    low, high = math.exp(logs.mean() - half), math.exp(logs.mean() + half)
    assert cells[10] == f"1.62× [{low:.2f}, {high:.2f}]" and cells[12] == cells[10]
    f = table.frame.set_index("sizing")
    assert f.loc["sagc", "speedup_low"] == pytest.approx(low) and f.loc["sagc", "speedup_high"] == pytest.approx(high)
    assert cells[11] == "1.30 ± 0.14"
    assert r"1.30 $\pm$ 0.14" in tex and r"1.62$\times$ [" in tex and r"\toprule" in tex
    assert r"Straggler rate (\%)" in tex


def test_downstream_values_by_hand(collected):
    table = downstream_table(collected)
    f = table.frame
    base = f[f["algorithm"] == "base"].iloc[0]
    assert base["aime_accuracy_mean"] == pytest.approx(0.05)
    assert base["aime_accuracy_stderr"] == pytest.approx(0.01)
    g4 = f[(f["algorithm"] == "grpo") & (f["sizing"] == "g4")].iloc[0]
    assert g4["aime_accuracy_mean"] == pytest.approx(0.11)  # seeds 0.10 and 0.12
    assert g4["aime_accuracy_std"] == pytest.approx(0.02 / SQRT2)
    assert g4["gpqa_mean_output_tokens"] == pytest.approx(141.0)  # 100 + 100 * acc
    assert g4["mean_output_tokens"] == pytest.approx((111.0 + 141.0) / 2)
    # The interval is over the two seeds' accuracies (0.10 and 0.12), one degree of freedom.
    half = stats.t.ppf(0.975, 1) * 0.02 / SQRT2 / SQRT2
    assert g4["aime_accuracy_low"] == pytest.approx(max(0.0, 0.11 - half))  # an accuracy ends at 0
    assert g4["aime_accuracy_high"] == pytest.approx(0.11 + half)
    md = table.markdown()
    # One base evaluation: no seeds to spread over, so lm-eval's standard error is shown.
    assert "| tiny-a | base | - | 1/1 | 5.0 ± 1.0 |" in md and "| 115.0 |" in md
    assert "| tiny-a | grpo | g4 | 2/2 | 11.0 [" in md


def test_straggler_structure_by_quarter(collected):
    from sagc.aggregate.tables import straggler_structure

    rows = {r.split("|")[3].strip(): r for r in straggler_structure(collected)[2:]}
    assert set(rows) == {"g4", "g16"}  # fixed sizes only
    # g16: step 1 straggles in both seeds; steps 5-6: seed 0 [1, 0], seed 1 [1, 1].
    assert "| 100.0 " in rows["g16"] and "| 75.0 [" in rows["g16"]


def test_rate_intervals_stay_inside_zero_and_one():
    from types import SimpleNamespace

    from sagc import metrics
    from sagc.aggregate import paired
    from sagc.aggregate.tables import step_interval

    def cell(seed, flags):
        history = pd.DataFrame({metrics.STEP: range(1, 9), metrics.STRAGGLER: flags})
        return SimpleNamespace(complete=True, cell=SimpleNamespace(seed=seed), run=SimpleNamespace(history=history))

    quiet, one = [0] * 8, [0] * 7 + [1]  # seed rates 0, 0 and 1/8
    cells = [cell(0, quiet), cell(1, quiet), cell(2, one)]
    raw = paired.seed_interval([0.0, 0.0, 0.125])
    assert raw.low < 0, "three seeds' rates 0, 0, 0.125: the t interval reaches below 0"
    iv = step_interval(cells, metrics.STRAGGLER)
    assert (iv.estimate, iv.low, iv.high, iv.n) == (pytest.approx(0.125 / 3), 0.0, raw.high, 3)
    assert step_interval(cells, metrics.STEP).low == paired.seed_interval([4.5] * 3).low  # no range


def _by_id(claims, family="primary"):
    return {c.id: c for c in claims if c.family == family}


def _t_interval(values, null):
    """Mean, sd, and the two-sided p of Student's t over per-seed values, by hand."""
    x = np.asarray(values, dtype=float)
    sd = x.std(ddof=1)
    t = (x.mean() - null) / (sd / math.sqrt(x.size))
    return x.mean(), sd, 2 * stats.t.sf(abs(t), x.size - 1)


def test_primary_family_on_two_seeds(collected):
    p = _by_id(headline_claims(collected))
    # The best static G under delta 0.3 is g4 (base rates 0.2 / 0.6), so the family has P4.
    assert set(p) == {"P1", "P2", "P3", "P4"}
    assert {c.pair for c in p.values()} >= {"pooled over 1 model × algorithm strata, sagc vs g16"}
    # P1, per seed: sagc 2/6 and 2/6 against g16 5/6 and 6/6.
    mean, sd, raw = _t_interval([2 / 6 - 5 / 6, 2 / 6 - 6 / 6], 0.0)
    p1 = p["P1"].interval
    assert (p1.estimate, p1.sd, p1.p, p1.df) == (pytest.approx(mean), pytest.approx(sd), pytest.approx(raw), 1)
    assert "91.7% → 33.3%" in p["P1"].detail

    # P2, the registered step cost: per seed log(g16's summed cost / sagc's), from the rows.
    def total(sizing, seed):
        return sum(
            step_cost(r[metrics.DECODE_STEPS], r[metrics.TRAIN_PADDED_TOKENS]) for r in history_rows(sizing, seed)
        )

    logs = [math.log(total("g16", s) / total("sagc", s)) for s in SEEDS]
    assert p["P2"].interval.estimate == pytest.approx(math.exp(np.mean(logs)))
    assert p["P2"].interval.se == pytest.approx(np.std(logs, ddof=1) / SQRT2)
    # P3: the mean over the two tasks of sagc minus g16, per seed 0.10 and 0.14, against -5 pts.
    mean, sd, raw = _t_interval([0.10, 0.14], -0.05)
    assert (p["P3"].interval.estimate, p["P3"].interval.p) == (pytest.approx(mean), pytest.approx(raw))
    # P4 against g4: per seed 0.20 and 0.24.
    assert p["P4"].reference == "best static G" and p["P4"].interval.estimate == pytest.approx(0.22)
    # Holm over the four: 4 x the smallest p first; with one df nothing can hold.
    raws = sorted(c.interval.p for c in p.values())
    assert min(c.p_holm for c in p.values()) == pytest.approx(min(1.0, 4 * raws[0]))
    assert {c.verdict for c in p.values()} == {"inconclusive"}
    # Planned and observed power are stated (the default plan, one stratum of two seeds).
    assert all(0 < c.power_planned < 1 and 0 < c.power_observed < 1 for c in p.values())


def test_budget_and_best_static_secondaries_on_two_seeds(collected):
    claims = headline_claims(collected)
    (budget,) = [c for c in claims if c.family == "secondary S2"]
    # second half (steps 4-6): seed 0 quiet, seed 1 one straggle in three; against delta + eps.
    mean, sd, raw = _t_interval([0.0, 1 / 3], 0.3 + 0.05)
    assert budget.claim == "second-half straggler rate ≤ δ + ε" and budget.reference == "δ + ε = 0.3 + 0.05"
    assert (budget.interval.estimate, budget.interval.p) == (pytest.approx(mean), pytest.approx(raw))
    # Its gate, P1, did not hold: not tested, its interval still there.
    assert budget.verdict == "not tested" and budget.gate == "gate: P1 did not hold"
    best = {c.claim: c for c in claims if c.family == "secondary S6"}
    assert set(best) == {f"{t} accuracy not worse than the best static G (margin 5 pts)" for t in ("aime", "gpqa")}
    for c in best.values():
        assert c.reference == "g4" and c.interval.estimate == pytest.approx(0.22) and c.verdict == "not tested"
    control = [c for c in claims if c.family == "control"]
    assert [(c.controller, c.reference) for c in control] == [("g4", "g16")]
    # g4 against g16 per seed: 0 - 5/6 and 2/6 - 1.
    assert control[0].interval.estimate == pytest.approx(np.mean([-5 / 6, -4 / 6]))


def _relabel(collected, sizing: str, seeds: dict[int, int]):
    """The collected grid with one sizing's seed labels permuted (its runs and evaluations kept)."""
    cells = [
        replace(r, cell=r.cell.model_copy(update={"seed": seeds[r.cell.seed]})) if r.cell.sizing == sizing else r
        for r in collected.cells
    ]
    return replace(collected, cells=cells)


def test_mispaired_seeds_change_the_paired_interval(collected):
    """The claims pair cells by seed. Swapping sagc's seed labels pairs each sagc run with the
    other seed's g16 run: the shared seed effect (+2 pts a seed) no longer cancels, and the
    interval widens. Pairing by position, or not pairing at all, would leave it unchanged."""
    right = _by_id(headline_claims(collected))["P3"].interval
    wrong = _by_id(headline_claims(_relabel(collected, "sagc", {0: 1, 1: 0})))["P3"].interval
    assert right.sd == pytest.approx(0.04 / SQRT2)  # 0.10 and 0.14
    assert wrong.sd == pytest.approx(0.08 / SQRT2)  # 0.36 - 0.20 and 0.30 - 0.22
    assert wrong.high - wrong.low > right.high - right.low
    assert wrong.estimate == pytest.approx(right.estimate)  # a mean of differences cannot tell


def test_length_tail_table_reads_the_largest_g_traces(world_copy):
    from sagc.aggregate.tables import length_tail_table
    from sagc.lengths import REAL_RUN_TAIL, tail_table
    from sagc.trace import TraceStep, write_trace

    root, grid = world_copy
    rng = np.random.default_rng(0)
    groups = {}
    for seed in SEEDS:
        steps = [
            TraceStep(step, 16, tuple(rng.lognormal(4, 0.8, 16).round() + 1 for _ in range(2)))
            for step in range(1, STEPS + 1)
        ]
        write_trace(root / f"results/t/train/tiny-a/grpo/g16/seed{seed}/lengths.jsonl", steps)
        groups[seed] = [g for s in steps for g in s.lengths]
    table = length_tail_table(collect(parse_grid(grid, root=root)))
    rows = table.frame.set_index("model")
    want = tail_table(groups[0] + groups[1])  # the seeds pooled
    assert rows.loc["tiny-a", "blocks"] == want["blocks"] == 2 * STEPS * 2 * 2
    for key in REAL_RUN_TAIL:
        assert rows.loc["tiny-a", key] == pytest.approx(want[key])
        assert rows.loc["real run", key] == REAL_RUN_TAIL[key]


def test_aggregate_writes_documented_files(world_copy):
    root, grid = world_copy
    result = aggregate(parse_grid(grid, root=root), figures=False)
    tables = root / "results/t/tables"
    expected = set(table_files())  # the names the Snakemake rule lists as outputs
    assert expected >= {"efficiency.csv", "efficiency.md", "efficiency.tex", "downstream.tex",
                        "headline.md", "missing.json"}  # fmt: skip
    assert {str(p) for p in result.tables} == set(table_outputs(root / "results/t/tables"))
    assert {p.name for p in tables.iterdir()} == expected
    assert (tables / "missing.json").read_text().strip() == "{}"
    cells = pd.read_csv(tables / "efficiency_cells.csv")
    assert len(cells) == 6
    row = cells[cells["cell"] == "tiny-a/grpo/g16/seed0"].iloc[0]
    assert row["straggler_rate"] == pytest.approx(5 / 6)
    assert row["wallclock_s"] == pytest.approx(120.0)
    csv = pd.read_csv(tables / "efficiency.csv")
    assert csv.loc[csv["sizing"] == "sagc", "speedup"].iloc[0] == pytest.approx(math.sqrt(20 / 12 * 22 / 14), rel=1e-5)
    headline = pd.read_csv(tables / "headline.csv")
    assert set(headline.loc[headline["family"] == "primary", "id"]) == {"P1", "P2", "P3", "P4"}
    assert {"se", "sd", "df", "scale", "power_planned", "power_observed"} <= set(headline.columns)
    assert set(headline["verdict"]) <= {"holds", "fails", "inconclusive", "untestable", "not tested"}
    # What the README's headline test relies on: headline.md's table re-renders from the CSV alone.
    from sagc.aggregate.compare import read_headline
    from sagc.aggregate.verdicts import Claim, summary_markdown

    rows = read_headline(tables / "headline.csv")
    table = "\n".join(summary_markdown([Claim.from_row(r) for r in rows.itertuples()]))
    assert table.count("\n| P") == 4 and table in (tables / "headline.md").read_text()
