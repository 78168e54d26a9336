"""The fixed names of the files the aggregation writes; free of heavy imports, so the Snakefile
can import it at parse time."""

from __future__ import annotations

from pathlib import Path

#: Tables in ``tables_dir``: CSV + Markdown + LaTeX each.
TABLE_NAMES = ("efficiency", "downstream", "length_tail")
TABLE_FORMATS = ("csv", "md", "tex")
#: Further files in ``tables_dir``: the headline lines, per-seed detail, missing cells.
EXTRA_TABLE_FILES = ("headline.md", "headline.csv", "efficiency_cells.csv", "downstream_cells.csv", "missing.json")

#: Figures in ``figures_dir``: PNG (200 dpi) + PDF each.
FIGURE_NAMES = (
    "straggler_rate", "sagc_group_size", "sagc_posterior", "reward_vs_time", "length_ratio",
    "accuracy_vs_length",
)  # fmt: skip
FIGURE_FORMATS = ("png", "pdf")


def table_files() -> list[str]:
    """File names written to ``tables_dir``."""
    return [f"{n}.{e}" for n in TABLE_NAMES for e in TABLE_FORMATS] + list(EXTRA_TABLE_FILES)


def figure_files() -> list[str]:
    """File names written to ``figures_dir``."""
    return [f"{n}.{e}" for n in FIGURE_NAMES for e in FIGURE_FORMATS]


def table_outputs(tables_dir: str | Path) -> list[str]:
    """Paths of every table file for ``tables_dir`` (e.g. ``results/default/tables``)."""
    return [str(Path(tables_dir) / f) for f in table_files()]


def figure_outputs(figures_dir: str | Path) -> list[str]:
    """Paths of every figure file for ``figures_dir`` (e.g. ``paper_figures/default``)."""
    return [str(Path(figures_dir) / f) for f in figure_files()]
