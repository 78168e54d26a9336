"""Missing / unfinished cells are named and fail (or are marked), corrupt input raises."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from sagc.aggregate.__main__ import main
from sagc.aggregate.api import aggregate
from sagc.aggregate.errors import CorruptRunFileError, DamagedRunError, MissingCellsError
from sagc.aggregate.grid import load_grid, parse_grid
from sagc.aggregate.reader import find_run_files


def _add_absent_g8(grid: dict) -> dict:
    """A g8 sizing that never ran: no train dir, no eval summary."""
    grid["cells"].append({
        "id": "tiny-a/grpo/g8/seed0", "model": "tiny-a", "algorithm": "grpo", "sizing": "g8",
        "seed": 0, "train_dir": "results/t/train/tiny-a/grpo/g8/seed0",
        "eval_summary": "results/t/eval/tiny-a/grpo/g8/seed0/summary.json",
    })  # fmt: skip
    return grid


def _unfinish_sagc_seed1(root) -> None:
    (root / "results/t/train/tiny-a/grpo/sagc/seed1/done.json").unlink()


def test_missing_and_unfinished_cells_are_named(world_copy):
    root, grid = world_copy
    _add_absent_g8(grid)
    _unfinish_sagc_seed1(root)
    with pytest.raises(MissingCellsError) as err:
        aggregate(parse_grid(grid, root=root), figures=False)
    missing = err.value.missing
    assert set(missing) == {"tiny-a/grpo/g8/seed0", "tiny-a/grpo/sagc/seed1"}
    assert any("no W&B run" in why for why in missing["tiny-a/grpo/g8/seed0"])
    assert any("evaluation summary not found" in why for why in missing["tiny-a/grpo/g8/seed0"])
    assert missing["tiny-a/grpo/sagc/seed1"] == [
        f"training unfinished: no done.json in {root / 'results/t/train/tiny-a/grpo/sagc/seed1'}"
    ]
    message = str(err.value)
    assert "tiny-a/grpo/g8/seed0" in message and "--allow-partial" in message
    assert not (root / "results/t/tables").exists()  # nothing written on failure


def test_too_few_steps_is_unfinished(world_copy):
    root, grid = world_copy
    grid["cells"][0]["steps"] = 10
    with pytest.raises(MissingCellsError, match="last logged step 6 of 10"):
        aggregate(parse_grid(grid, root=root), figures=False)


def test_partial_tables_mark_missing_cells(world_copy):
    root, grid = world_copy
    _add_absent_g8(grid)
    _unfinish_sagc_seed1(root)
    grid["allow_partial"] = True
    result = aggregate(parse_grid(grid, root=root), figures=False)
    tables = root / "results/t/tables"
    assert set(json.loads((tables / "missing.json").read_text())) == set(result.missing)

    eff = pd.read_csv(tables / "efficiency.csv")
    g8 = eff[eff["sizing"] == "g8"].iloc[0]
    assert g8["status"] == "missing" and g8["seeds"] == 0
    assert math.isnan(g8["straggler_rate_mean"])  # empty, never zero-filled
    assert "tiny-a/grpo/g8/seed0" in g8["missing_cells"]
    sagc = eff[eff["sizing"] == "sagc"].iloc[0]
    assert sagc["status"] == "partial" and sagc["seeds"] == 1
    assert sagc["straggler_rate_mean"] == pytest.approx(2 / 6)  # seed 0 only
    assert math.isnan(sagc["straggler_rate_std"])

    for name in ("efficiency.md", "efficiency.tex", "downstream.md", "downstream.tex"):
        text = (tables / name).read_text()
        assert "tiny-a/grpo/g8/seed0" in text and "tiny-a/grpo/sagc/seed1" in text, name
    md = (tables / "efficiency.md").read_text()
    assert "| tiny-a | grpo | g8 | 0/1 | missing | missing |" in md
    assert "| tiny-a | grpo | sagc | 1/2 | 33.3 [" in md  # seed 0's steps only
    down = pd.read_csv(tables / "downstream.csv")
    assert down.loc[down["sizing"] == "g8", "status"].iloc[0] == "missing"
    assert math.isnan(down.loc[down["sizing"] == "g8", "aime_accuracy_mean"].iloc[0])
    headline = (tables / "headline.md").read_text()
    assert "partial; missing: tiny-a/grpo/sagc/seed1" in headline
    cells = pd.read_csv(tables / "downstream_cells.csv")
    assert set(cells.loc[cells["status"] == "missing", "cell"]) == set(result.missing)


def test_corrupt_run_file_raises_naming_it_even_when_partial(world_copy):
    root, grid = world_copy
    grid["allow_partial"] = True
    path = find_run_files(root / "results/t/train/tiny-a/grpo/g4/seed1")[0]
    data = bytearray(path.read_bytes())
    data[100] ^= 0x55
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptRunFileError) as err:
        aggregate(parse_grid(grid, root=root), figures=False)
    assert str(err.value).startswith(str(path))


def _cut_run_file(root, cell_id: str):
    path = find_run_files(root / "results/t/train" / cell_id)[0]
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # ends mid-record, steps lost
    return path


@pytest.mark.parametrize("allow_partial", [False, True])
def test_a_truncated_run_file_of_a_finished_cell_is_damage(world_copy, allow_partial):
    """done.json says the cell finished; its run file ending mid-way is damage (named, with
    the command that trains the cell again), not an unfinished run to allow_partial away."""
    root, grid = world_copy
    grid["allow_partial"] = allow_partial
    path = _cut_run_file(root, "tiny-a/grpo/g4/seed1")
    with pytest.raises(DamagedRunError) as err:
        aggregate(parse_grid(grid, root=root), figures=False)
    message = str(err.value)
    assert message.startswith(str(path)) and "damaged W&B run file" in message
    assert "cell tiny-a/grpo/g4/seed1" in message and "done.json, 6 steps" in message
    assert f"snakemake --cores all -R {root}/results/t/train/tiny-a/grpo/g4/seed1/done.json" in message
    assert "allow_partial" not in message and "unfinished run" in message  # "not an unfinished run"


def test_a_truncated_run_file_without_done_json_is_an_unfinished_run(world_copy):
    """A killed run (no done.json) is missing, as before: its file may end mid-record."""
    root, grid = world_copy
    _cut_run_file(root, "tiny-a/grpo/g4/seed1")
    (root / "results/t/train/tiny-a/grpo/g4/seed1/done.json").unlink()
    with pytest.raises(MissingCellsError) as err:
        aggregate(parse_grid(grid, root=root), figures=False)
    assert any("training unfinished" in why for why in err.value.missing["tiny-a/grpo/g4/seed1"])


def test_bad_eval_summary_names_file_and_key(world_copy):
    root, grid = world_copy
    path = root / grid["cells"][0]["eval_summary"]
    summary = json.loads(path.read_text())
    del summary["tasks"]["aime"]["accuracy_stderr"]
    path.write_text(json.dumps(summary))
    with pytest.raises(ValueError, match=r"summary\.json: tasks\.aime\.accuracy_stderr must be a number"):
        aggregate(parse_grid(grid, root=root), figures=False)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"time_unit": "days"}, "time_unit must be one of"),
        ({"last_k": 0}, "last_k must be a positive integer"),
        ({"colour": "red"}, r"unknown top-level key\(s\): colour"),
        ({"wandb": {"source": "online", "project": "p", "group": "g"}}, "wandb.entity is required"),
        ({"cells": []}, "cells must be a non-empty list"),
    ],
)
def test_grid_errors_name_the_key(synthetic_world, change, message):
    _, grid = synthetic_world
    with pytest.raises(ValueError, match=message):
        parse_grid({**grid, **change})


def test_grid_cell_errors_name_the_cell(synthetic_world):
    _, grid = synthetic_world
    bad = json.loads(json.dumps(grid))
    del bad["cells"][2]["sizing"]
    with pytest.raises(ValueError, match=r"cells\[2\]\.sizing is required"):
        parse_grid(bad)
    bad["cells"][2]["sizing"] = "g16"
    bad["cells"][3]["id"] = bad["cells"][2]["id"]
    with pytest.raises(ValueError, match="duplicate cell id"):
        parse_grid(bad)


def test_load_grid_names_the_file(tmp_path):
    path = tmp_path / "grid.json"
    path.write_text("{not json")
    with pytest.raises(ValueError, match="grid.json: not valid JSON"):
        load_grid(path)


def test_cli_fails_on_missing_and_writes_with_allow_partial(world_copy, capsys):
    root, grid = world_copy
    _add_absent_g8(grid)
    grid_path = root / "grid.json"
    grid_path.write_text(json.dumps(grid))
    args = ["--grid", str(grid_path), "--root", str(root), "--no-figures"]
    assert main(args) == 2
    assert "tiny-a/grpo/g8/seed0" in capsys.readouterr().err
    assert main(args + ["--allow-partial"]) == 0
    out = capsys.readouterr()
    assert str(root / "results/t/tables/efficiency.md") in out.out
    assert "1 cell(s) marked as missing" in out.err
