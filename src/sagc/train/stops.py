"""A cell's stops resolved against its model's tokenizer: which end generation at a token id,
which are matched as text.

A stop that is one added token ends generation at its id; the rest stay text. The pipeline
resolves them once per model: ``python -m sagc.train.stops --model PATH --stops JSON --out FILE``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field

from sagc.config_models import Section
from sagc.io import atomic_write_json
from sagc.tokenizers import load_tokenizer


class Stops(Section):
    """``token_ids``: the stops generation ends at, by id; ``texts``: matched in the decoded text."""

    section_key: ClassVar[str] = "resolved.stops"
    token_ids: dict[str, int] = Field(default_factory=dict)
    texts: tuple[str, ...] = ()

    @property
    def strings(self) -> set[str]:
        """Every stop, whichever way it ends a row."""
        return {*self.token_ids, *self.texts}


def split_stops(tokenizer: Any, stop: Sequence[str]) -> Stops:
    """``stop`` split against ``tokenizer``'s added (atomic) tokens, special ones among them."""
    added = tokenizer.get_added_vocab()
    return Stops(
        token_ids={s: int(added[s]) for s in stop if s in added}, texts=tuple(s for s in stop if s not in added)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sagc.train.stops", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="the model folder or hub id whose tokenizer the cell loads")
    parser.add_argument("--revision", default=None, help="the hub revision the cell loads")
    parser.add_argument(
        "--stops",
        type=json.loads,
        default=[],
        help="the cell's train.stop strings, as a JSON list (a stop may hold a newline)",
    )
    parser.add_argument("--out", required=True, help="where the resolved stops go (JSON)")
    ns = parser.parse_args(argv)
    if not isinstance(ns.stops, list) or not all(isinstance(s, str) and s for s in ns.stops):
        parser.error(f"--stops must be a JSON list of non-empty strings, got {ns.stops!r}")
    if ns.stops:
        stops = split_stops(load_tokenizer(ns.model, revision=ns.revision), ns.stops)
    else:
        stops = Stops()
    atomic_write_json(Path(ns.out), stops.model_dump(mode="json"), indent=2)
    print(json.dumps(stops.model_dump(mode="json")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
