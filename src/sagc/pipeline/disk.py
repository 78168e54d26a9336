"""What a grid's training cells need on disk, checked when the workflow loads; docs/cluster.md,
"Disk plan of a training cell"."""

from __future__ import annotations

import json
import os
import shutil
import warnings
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path

from sagc.pipeline.cells import resolved_cell
from sagc.pipeline.grid import Cell, Grid
from sagc.pipeline.memory import Architecture, architecture_of
from sagc.pipeline.schema import PipelineConfig
from sagc.pipeline.world import world_of
from sagc.tiny.defaults import DEFAULT_VOCAB_SIZE

#: Bytes per parameter of the weights, by the dtype the policy is loaded in.
WEIGHT_BYTES = {"float32": 4, "bfloat16": 2}
#: Bytes per parameter of the optimizer state: AdamW's two fp32 moments (+ a bf16 compensation buffer).
OPTIMIZER_BYTES = {"float32": 8, "bfloat16": 8 + 2}
#: The strategies whose checkpoints are the Trainer's own files (sharded or not, same bytes).
MODELLED_STRATEGIES = ("ddp", "fsdp2")


class DiskSpaceWarning(UserWarning):
    """The results' filesystem has less free space than the training cells still write."""


@dataclass(frozen=True)
class CellDisk:
    """What one training cell writes (bytes); None sizes when unknown (``unknown`` says why)."""

    model: str
    checkpoint: int | None
    final: int | None
    kept: int  # checkpoints left when the run ends
    at_once: int  # checkpoints on disk while the newest one is written
    unknown: str | None = None

    @property
    def footprint(self) -> int | None:
        """The finished cell: its kept checkpoints and its final model."""
        if self.checkpoint is None or self.final is None:
            return None
        return self.kept * self.checkpoint + self.final

    @property
    def peak(self) -> int | None:
        """The most the cell holds at once: during a save, or at the end."""
        if self.footprint is None:
            return None
        return max(self.at_once * self.checkpoint, self.footprint)


