"""Lines of Python per package of a source tree, split into code, docstrings, comments and blanks.

    python benchmarks/source_lines.py [src]

What the house's size goal counts (every line of every ``.py`` file under the folder), and
where the lines are: a docstring is a module's, class's or function's first string statement.
"""

from __future__ import annotations

import argparse
import ast
import io
import tokenize
from collections import Counter, defaultdict
from pathlib import Path

KINDS = ("code", "doc", "comment", "blank")


def line_kinds(source: str) -> list[str]:
    """One of ``KINDS`` per line of ``source``."""
    lines = source.splitlines()
    kinds = ["blank" if not line.strip() else "code" for line in lines]
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body:
            first = body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                kinds[first.lineno - 1 : first.end_lineno] = ["doc"] * (first.end_lineno - first.lineno + 1)
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT and lines[token.start[0] - 1].lstrip().startswith("#"):
            kinds[token.start[0] - 1] = "comment"
    return kinds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", default="src", help="the source folder (default: src)")
    root = Path(parser.parse_args().root)
    packages: dict[str, Counter] = defaultdict(Counter)
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        package = "/".join(parts[:2]) if len(parts) > 2 else "/".join(parts[:-1] + ("*.py",))
        packages[package].update(line_kinds(path.read_text()))
    total = sum(packages.values(), Counter())
    print(f"{'package':24s} {'lines':>6s} " + " ".join(f"{k:>7s}" for k in KINDS))
    for name, counts in sorted(packages.items()) + [("total", total)]:
        print(f"{name:24s} {sum(counts.values()):6d} " + " ".join(f"{counts[k]:7d}" for k in KINDS))


if __name__ == "__main__":
    main()
