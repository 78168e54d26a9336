"""Does a headline replicate? Compare two runs' claims, claim by claim.

    python -m sagc.aggregate.compare results/default results/default-replicate
    python -m sagc.aggregate.compare results/default docs/reference/default-headline.csv

Each side is a results folder (its ``tables/headline.csv`` is read) or a ``headline.csv``
itself. For every claim (model, algorithm, controller, reference, claim) it prints both
verdicts, both intervals and whether the verdicts agree; claims only one side has are
listed as such. ``--strict`` exits 1 when a claim that holds on either side does not hold
on the other — the question "does what I report as holding replicate?".
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import pandas as pd

KEY = ["model", "algorithm", "controller", "reference", "claim"]
COLUMNS = KEY + ["verdict", "estimate", "low", "high", "seeds", "p_holm"]


def read_headline(source: str | Path) -> pd.DataFrame:
    """The claims table of a results folder or of a ``headline.csv`` file."""
    path = Path(source)
    if path.is_dir():
        path = path / "tables" / "headline.csv"
    if not path.is_file():
        raise FileNotFoundError(f"{source}: no headline.csv (a results folder after `snakemake`, or the file)")
    frame = pd.read_csv(path)
    lacking = [c for c in COLUMNS if c not in frame.columns]
    if lacking:
        raise ValueError(f"{path}: not a headline table: missing column(s) {lacking}")
    return frame[COLUMNS]


def compare(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """One row per claim of either side: both verdicts and intervals, and ``agree``."""
    both = a.merge(b, on=KEY, how="outer", suffixes=("_a", "_b"), indicator=True)
    both["agree"] = both["verdict_a"] == both["verdict_b"]
    both["present"] = both.pop("_merge").map({"both": "both", "left_only": "a only", "right_only": "b only"})
    return both


def _iv(row, side: str) -> str:
    est, low, high = row[f"estimate_{side}"], row[f"low_{side}"], row[f"high_{side}"]
    if not isinstance(est, float) or math.isnan(est):
        return "-"
    return f"{est:.3g} [{low:.3g}, {high:.3g}]"


def markdown(table: pd.DataFrame, name_a: str, name_b: str) -> str:
    lines = [f"| Pair | Claim | {name_a} | {name_b} | Agree |", "|---|---|---|---|---|"]
    for _, r in table.iterrows():
        pair = f"{r['model']} {str(r['algorithm']).upper()}, {r['controller']} vs {r['reference']}"
        va = r["verdict_a"] if isinstance(r["verdict_a"], str) else "(absent)"
        vb = r["verdict_b"] if isinstance(r["verdict_b"], str) else "(absent)"
        agree = "yes" if r["agree"] else "**no**"
        lines.append(f"| {pair} | {r['claim']} | {va} {_iv(r, 'a')} | {vb} {_iv(r, 'b')} | {agree} |")
    n = len(table)
    agree = int(table["agree"].sum())
    held = table[(table["verdict_a"] == "holds") | (table["verdict_b"] == "holds")]
    lines += ["", f"{agree} of {n} claims agree. Claims that hold on either side: {len(held)}, "
              f"of which {int(held['agree'].sum())} hold on both."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sagc.aggregate.compare", description=__doc__.split("\n\n")[0])
    parser.add_argument("a", help="results folder or headline.csv")
    parser.add_argument("b", help="results folder or headline.csv")
    parser.add_argument("--out", type=Path, help="also write the comparison as Markdown here")
    parser.add_argument("--strict", action="store_true",
                        help="exit 1 when a claim holds on one side and not on the other")
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