def cell_disk(
    model: str,
    params: int | None,
    *,
    weights_dtype: str,
    steps: int,
    save_steps: int,
    save_total_limit: int,
    unknown: str | None = None,
) -> CellDisk:
    """A cell's disk need from its parameter count and saving settings (pure)."""
    saves = -(-steps // save_steps)  # every save_steps steps, and at the last step
    kept, at_once = min(save_total_limit, saves), min(save_total_limit + 1, saves)
    if params is None:
        return CellDisk(model, None, None, kept, at_once, unknown or "parameter count unknown")
    weights = params * WEIGHT_BYTES[weights_dtype]
    return CellDisk(model, weights + params * OPTIMIZER_BYTES[weights_dtype], weights, kept, at_once)


def human(n: float) -> str:
    """Bytes in decimal units with three significant digits: ``37.1 GB``, ``1.38 TB``."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            v = n / size
            return f"{v:.0f} {unit}" if v >= 100 else f"{v:.1f} {unit}" if v >= 10 else f"{v:.2f} {unit}"
    return f"{n:.0f} B"


@dataclass(frozen=True)
class DiskReport:
    """The grid's disk need (bytes) against ``free`` bytes at ``free_at``; ``finished`` cells need no
    more, ``written``: what each unfinished cell already holds."""

    root: str
    cells: tuple[tuple[str, CellDisk], ...]
    finished: frozenset[str] = frozenset()
    written: Mapping[str, int] = field(default_factory=dict)
    free: int | None = None
    free_at: str | None = None

    def _known(self, attr: str) -> int:
        return sum(getattr(d, attr) or 0 for _, d in self.cells)

    @property
    def total(self) -> int:
        """Every cell finished (known sizes only)."""
        return self._known("footprint")

    @property
    def peak(self) -> int:
        """Every cell at its peak at once (known sizes only): an upper bound."""
        return self._known("peak")

    @property
    def remaining(self) -> int:
        """What the unfinished cells may still add to the disk, each at its peak."""
        return sum(
            max(0, d.peak - self.written.get(cid, 0))
            for cid, d in self.cells
            if cid not in self.finished and d.peak is not None
        )

    @property
    def unknown(self) -> dict[str, str]:
        """Model -> why its cells' sizes are unknown."""
        return {d.model: d.unknown for _, d in self.cells if d.footprint is None}

    @property
    def short(self) -> bool:
        return self.free is not None and self.remaining > self.free

    def line(self) -> str:
        """One line for the workflow's start."""
        groups = Counter(d for _, d in self.cells)
        terms = []
        for d, n in groups.items():
            what = f"{n} {d.model} cell{'s' if n != 1 else ''} x "
            if d.footprint is None:
                terms.append(what + f"unknown ({d.unknown})")
            else:
                terms.append(
                    what + f"({d.kept} checkpoint{'s' if d.kept != 1 else ''} x {human(d.checkpoint)}"
                    f" + final {human(d.final)})"
                )
        if groups and all(d.footprint is None for d in groups):
            total = "unknown"
        else:
            total = ("at least " if self.unknown else "") + human(self.total)
        text = f"disk: {' + '.join(terms) or 'no cells'} = {total} under {self.root}"
        if self.peak > self.total:
            text += f", {human(self.peak)} at peak (a save writes a checkpoint before deleting the oldest)"
        if self.remaining != self.peak:  # cells finished or under way
            left = sum(cid not in self.finished for cid, _ in self.cells)
            text += f"; {left} cells unfinished, still to write {human(self.remaining)}"
        if self.free is not None:
            text += f" (free: {human(self.free)})"
        return text

    def warning(self) -> str | None:
        """What to do when the free space is short of what the cells still write, or None."""
        if not self.short:
            return None
        return (
            f"{self.root}: the unfinished training cells may still write up to {human(self.remaining)} "
            f"(checkpoints and final models, each cell at its peak), but {self.free_at} has "
            f"{human(self.free)} free; make room, or put {self.root} on a larger filesystem "
            "(a symlink) before the training jobs start"
        )


def free_space(path: str | os.PathLike) -> int:
    return shutil.disk_usage(path).free


def model_params(config: PipelineConfig, grid: Grid, model: str) -> tuple[int | None, str | None]:
    """``(parameters, None)``, or ``(None, why)`` when unknown."""
    spec = config.models[model]
    if not world_of(config).builds_models:
        try:
            return architecture_of(spec, model).params, None
        except ValueError:
            return None, f"models.{model}: {spec.hub_id!r} is not in the local Hugging Face cache"
    built = Path(grid.root) / "models" / model / "base" / "config.json"
    if built.is_file():
        return Architecture.from_config(json.loads(built.read_text())).params, None
    from sagc.tiny.models import ModelSize  # it loads the tokenizers library

    flags = {**config.tiny.model, **spec.tiny_model}
    size = ModelSize(**{f.name: flags[f.name] for f in fields(ModelSize) if f.name in flags})
    arch = Architecture(  # as sagc.tiny.models.build_model builds it: tied embeddings, Qwen2's qkv bias
        hidden_size=size.hidden_size,
        num_layers=size.num_layers,
        num_heads=size.num_heads,
        num_kv_heads=size.num_kv_heads,
        head_dim=size.hidden_size // size.num_heads,
        intermediate_size=size.intermediate_size,
        vocab_size=DEFAULT_VOCAB_SIZE,
        tie_word_embeddings=True,
        qkv_bias=spec.arch == "qwen2",
    )
    return arch.params, None


def plan(config: PipelineConfig, grid: Grid) -> list[tuple[Cell, CellDisk]]:
    """Every cell's disk need, from its resolved trainer config."""
    params = {m: model_params(config, grid, m) for m in grid.models}
    out = []
    for cell in grid.cells():
        cfg = resolved_cell(config, cell)[1]
        n, why = params[cell.model]
        if cfg.launch.strategy not in MODELLED_STRATEGIES:
            n, why = None, f"strategy {cfg.launch.strategy}: DeepSpeed's checkpoint layout is not modelled"
        need = cell_disk(
            cell.model,
            n,
            weights_dtype=cfg.device.weights_dtype,
            steps=cfg.train.steps,
            save_steps=cfg.train.save_steps,
            save_total_limit=cfg.train.save_total_limit,
            unknown=why,
        )
        out.append((cell, need))
    return out


def report(config: PipelineConfig, grid: Grid, free_bytes: Callable[[Path], int] = free_space) -> DiskReport:
    """The grid's ``DiskReport``: what its cells hold now, ``free_bytes`` of the results' nearest existing folder."""
    cells = plan(config, grid)
    finished, written = set(), {}
    for cell, _ in cells:
        folder = Path(grid.train_dir(cell))
        if (folder / "done.json").is_file():
            finished.add(cell.id)
        elif folder.is_dir():
            written[cell.id] = sum(
                os.lstat(os.path.join(dirpath, f)).st_size
                for sub in ("checkpoints", "final")
                for dirpath, _, files in os.walk(folder / sub)
                for f in files
            )
    at = Path(grid.root).absolute()
    while not at.exists() and at != at.parent:
        at = at.parent
    return DiskReport(
        root=grid.root,
        cells=tuple((c.id, d) for c, d in cells),
        finished=frozenset(finished),
        written=written,
        free=free_bytes(at),
        free_at=str(at),
    )


def check_disk(config: PipelineConfig, grid: Grid, free_bytes: Callable[[Path], int] = free_space) -> str:
    """The summary line to print at workflow load; a ``DiskSpaceWarning`` when short."""
    rep = report(config, grid, free_bytes)
    if warning := rep.warning():
        # attributed here: Python drops a warning attributed to a Snakefile's frame
        warnings.warn(warning, DiskSpaceWarning, stacklevel=1)
    return rep.line()
