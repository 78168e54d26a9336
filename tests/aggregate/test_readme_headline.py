"""The README's headline is the reference run's, and it states as holding only what holds on
both seed sets: its table is the one `headline.md` renders from
`docs/reference/default-headline.csv` (the report seeds), and every claim that holds there
holds in `docs/reference/replicate-headline.csv` (the replication seeds) too."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from sagc.aggregate.paired import Interval
from sagc.aggregate.verdicts import HOLDS, Claim, summary_markdown

REPO = Path(__file__).resolve().parents[2]
KEY = ["model", "algorithm", "controller", "reference", "claim"]


def _reference(name: str) -> pd.DataFrame:
    return pd.read_csv(REPO / "docs" / "reference" / f"{name}-headline.csv")


def _claims(rows: pd.DataFrame) -> list[Claim]:
    """The claims as the run had them (the CSV is ``headline_frame``'s); speed-ups are the
    intervals computed on the log scale."""
    return [
        Claim(model=r.model, algorithm=r.algorithm, controller=r.controller, reference=r.reference, claim=r.claim,
              side="", detail="", p_holm=r.p_holm, verdict=r.verdict, mde=r.mde,
              interval=Interval(r.estimate, r.low, r.high, int(r.seeds), r.null, r.p,
                                log=r.claim.startswith("cheaper")))
        for r in rows.itertuples()
    ]


def test_the_readmes_headline_table_is_the_reference_runs():
    table = "\n".join(summary_markdown(_claims(_reference("default"))))
    assert table in (REPO / "README.md").read_text()


def test_a_claim_the_readme_states_as_holding_holds_on_both_seed_sets():
    default, replicate = _reference("default"), _reference("replicate")
    # the same family on both seed sets, each claim once
    assert len(default) == len(replicate) == len(default.drop_duplicates(KEY))
    both = default.merge(replicate, on=KEY, suffixes=("_report", "_replication"), validate="one_to_one")
    assert len(both) == len(default)
    held = both[both["verdict_report"] == HOLDS]
    assert (held["verdict_replication"] == HOLDS).all(), held[KEY]
