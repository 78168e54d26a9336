"""The online source (wandb.Api), as far as it can be exercised without a network.

The W&B servers are unreachable here, so the API object itself is replaced by a small
in-memory stand-in with the same surface (``runs(path, filters)``, ``run.config``,
``run.scan_history()``, ``run.state``, ``run.created_at``). Everything after that call —
matching runs to cells, merging resumed runs, the DataFrame, the tables — is the real code.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import pandas as pd
import pytest

from sagc.aggregate.collect import collect
from sagc.aggregate.errors import OnlineSourceError, RunNotFoundError
from sagc.aggregate.grid import WandbSource, parse_grid
from sagc.aggregate.reader import OfflineReader, OnlineReader, make_reader, online_filters
from sagc.aggregate.tables import efficiency_table
from tests.aggregate.aggregate_synthetic import history_rows

SOURCE = WandbSource(source="online", entity="lab", project="sagc", group="t")


@dataclass
class StandInRun:
    id: str
    config: dict
    rows: list
    state: str = "finished"
    created_at: str = "2026-01-01T00:00:00"

    def scan_history(self):
        # The API returns W&B's own keys too; the reader must drop them.
        return ({**row, "_step": i, "_runtime": 0.1 * i} for i, row in enumerate(self.rows))


@dataclass
class StandInApi:
    runs_: list
    calls: list = field(default_factory=list)

    def runs(self, path, filters=None):
        self.calls.append((path, filters))
        return [r for r in self.runs_ if filters is None or r.config.get("_group") == filters["group"]]


def _config(sizing, seed, name="t"):
    return {"config_name": name, "model": "tiny-a", "algorithm": "grpo", "sizing": sizing,
            "seed": seed, "_group": "t"}  # fmt: skip


def test_filters_select_the_group():
    assert online_filters("default-2026") == {"group": "default-2026"}


def test_online_source_needs_entity_project_group():
    with pytest.raises(ValueError, match="wandb.project is required"):
        OnlineReader(WandbSource(source="online", entity="lab", group="t"))
    assert isinstance(make_reader(SOURCE), OnlineReader)
    assert isinstance(make_reader(WandbSource()), OfflineReader)


def test_without_api_key_the_error_says_what_to_do(synthetic_world, tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc with a key
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb-config"))
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    _, grid = synthetic_world
    cell = parse_grid(grid).cells[0]
    start = time.monotonic()
    with pytest.raises(OnlineSourceError, match=r"lab/sagc \(group 't'\).*WANDB_API_KEY"):
        OnlineReader(SOURCE, "t").read(cell)
    assert time.monotonic() - start < 30


def test_online_runs_give_the_same_tables_as_offline(synthetic_world):
    root, grid = synthetic_world
    g = parse_grid(grid, root=root)
    runs = [StandInRun(f"r{i}", _config(c.sizing, c.seed), history_rows(c.sizing, c.seed))
            for i, c in enumerate(g.cells)]  # fmt: skip
    runs.append(StandInRun("other", _config("g4", 0, name="paper"), [{"step": 1}]))  # other grid
    api = StandInApi(runs)
    online = collect(g, reader=OnlineReader(SOURCE, g.name, api=api))
    offline = collect(g)
    assert api.calls == [("lab/sagc", {"group": "t"})]  # listed once, for the whole grid
    assert online.missing() == {}
    for a, b in zip(online.cells, offline.cells):
        assert list(a.run.history.columns) == list(b.run.history.columns)
        # wandb-core writes 10.0 as JSON "10": compare values, not int/float dtypes.
        pd.testing.assert_frame_equal(a.run.history, b.run.history, check_dtype=False)
    pd.testing.assert_frame_equal(efficiency_table(online).frame, efficiency_table(offline).frame)


def test_online_resumed_runs_merge_and_unfinished_is_missing(synthetic_world):
    root, grid = synthetic_world
    g = parse_grid(grid, root=root)
    cell = g.cells[0]
    rows = history_rows(cell.sizing, cell.seed)
    first = StandInRun("a", _config(cell.sizing, cell.seed), rows[:4], state="crashed",
                       created_at="2026-01-01T00:00:00")  # fmt: skip
    resumed = StandInRun("b", _config(cell.sizing, cell.seed), rows[2:], state="running",
                         created_at="2026-01-01T05:00:00")  # fmt: skip
    reader = OnlineReader(SOURCE, "t", api=StandInApi([resumed, first]))
    run = reader.read(cell)
    assert run.sources == ["lab/sagc/a", "lab/sagc/b"]
    assert run.history["step"].tolist() == [1, 2, 3, 4, 5, 6]
    assert not run.finished
    result = collect(g, reader=reader)
    assert result.missing()[cell.id] == ["training unfinished: the W&B run is not in state 'finished'"]
    with pytest.raises(RunNotFoundError, match="no run in lab/sagc group 't'"):
        reader.read(g.cells[1])
