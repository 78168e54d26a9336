"""Stage the paper's benchmarks once into a local cache; evaluation only ever reads the cache.

Sources (Hugging Face Hub datasets; the columns each cache file keeps):

| benchmark      | source                                   | cache file            | columns                                   |
|----------------|------------------------------------------|-----------------------|-------------------------------------------|
| ``aime24``     | ``Maxwell-Jia/AIME_2024`` (train, 30)    | ``aime24.jsonl``      | id, problem, answer                       |
| ``amc23``      | ``AI-MO/aimo-validation-amc`` (train),   | ``amc23.jsonl``       | id, problem, answer, url                  |
|                | rows whose AoPS ``url`` names ``2023``   |                       |                                           |
| ``gpqa_diamond`` | ``Idavidrein/gpqa``, config            | ``gpqa_diamond.jsonl``| id, Record ID, Question, Correct Answer,  |
|                | ``gpqa_diamond`` (train, 198), GATED     |                       | Incorrect Answer 1..3                     |

GPQA is gated: staging it from the Hub needs an HF token (``HF_TOKEN``) of an account that
accepted the dataset's terms. Without network (or for GPQA without access) pass
``--source-dir DIR`` holding ``<benchmark>.jsonl|.json|.csv|.parquet`` with the source's
own columns (for GPQA, the ``gpqa_diamond.csv`` of the official release works as is).
Every staged file gets a ``<benchmark>.meta.json`` (source, row count, sha256).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from sagc.io import atomic_write_json, atomic_write_text, read_jsonl
from sagc.pipeline.hub import hub_switched_off_reason, offline_switches


class StageError(RuntimeError):
    """Staging could not produce a cache file; the message says what to do."""


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


def _norm_aime(rows: Iterable[dict], where: str, **_: Any) -> list[dict]:
    return [
        {
            "id": str(_get(r, "ID", where)),
            "problem": str(_get(r, "Problem", where)),
            "answer": _fmt_answer(_get(r, "Answer", where)),
        }
        for r in rows
    ]


def _norm_amc(rows: Iterable[dict], where: str, year: int = 2023, **_: Any) -> list[dict]:
    out = []
    for r in rows:
        url = str(_get(r, "url", where))
        if str(year) not in url:
            continue
        out.append({
            "id": str(_get(r, "id", where)),
            "problem": str(_get(r, "problem", where)),
            "answer": _fmt_answer(_get(r, "answer", where)),
            "url": url,
        })
    return out


GPQA_COLUMNS = ("Record ID", "Question", "Correct Answer",
                "Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3")


def _norm_gpqa(rows: Iterable[dict], where: str, **_: Any) -> list[dict]:
    out = []
    for r in rows:
        row = {c: str(_get(r, c, where)) for c in GPQA_COLUMNS}
        out.append({"id": row["Record ID"], **row})
    return out


@dataclass(frozen=True)
class Benchmark:
    name: str
    hub_id: str
    hub_config: str | None
    split: str
    normalize: Callable[..., list[dict]]
    gated: bool = False


BENCHMARKS = {
    "aime24": Benchmark("aime24", "Maxwell-Jia/AIME_2024", None, "train", _norm_aime),
    "amc23": Benchmark("amc23", "AI-MO/aimo-validation-amc", None, "train", _norm_amc),
    "gpqa_diamond": Benchmark(
        "gpqa_diamond", "Idavidrein/gpqa", "gpqa_diamond", "train", _norm_gpqa, gated=True
    ),
}

SOURCE_SUFFIXES = (".jsonl", ".json", ".csv", ".parquet")


def cache_path(cache: Path, benchmark: str) -> Path:
    return Path(cache) / f"{benchmark}.jsonl"


def _read_local(path: Path) -> list[dict]:
    import pandas as pd

    if path.suffix == ".jsonl":
        return [row for _, row in read_jsonl(path)]
    if path.suffix == ".json":
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, list):
            raise ValueError(f"{path}: expected a JSON list of rows")
        return data
    frame = pd.read_csv(path) if path.suffix == ".csv" else pd.read_parquet(path)
    return frame.to_dict(orient="records")


def _find_source(source_dir: Path, benchmark: str) -> Path:
    for suffix in SOURCE_SUFFIXES:
        candidate = Path(source_dir) / f"{benchmark}{suffix}"
        if candidate.is_file():
            return candidate
    names = ", ".join(f"{benchmark}{s}" for s in SOURCE_SUFFIXES)
    raise StageError(f"--source-dir {source_dir} holds none of: {names}")


def _offline_message(bench: Benchmark, cache: Path, why: str) -> str:
    msg = (
        f"cannot stage benchmark {bench.name!r}: {why}. Nothing is cached at "
        f"{cache_path(cache, bench.name)}. Stage it on a machine with network access: "
        f"python -m sagc.evaluate stage --benchmarks {bench.name} --cache {cache} "
        f"(downloads {bench.hub_id}"
        + (f", config {bench.hub_config}" if bench.hub_config else "")
        + f"), then copy {cache} here; or put a local copy at <DIR>/{bench.name}.jsonl|.csv|"
        f".parquet and run: python -m sagc.evaluate stage --benchmarks {bench.name} "
        f"--cache {cache} --source-dir <DIR>"
    )
    if bench.gated:
        msg += (
            f". {bench.hub_id} is gated: accept its terms on huggingface.co with your account"
            " and export HF_TOKEN before staging from the Hub"
        )
    return msg + "."


def _download(bench: Benchmark, cache: Path) -> list[dict]:
    switches = offline_switches()
    if switches:
        raise StageError(_offline_message(bench, cache, hub_switched_off_reason(switches)))
    import datasets

    try:
        ds = datasets.load_dataset(bench.hub_id, bench.hub_config, split=bench.split)
    except Exception as exc:  # network, auth or gating errors all end here
        raise StageError(_offline_message(bench, cache, f"download failed ({type(exc).__name__}: {exc})")) from exc
    return [dict(r) for r in ds]


def stage_benchmark(
    name: str, cache: Path, source_dir: Path | None = None, force: bool = False, amc_year: int = 2023
) -> Path:
    """Make ``cache/<name>.jsonl``; an existing file is kept unless ``force``."""
    if name not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {name!r}; known: {sorted(BENCHMARKS)}")
    bench = BENCHMARKS[name]
    cache = Path(cache).expanduser().resolve()
    target = cache_path(cache, name)
    if target.is_file() and not force:
        return target
    if source_dir is not None:
        src = _find_source(Path(source_dir), name)
        raw, source = _read_local(src), str(src)
    else:
        raw, source = _download(bench, cache), f"hf://datasets/{bench.hub_id}" + (
            f"/{bench.hub_config}" if bench.hub_config else "") + f" split={bench.split}"
    rows = bench.normalize(raw, where=source, year=amc_year)
    if not rows:
        raise StageError(f"benchmark {name!r}: no rows left after normalising {source}")
    ids = [r["id"] for r in rows]
    if len(set(ids)) != len(ids):
        raise StageError(f"benchmark {name!r}: duplicate ids in {source}")
    cache.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    atomic_write_text(target, text)
    atomic_write_json(
        cache / f"{name}.meta.json",
        {"benchmark": name, "source": source, "rows": len(rows),
         "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()},
    )
    return target


def stage(
    benchmarks: list[str], cache: Path, source_dir: Path | None = None, force: bool = False,
    amc_year: int = 2023,
) -> dict[str, Path]:
    """Stage several benchmarks; validates every name before touching anything."""
    unknown = [b for b in benchmarks if b not in BENCHMARKS]
    if unknown or not benchmarks:
        raise ValueError(f"unknown benchmark(s) {unknown}; known: {sorted(BENCHMARKS)}")
    return {b: stage_benchmark(b, cache, source_dir, force, amc_year) for b in benchmarks}
