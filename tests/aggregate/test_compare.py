"""The replication command: two headline tables, claim by claim, estimates first."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from sagc.aggregate import compare
from sagc.aggregate.paired import Interval
from sagc.aggregate.verdicts import Claim, headline_frame


def _claim(claim: str, estimate: float, se: float, verdict: str, ctrl="sagc", log=False, df=16) -> Claim:
    iv = Interval(estimate, estimate - 2 * se, estimate + 2 * se, 20, 1.0 if log else 0.0, 0.01, se * math.sqrt(20),
                  log, se, df, 4)  # fmt: skip
    return Claim("pooled", "pooled", ctrl, "g16", claim, "below", iv, "", verdict=verdict, family="primary", id="P1")


def _write(path, claims):
    (path / "tables").mkdir(parents=True)
    headline_frame(claims).to_csv(path / "tables" / "headline.csv", index=False)
    return path


def test_estimates_are_compared_with_welch_and_the_prediction_interval(tmp_path, capsys):
    a = _write(tmp_path / "a", [_claim("fewer", -0.20, 0.05, "holds"), _claim("same", -0.20, 0.05, "holds"),
                                _claim("cheaper", 1.2, 0.05, "inconclusive", log=True),
                                _claim("only a", 0.1, 0.05, "inconclusive", ctrl="sagc-fast")])  # fmt: skip
    b = _write(tmp_path / "b", [_claim("fewer", -0.05, 0.05, "inconclusive"), _claim("same", -0.15, 0.05, "holds"),
                                _claim("cheaper", 1.1, 0.05, "holds", log=True)])  # fmt: skip
    table = compare.compare(compare.read_headline(a), compare.read_headline(b)).set_index("claim")
    # Two independent seed sets: se sqrt(0.05^2 + 0.05^2), Welch df (0.005^2) / (2 x 0.0025^2 / 16) = 32.
    half = stats.t.ppf(0.975, 32) * math.sqrt(0.005)
    fewer = table.loc["fewer"]
    assert fewer["diff"] == pytest.approx(0.15) and fewer["diff_df"] == pytest.approx(32)
    assert (fewer["diff_low"], fewer["diff_high"]) == (pytest.approx(0.15 - half), pytest.approx(0.15 + half))
    assert 0.15 > half and fewer["consistent"] == False  # noqa: E712  B outside A's prediction interval
    assert table.loc["same", "consistent"] == True and table.loc["same", "agree"]  # noqa: E712
    # A speed-up is compared on the log scale: 1.1 / 1.2, consistent, although the verdicts differ.
    cheaper = table.loc["cheaper"]
    assert cheaper["diff"] == pytest.approx(math.log(1.1 / 1.2))
    assert cheaper["consistent"] == True and not cheaper["agree"]  # noqa: E712
    assert table.loc["only a", "present"] == "a only" and table.loc["only a", "consistent"] != True  # noqa: E712
    assert compare.main([str(a), str(b), "--strict", "--out", str(tmp_path / "cmp.md")]) == 1
    out = capsys.readouterr().out
    assert "2 of 3 estimates consistent" in out and "Verdicts: 1 of 4 agree" in out
    assert "0.917× [" in out  # the ratio B / A with its interval
    assert (tmp_path / "cmp.md").read_text() == out
    assert compare.main([str(a), str(a), "--strict"]) == 0


def test_bad_inputs_name_the_file(tmp_path, capsys):
    assert compare.main([str(tmp_path), str(tmp_path)]) == 2
    assert "no headline.csv" in capsys.readouterr().err
    bad = tmp_path / "bad.csv"
    bad.write_text("model,claim,verdict,estimate\nm,c,holds,1\n")
    with pytest.raises(ValueError, match=r"bad.csv.*missing column.*'se'"):
        compare.read_headline(bad)
