"""The experiment grid behind the Snakemake workflow: config checks, cells, paths, seeds.

The Snakefile stays declarative; everything it needs to know about the grid (which cells
exist, where their outputs live, what each training job is told) comes from here and is
tested here.
"""

from sagc.pipeline.grid import Cell, Grid

__all__ = ["Cell", "Grid"]
