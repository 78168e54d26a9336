"""Tables from known synthetic runs equal values computed by hand (see conftest.CELL_SPECS)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from sagc.aggregate.api import aggregate
from sagc.aggregate.collect import collect
from sagc.aggregate.grid import parse_grid
from sagc.aggregate.outputs import table_files, table_outputs
from sagc.aggregate.tables import downstream_table, efficiency_table, headline_claims

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
    # speed-up vs the largest fixed G (g16), ratio of seed means
    assert set(f["speedup_reference"]) == {"g16"}
    assert g16["speedup"] == pytest.approx(1.0)
    assert sagc["speedup"] == pytest.approx(2.1 / 1.3)
    assert g4["speedup"] == pytest.approx(2.1 / 1.1)
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
    # Paired CPU and wall-clock ratios: 252 s / 156 s overall (seed 0: 20/12 per step,
    # seed 1: 22/14), so the interval is narrow around 1.62 and well above 1.
    assert cells[10].startswith("1.62× [1.5") and cells[12] == cells[10]
    f = table.frame.set_index("sizing")
    assert 1.5 < f.loc["sagc", "speedup_low"] < 252 / 156 < f.loc["sagc", "speedup_high"] < 1.7
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
    # The interval comes from the per-problem samples: 11 % of 200 problem evaluations.
    assert g4["aime_accuracy_low"] < 0.11 < g4["aime_accuracy_high"]
    md = table.markdown()
    assert "| tiny-a | base | - | 1/1 | 5.0 [" in md and "| 115.0 |" in md
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

    flags = [0, 0, 0, 0, 0, 0, 0, 1]  # one straggler in 8 steps
    history = pd.DataFrame({metrics.STEP: range(1, 9), metrics.STRAGGLER: flags})
    cell = SimpleNamespace(complete=True, cell=SimpleNamespace(seed=0), run=SimpleNamespace(history=history))
    raw = paired.mean_interval([np.array(flags, dtype=float)])
    assert raw.low < 0, "batch means 0, 0, 0, 0.5: the t interval reaches below 0"
    iv = step_interval([cell], metrics.STRAGGLER)
    assert (iv.estimate, iv.low, iv.high) == (0.125, 0.0, raw.high)
    assert step_interval([cell], metrics.STEP).low == paired.mean_interval([np.arange(1.0, 9)]).low  # no range


def test_headline_claims(collected):
    claims = {c.claim: c for c in headline_claims(collected)}
    assert {c.pair for c in claims.values()} == {"tiny-a GRPO, sagc vs g16 (2 seeds, 12 paired steps)"}
    fewer = claims["fewer stragglers"]
    assert fewer.verdict == "holds" and "91.7% → 33.3%" in fewer.detail and "-58.3 pts [" in fewer.detail
    cheaper = claims["cheaper (decode steps)"]
    assert cheaper.verdict == "holds" and "cost speed-up 1.44× [" in cheaper.detail
    # Rewards are identical step by step (0.1 x step + 0.1 x seed for every sizing).
    reward = claims["reward not worse (margin 0.05)"]
    assert reward.verdict == "holds" and "+0.000 [+0.000, +0.000]" in reward.detail
    # sagc is right on 10 more problems of 100 than g16, in both seeds and both tasks.
    for task in ("aime", "gpqa"):
        acc = claims[f"{task} accuracy not worse (margin 5 pts)"]
        assert acc.verdict == "holds" and "+10.0 pts [" in acc.detail and "200 paired" in acc.detail


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
    assert csv.loc[csv["sizing"] == "sagc", "speedup"].iloc[0] == pytest.approx(2.1 / 1.3, rel=1e-5)
