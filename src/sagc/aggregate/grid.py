"""The grid description the pipeline hands to the aggregation (docs/aggregation.md, "The grid file")."""

import json
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, Field, ValidationError, ValidationInfo, model_validator

from sagc.aggregate.registration import Registration
from sagc.config_models import Expect, Flag, Integer, Number, OneOf, PositiveInt, Section, Text, describe
from sagc.controller import fixed_group_size

TIME_UNITS = {"s": 1.0, "min": 60.0, "h": 3600.0}
SOURCES = ("offline", "online")


def _under_root(path: Path, info: ValidationInfo) -> Path:
    """A relative path resolves against the ``root`` the grid is parsed with."""
    root = (info.context or {}).get("root")
    return path if path.is_absolute() or root is None else Path(root) / path


RootedPath = Annotated[Path, AfterValidator(_under_root)]


class CellOutputs(Section):
    """Where one training cell's outputs are, and the rollout steps it must have logged."""

    id: Text
    model: Text
    algorithm: Text
    sizing: Text
    seed: Integer
    train_dir: RootedPath
    eval_summary: RootedPath
    steps: PositiveInt | None = Field(None, description="rollout steps; fewer logged = unfinished")


class BaseModelOutputs(Section):
    """Where an untrained model's evaluation summary is: the downstream reference row."""

    model: Text
    eval_summary: RootedPath


class WandbSource(Section):
    """Where the runs are read: the cells' run files (offline) or the W&B API (online)."""

    source: OneOf(SOURCES) = "offline"
    entity: Text | None = None
    project: Text | None = None
    group: Text | None = None

    @model_validator(mode="after")
    def _online_names_the_runs(self) -> "WandbSource":
        for key in ("entity", "project", "group"):
            if self.source == "online" and not getattr(self, key):
                raise ValueError(f"wandb.{key} is required for source 'online'")
        return self


class ResultGrid(Section):
    """The grid file: every cell's and base model's outputs, where the outputs go, how they are computed."""

    name: Text
    cells: Annotated[
        tuple[CellOutputs, ...], Field(min_length=1), Expect("a non-empty list of cells (nothing to aggregate)")
    ]
    base: tuple[BaseModelOutputs, ...] = ()
    tables_dir: RootedPath
    figures_dir: RootedPath
    wandb: WandbSource = Field(default_factory=WandbSource)
    time_unit: OneOf(tuple(TIME_UNITS)) = "s"
    last_k: PositiveInt = Field(5, description="final reward = mean of the last k steps")
    allow_partial: Flag = Field(False, description="mark missing cells instead of failing")
    tau: Number(gt=0.0) | None = Field(None, description="straggler threshold, drawn in figures")
    delta: Number(gt=0.0, lt=1.0) | None = Field(
        None, description="straggler budget that picks the best static G from the base models' reports"
    )
    budgets: dict[str, Number(gt=0.0, lt=1.0)] = Field(
        default_factory=dict, description="controller sizing -> the budget delta it keeps (its claim)"
    )
    straggler_reports: dict[str, RootedPath] = Field(
        default_factory=dict, description="model -> the base model's straggler report (stragglers.json)"
    )
    claims: Registration = Field(default_factory=Registration, description="the pre-registered claims")

    @model_validator(mode="after")
    def _cell_ids_are_unique(self) -> "ResultGrid":
        seen: set[str] = set()
        for i, cell in enumerate(self.cells):
            if cell.id in seen:
                raise ValueError(f"cells[{i}]: duplicate cell id {cell.id!r}")
            seen.add(cell.id)
        return self

    @model_validator(mode="after")
    def _claims_name_a_controller(self) -> "ResultGrid":
        problem = controller_problem(self.claims.controller, [c.sizing for c in self.cells])
        if problem:
            raise ValueError(problem)
        return self


def fixed_sizes(sizings) -> list[tuple[int, str]]:
    """(G, sizing) of the fixed sizings among ``sizings``, by increasing G."""
    return sorted((fixed_group_size(s), s) for s in sizings if fixed_group_size(s) is not None)


def reference_sizing(sizings) -> str | None:
    """The largest fixed G among ``sizings`` (the speed-up reference), None if none."""
    fixed = fixed_sizes(sizings)
    return fixed[-1][1] if fixed else None


def controller_problem(controller: str, sizings) -> str | None:
    """Why ``claims.controller`` cannot be the primary family's controller for ``sizings``, or None:
    a grid with controllers must name one of them (a typo would silently drop the family)."""
    sizings = list(dict.fromkeys(sizings))
    controllers = [s for s in sizings if fixed_group_size(s) is None]
    if controllers and controller not in controllers:
        return (
            f"claims.controller {controller!r} is not one of the grid's controller sizings {controllers} "
            "(the primary family needs its cells)"
        )
    return None


def parse_grid(raw: Any, root: str | Path = ".", source: str = "grid") -> ResultGrid:
    """Validate a grid dict; ``source`` names it in errors."""
    if not isinstance(raw, dict):
        raise ValueError(f"{source}: the grid must be a JSON object, got {type(raw).__name__}")
    try:
        return ResultGrid.model_validate(raw, context={"root": Path(root)})
    except ValidationError as err:
        raise ValueError(f"{source}: {describe(err, ResultGrid)}") from None


def load_grid(path: str | Path, root: str | Path = ".") -> ResultGrid:
    """Read and validate the grid JSON at ``path`` (errors name the file and the key)."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"grid file not found: {path}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON: {exc}") from exc
    return parse_grid(raw, root=root, source=str(path))
