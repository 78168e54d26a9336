"""Staging normalisers: a benchmark source's rows -> the columns its task YAML reads, each row with
an ``id``. A task YAML names its normaliser and keyword ``options`` in ``metadata.sagc_source``."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any


def _get(row: dict, name: str, where: str) -> Any:
    """Column ``name`` of ``row``, matched case-insensitively (sources differ in case)."""
    if name in row:
        return row[name]
    lowered = {str(k).lower(): k for k in row}
    if name.lower() in lowered:
        return row[lowered[name.lower()]]
    raise ValueError(f"{where}: row lacks column {name!r} (has {sorted(map(str, row))})")


def _fmt_answer(value: Any) -> str:
    """Answers as strings; integral floats (AMC's ``142.0``) without the ``.0``."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def aime(rows: Iterable[dict], where: str) -> list[dict]:
    return [
        {
            "id": str(_get(r, "ID", where)),
            "problem": str(_get(r, "Problem", where)),
            "answer": _fmt_answer(_get(r, "Answer", where)),
        }
        for r in rows
    ]


def amc(rows: Iterable[dict], where: str, year: int) -> list[dict]:
    """The rows whose AoPS ``url`` names the contest ``year``."""
    out = []
    for r in rows:
        url = str(_get(r, "url", where))
        if str(year) in url:
            row = {"id": str(_get(r, "id", where)), "problem": str(_get(r, "problem", where))}
            out.append({**row, "answer": _fmt_answer(_get(r, "answer", where)), "url": url})
    return out


GPQA_COLUMNS = ("Record ID", "Question", "Correct Answer") + tuple(f"Incorrect Answer {i}" for i in (1, 2, 3))


def gpqa(rows: Iterable[dict], where: str) -> list[dict]:
    out = []
    for r in rows:
        row = {c: str(_get(r, c, where)) for c in GPQA_COLUMNS}
        out.append({"id": row["Record ID"], **row})
    return out


#: Normaliser name (as a task YAML's metadata names it) -> function(rows, where, **options).
NORMALIZERS: dict[str, Callable[..., list[dict]]] = {"aime": aime, "amc": amc, "gpqa": gpqa}
