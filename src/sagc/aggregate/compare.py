"""Does a headline replicate? Compare two runs' estimates, claim by claim."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

KEY = ["family", "model", "algorithm", "controller", "reference", "claim"]
COLUMNS = KEY + ["id", "verdict", "estimate", "low", "high", "null", "scale", "seeds", "strata", "sd", "se", "df",
                 "p", "p_holm"]  # fmt: skip
LEVEL = 0.95


def read_headline(source: str | Path) -> pd.DataFrame:
    """The claims table of a results folder or of a ``headline.csv`` file."""
    path = Path(source)
    if path.is_dir():
        path = path / "tables" / "headline.csv"
    if not path.is_file():
        raise FileNotFoundError(f"{source}: no headline.csv (a results folder after `snakemake`, or the file)")
    frame = pd.read_csv(path, keep_default_na=True)
    lacking = [c for c in COLUMNS if c not in frame.columns]
    if lacking:
        raise ValueError(f"{path}: not a headline table of this version: missing column(s) {lacking}")
    for column in ("gate", "id", "detail"):  # empty text reads back as NaN
        frame[column] = frame[column].astype(object).where(frame[column].notna(), "") if column in frame else ""
    return frame


def _test_scale(frame: pd.DataFrame, side: str) -> pd.Series:
    est = frame[f"estimate_{side}"].astype(float)
    log = frame[f"scale_{side}"] == "log"
    return est.where(~log, np.log(est.where(est > 0)))


def compare(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """One row per claim of either side (suffixes ``_a``, ``_b``) with the difference B - A on the test
    scale, ``consistent`` (B in A's prediction interval; NaN without standard errors) and ``agree``."""
    both = a.merge(b, on=KEY, how="outer", suffixes=("_a", "_b"), indicator=True)
    both["present"] = both.pop("_merge").map({"both": "both", "left_only": "a only", "right_only": "b only"})
    diff = _test_scale(both, "b") - _test_scale(both, "a")
    sa, sb = both["se_a"].astype(float), both["se_b"].astype(float)
    se = np.sqrt(sa**2 + sb**2)
    df = se**4 / (sa**4 / both["df_a"].astype(float) + sb**4 / both["df_b"].astype(float))
    half = pd.Series(stats.t.ppf(0.5 + LEVEL / 2, df.where(df > 0)), index=both.index) * se
    ok = np.isfinite(half) & (se > 0) & np.isfinite(diff)
    both["diff"], both["diff_se"], both["diff_df"] = diff, se, df
    both["diff_low"], both["diff_high"] = (diff - half).where(ok), (diff + half).where(ok)
    both["consistent"] = pd.Series(np.where(ok, (diff.abs() <= half), np.nan), index=both.index, dtype=object)
    both["agree"] = both["verdict_a"] == both["verdict_b"]
    return both


def _iv(row, side: str) -> str:
    est, low, high = row[f"estimate_{side}"], row[f"low_{side}"], row[f"high_{side}"]
    if not isinstance(est, float) or math.isnan(est):
        return "-"
    return f"{est:.3g} [{low:.3g}, {high:.3g}]"


def _diff(row) -> str:
    if not math.isfinite(row["diff"]):
        return "-"
    log = row.get("scale_a") == "log"
    f = (lambda v: f"{math.exp(v):.3g}") if log else (lambda v: f"{v:+.3g}")
    est = f(row["diff"]) + ("×" if log else "")
    if not math.isfinite(row["diff_low"]):
        return f"{est} (no interval)"
    return f"{est} [{f(row['diff_low'])}, {f(row['diff_high'])}]"


def _yes(value) -> str:
    if value is True or value == 1.0:
        return "yes"
    if value is False or value == 0.0:
        return "**no**"
    return "n/a"


def markdown(table: pd.DataFrame, name_a: str, name_b: str) -> str:
    lines = [f"| Family | Pair | Claim | {name_a} | {name_b} | B − A [95 %] | B in A's 95 % PI | Verdicts agree |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for _, r in table.iterrows():
        pair = f"{r['model']} {str(r['algorithm']).upper()}, {r['controller']} vs {r['reference']}"
        va = r["verdict_a"] if isinstance(r["verdict_a"], str) else "(absent)"
        vb = r["verdict_b"] if isinstance(r["verdict_b"], str) else "(absent)"
        agree = "yes" if r["agree"] else "**no**"
        lines.append(f"| {r['family']} | {pair} | {r['claim']} | {va} {_iv(r, 'a')} | {vb} {_iv(r, 'b')} | "
                     f"{_diff(r)} | {_yes(r['consistent'])} | {agree} |")  # fmt: skip
    n = len(table)
    comparable = table["consistent"].isin([True, False, 1.0, 0.0])
    consistent = int((table["consistent"] == True).sum())  # noqa: E712 (object column: True, False or NaN)
    agree = int(table["agree"].sum())
    held = table[(table["verdict_a"] == "holds") | (table["verdict_b"] == "holds")]
    lines += ["", f"{consistent} of {int(comparable.sum())} estimates consistent (B's estimate within A's 95 % "
              f"prediction interval; {n - int(comparable.sum())} of {n} claims without two standard errors). "
              f"Verdicts: {agree} of {n} agree. Claims that hold on either side: {len(held)}, of which "
              f"{int(held['agree'].sum())} hold on both."]  # fmt: skip
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sagc.aggregate.compare", description=__doc__.split("\n\n")[0])
    parser.add_argument("a", help="results folder or headline.csv")
    parser.add_argument("b", help="results folder or headline.csv")
    parser.add_argument("--out", type=Path, help="also write the comparison as Markdown here")
    parser.add_argument(
        "--strict", action="store_true", help="exit 1 when a claim holds on one side and not on the other"
    )
    ns = parser.parse_args(argv)
    try:
        table = compare(read_headline(ns.a), read_headline(ns.b))
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    text = markdown(table, ns.a, ns.b)
    print(text, end="")
    if ns.out:
        ns.out.parent.mkdir(parents=True, exist_ok=True)
        ns.out.write_text(text)
    held = table[(table["verdict_a"] == "holds") | (table["verdict_b"] == "holds")]
    return 1 if ns.strict and not held["agree"].all() else 0


if __name__ == "__main__":
    sys.exit(main())
