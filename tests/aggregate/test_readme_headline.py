"""The README's headline is the reference run's, and it states as holding only what holds on
both seed sets: its table is the one `headline.md` renders from
`docs/reference/default-headline.csv` (the report seeds: the primary family and the positive
control, ``summary_markdown``), and every claim that holds there holds in
`docs/reference/replicate-headline.csv` (the replication seeds) too."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from sagc.aggregate.compare import KEY, read_headline
from sagc.aggregate.verdicts import HOLDS, Claim, summary_markdown

REPO = Path(__file__).resolve().parents[2]


def _reference(name: str) -> pd.DataFrame:
    return read_headline(REPO / "docs" / "reference" / f"{name}-headline.csv")


def test_the_readmes_headline_table_is_the_reference_runs():
    claims = [Claim.from_row(r) for r in _reference("default").itertuples()]
    table = "\n".join(summary_markdown(claims))
    assert table in (REPO / "README.md").read_text()


def test_a_claim_the_readme_states_as_holding_holds_on_both_seed_sets():
    default, replicate = _reference("default"), _reference("replicate")
    # the same family on both seed sets, each claim once
    assert len(default) == len(replicate) == len(default.drop_duplicates(KEY))
    both = default.merge(replicate, on=KEY, suffixes=("_report", "_replication"), validate="one_to_one")
    assert len(both) == len(default)
    # The README's table states the primary family and the positive control.
    stated = both["family"].isin(["primary", "control"])
    assert stated.sum() >= 4
    held = both[stated & (both["verdict_report"] == HOLDS)]
    assert (held["verdict_replication"] == HOLDS).all(), held[KEY]
