"""Tables from known synthetic runs equal values computed by hand (see conftest.CELL_SPECS)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from sagc.aggregate.api import aggregate
from sagc.aggregate.collect import collect
from sagc.aggregate.grid import parse_grid
from sagc.aggregate.outputs import table_files, table_outputs
from sagc.aggregate.tables import downstream_table, efficiency_table
from sagc.aggregate.verdicts import headline_claims

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
    # straggler rate: g4 seeds 1/6 and 2/6; g16 5/6 and 6/6; sagc 2/6 twice
    assert g4["straggler_rate_mean"] == pytest.approx(0.25)
    assert g4["straggler_rate_std"] == pytest.approx((1 / 6) / SQRT2)
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
    assert ("| Model | Algorithm | Sizing | Seeds | Straggler rate (%) | 2nd-half straggler rate (%) | "
            "Mean G | Decode steps / step | Cost speed-up vs g16 |") in md
    sagc_line = next(line for line in md.splitlines() if "| sagc |" in line)
    cells = [c.strip() for c in sagc_line.strip("|").split("|")]
    assert cells[:4] == ["tiny-a", "grpo", "sagc", "2/2"]
    assert cells[4].startswith("33.3 [")  # 4 of 12 steps straggle
    assert cells[5] == "0.0 [0.0, 0.0]"  # steps 4-6 of both seeds are quiet
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


def test_headline_claims_on_two_seeds(collected):
    claims = {c.claim: c for c in headline_claims(collected)}
    assert {c.pair for c in claims.values()} == {"tiny-a GRPO, sagc vs g16"}
    # Per seed: g16 straggles in 5/6 and 6/6 steps, sagc in 2/6 twice: differences -3/6, -4/6.
    # Two seeds are one degree of freedom: t(0.975, 1) = 12.7, so nothing can hold.
    fewer = claims["fewer stragglers"]
    assert fewer.interval.n == 2 and fewer.interval.estimate == pytest.approx(-7 / 12)
    assert fewer.verdict == "inconclusive" and "91.7% → 33.3%" in fewer.detail
    assert fewer.interval.low < -1 and fewer.interval.high > 0
    # sagc is right on 10 more problems of 100 than g16 in both seeds: the same difference
    # twice, a point interval far above -5 points.
    for task in ("aime", "gpqa"):
        acc = claims[f"{task} accuracy not worse (margin 5 pts)"]
        assert acc.interval.estimate == pytest.approx(0.10) and acc.interval.low == pytest.approx(0.10)
        assert acc.verdict == "holds"


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
    assert set(headline["claim"]) >= {"fewer stragglers", "cheaper (decode steps)"}
    assert set(headline["verdict"]) <= {"holds", "fails", "inconclusive"}
