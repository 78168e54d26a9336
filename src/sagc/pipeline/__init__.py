"""The experiment grid behind the Snakemake workflow: config checks, cells, paths, seeds."""

from sagc.pipeline.grid import Cell, Grid

__all__ = ["Cell", "Grid"]
