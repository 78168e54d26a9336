"""The repository stands alone: its code and docs cite no issue numbers and no paths
outside the repository (a reader of a clone has neither)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TREES = ("src", "workflow", "docs", "configs", "benchmarks", "tests", "profiles", "envs")
FILES = ("README.md", "Snakefile", "pyproject.toml")
SUFFIXES = {".py", ".smk", ".md", ".yaml", ".yml", ".toml", ".rst", ".txt", ".json", ""}

#: An issue number ("issue" followed by a number, or a hash sign and a number), a sibling
#: folder of the checkout, an absolute path of the machine the code was written on, or the
#: notes that folder held. (Built from pieces so that this file does not match itself.)
FORBIDDEN = re.compile(
    "|".join(
        [
            r"\b[Ii]ssues? ?#?\d+",
            r"(?<![\w&/\"'])#\d{1,4}\b",
            r"\.\./" + "shared",
            "/" + r"work/",
            "field" + r"[- ]notes",
        ]
    )
)


def _files():
    for tree in TREES:
        for path in sorted((REPO / tree).rglob("*")):
            if path.is_file() and path.suffix in SUFFIXES and "__pycache__" not in path.parts:
                yield path
    for name in FILES:
        yield REPO / name


@pytest.mark.parametrize("path", [pytest.param(p, id=p.relative_to(REPO).as_posix()) for p in _files()])
def test_no_issue_numbers_or_outside_paths(path):
    hits = [
        f"{i}: {line.strip()}"
        for i, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if FORBIDDEN.search(line)
    ]
    assert not hits, f"{path.relative_to(REPO)}:\n" + "\n".join(hits)


#: A path under docs/ as the repository's files cite it (a page, a figure or a table).
DOCS_PATH = re.compile(r"\bdocs/[\w./-]+\.(?:md|png|pdf|csv)\b")


def test_every_cited_docs_path_exists():
    missing = sorted(
        f"{path.relative_to(REPO)}: {cited}"
        for path in _files()
        for cited in DOCS_PATH.findall(path.read_text(errors="replace"))
        if not (REPO / cited).exists()
    )
    assert not missing, "cited docs paths that do not exist:\n" + "\n".join(missing)
