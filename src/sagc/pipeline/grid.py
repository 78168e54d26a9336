"""Cells of the grid (model x algorithm x sizing x seed) and the stable output layout under
``results/<name>/`` and ``paper_figures/<name>/`` (docs/running.md, "Outputs")."""

from __future__ import annotations

import itertools
import re
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

RESULTS = "results"
FIGURES = "paper_figures"

#: A config name is one path component under results/ (never "..", ".hidden" or "a/b").
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


def check_name(name: object) -> str:
    """``name`` if it is a plain identifier, else ``ValueError`` naming the key."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise ValueError(
            f"config key 'name': {name!r} is not a plain name (letters, digits, '_' and '-', "
            f"starting with a letter or digit); it becomes the folder {RESULTS}/<name>/"
        )
    return name


def stable_seed(*parts: str) -> int:
    """A seed from names, the same in every process and on every machine (``zlib.crc32``, not
    Python's salted ``hash()``)."""
    return zlib.crc32("/".join(parts).encode()) & 0x7FFFFFFF


def base_seed(model: str, world_seed: int, draw: int = 0) -> int:
    """The seed of a tiny base model's initialisation and warm start (draw 0 adds nothing, so
    every earlier world keeps its seed)."""
    return stable_seed(model, "base", "base", f"seed{world_seed}", *([f"draw{draw}"] if draw else []))


@dataclass(frozen=True)
class Cell:
    """One training run of the grid."""

    model: str
    algorithm: str
    sizing: str
    seed: int

    @property
    def id(self) -> str:
        return f"{self.model}/{self.algorithm}/{self.sizing}/seed{self.seed}"

    @property
    def train_seed(self) -> int:
        """The trainer's and controller's seed: not of the sizing, so the sizings of one seed draw
        the same prompts (a paired comparison)."""
        return stable_seed(self.model, self.algorithm, f"seed{self.seed}")


@dataclass(frozen=True)
class Grid:
    """The cells and paths of one config (``name``)."""

    name: str
    models: tuple[str, ...]
    algorithms: tuple[str, ...]
    sizings: tuple[str, ...]
    seeds: tuple[int, ...]

    def __post_init__(self) -> None:
        check_name(self.name)

    @classmethod
    def from_config(cls, config: Any) -> Grid:
        """The grid of a checked pipeline config, or of the config mapping a job script gets."""
        if isinstance(config, Mapping):
            config = SimpleNamespace(**config)
        return cls(
            name=config.name,
            models=tuple(config.models),
            algorithms=tuple(config.algorithms),
            sizings=tuple(config.sizings),
            seeds=tuple(config.seeds),
        )

    def cells(self) -> Iterator[Cell]:
        for m, a, s, k in itertools.product(self.models, self.algorithms, self.sizings, self.seeds):
            yield Cell(m, a, s, k)

    def __len__(self) -> int:
        return len(self.models) * len(self.algorithms) * len(self.sizings) * len(self.seeds)

    @property
    def root(self) -> str:
        return f"{RESULTS}/{self.name}"

    @property
    def data_dir(self) -> str:
        return f"{self.root}/data"

    def base_model_json(self, model: str) -> str:
        return f"{self.root}/models/{model}/base.json"

    def train_dir(self, cell: Cell) -> str:
        return f"{self.root}/train/{cell.model}/{cell.algorithm}/{cell.sizing}/seed{cell.seed}"

    def eval_dir(self, cell: Cell) -> str:
        return f"{self.root}/eval/{cell.model}/{cell.algorithm}/{cell.sizing}/seed{cell.seed}"

    def base_eval_dir(self, model: str) -> str:
        return f"{self.root}/eval/{model}/base"

    @property
    def tables_dir(self) -> str:
        return f"{self.root}/tables"

    @property
    def figures_dir(self) -> str:
        return f"{FIGURES}/{self.name}"
