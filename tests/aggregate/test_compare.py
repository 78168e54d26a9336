"""The replication command: two headline tables, claim by claim."""

from __future__ import annotations

import pandas as pd
import pytest

from sagc.aggregate import compare


def _table(path, verdicts):
    rows = []
    for (claim, ctrl), verdict in verdicts.items():
        rows.append({"model": "m", "algorithm": "grpo", "controller": ctrl, "reference": "g16", "claim": claim,
                     "verdict": verdict, "estimate": -0.2, "low": -0.3, "high": -0.1, "null": 0.0,
                     "seeds": 5, "p": 0.01, "p_holm": 0.02, "mde": 0.1})
    folder = path / "tables"
    folder.mkdir(parents=True)
    pd.DataFrame(rows).to_csv(folder / "headline.csv", index=False)
    return path


def test_agreeing_and_disagreeing_claims(tmp_path, capsys):
    a = _table(tmp_path / "a", {("fewer stragglers", "sagc"): "holds", ("cheaper", "sagc"): "inconclusive",
                                ("cheaper", "sagc-fast"): "holds"})
    b = _table(tmp_path / "b", {("fewer stragglers", "sagc"): "holds", ("cheaper", "sagc"): "holds",
                                ("meets the budget", "sagc"): "fails"})
    table = compare.compare(compare.read_headline(a), compare.read_headline(b))
    by = {(r.claim, r.controller): r for r in table.itertuples()}
    assert by[("fewer stragglers", "sagc")].agree
    assert not by[("cheaper", "sagc")].agree
    assert by[("cheaper", "sagc-fast")].present == "a only"
    assert by[("meets the budget", "sagc")].present == "b only"
    # Strict: a claim that holds on one side only fails the replication.
    assert compare.main([str(a), str(b), "--strict", "--out", str(tmp_path / "cmp.md")]) == 1
    out = capsys.readouterr().out
    assert "1 of 4 claims agree" in out and "**no**" in out
    assert (tmp_path / "cmp.md").read_text() == out
    assert compare.main([str(a), str(a), "--strict"]) == 0


def test_bad_inputs_name_the_file(tmp_path, capsys):
    assert compare.main([str(tmp_path), str(tmp_path)]) == 2
    assert "no headline.csv" in capsys.readouterr().err
    bad = tmp_path / "bad.csv"
    bad.write_text("model,claim\nm,c\n")
    with pytest.raises(ValueError, match="bad.csv.*missing column"):
        compare.read_headline(bad)
