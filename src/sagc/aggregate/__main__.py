"""``python -m sagc.aggregate --grid grid.json [--allow-partial] [--root DIR]``."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

from sagc.aggregate.errors import CorruptRunFileError, MissingCellsError
from sagc.aggregate.grid import load_grid


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sagc.aggregate",
        description="Regenerate the paper's tables and figures from the cells' W&B runs and evaluation summaries.",
    )
    parser.add_argument("--grid", required=True, help="grid description JSON written by the pipeline")
    parser.add_argument("--allow-partial", action="store_true",
                        help="mark missing/unfinished cells in the tables instead of failing")  # fmt: skip
    parser.add_argument("--root", default=".", help="directory relative grid paths resolve against")
    parser.add_argument("--no-figures", action="store_true", help="write the tables only")
    args = parser.parse_args(argv)

    # matplotlib writes a font cache to ~/.config/matplotlib otherwise (see docs/library-notes.md).
    os.environ.setdefault("MPLCONFIGDIR", tempfile.mkdtemp(prefix="sagc-mpl-"))

    from sagc.aggregate.api import aggregate  # after MPLCONFIGDIR: it loads matplotlib

    grid = load_grid(args.grid, root=args.root)
    try:
        result = aggregate(grid, allow_partial=True if args.allow_partial else None,
                           figures=not args.no_figures)  # fmt: skip
    except (MissingCellsError, CorruptRunFileError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for path in result.tables + result.figures:
        print(path)
    if result.missing:
        print(f"warning: {len(result.missing)} cell(s) marked as missing (see "
              f"{grid.tables_dir}/missing.json)", file=sys.stderr)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
