"""Stage the paper's benchmarks once into a local cache, from the Hub or ``--source-dir``; evaluation
only reads the cache (docs/evaluation.md, "Staging the benchmarks")."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from sagc.evaluate.normalizers import NORMALIZERS
from sagc.evaluate.taskcfg import SOURCE_SUFFIXES, Benchmark, benchmarks, stage_hint
from sagc.hub_switches import hub_switched_off_reason, offline_switches
from sagc.io import atomic_write_json, atomic_write_text, read_jsonl


class StageError(RuntimeError):
    """Staging could not produce a cache file; the message says what to do."""


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
    return (
        f"cannot stage benchmark {bench.name!r}: {why}. Nothing is cached at {cache / f'{bench.name}.jsonl'}."
        f" Stage it on a machine with network access and copy {cache} here: {stage_hint(bench, cache)}."
    )


def _download(bench: Benchmark, cache: Path) -> list[dict]:
    switches = offline_switches()
    if switches:
        raise StageError(_offline_message(bench, cache, hub_switched_off_reason(switches)))
    import datasets

    try:
        ds = datasets.load_dataset(bench.dataset, bench.config, split=bench.split)
    except Exception as exc:  # network, auth or gating errors all end here
        raise StageError(_offline_message(bench, cache, f"download failed ({type(exc).__name__}: {exc})")) from exc
    return [dict(r) for r in ds]


def stage_benchmark(name: str, cache: Path, source_dir: Path | None = None, force: bool = False) -> Path:
    """Make ``cache/<name>.jsonl``; an existing file is kept unless ``force``."""
    known = benchmarks()
    if name not in known:
        raise ValueError(f"unknown benchmark {name!r}; known: {sorted(known)}")
    bench = known[name]
    cache = Path(cache).expanduser().resolve()
    target = cache / f"{name}.jsonl"
    if target.is_file() and not force:
        return target
    if source_dir is not None:
        src = _find_source(Path(source_dir), name)
        raw, source = _read_local(src), str(src)
    else:
        raw, source = _download(bench, cache), bench.source
    rows = NORMALIZERS[bench.normalizer](raw, where=source, **bench.options)
    if not rows:
        raise StageError(f"benchmark {name!r}: no rows left after normalising {source}")
    ids = [r["id"] for r in rows]
    if len(set(ids)) != len(ids):
        raise StageError(f"benchmark {name!r}: duplicate ids in {source}")
    cache.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    atomic_write_text(target, text)
    sha256 = hashlib.sha256(text.encode("utf-8")).hexdigest()
    atomic_write_json(
        cache / f"{name}.meta.json", {"benchmark": name, "source": source, "rows": len(rows), "sha256": sha256}
    )
    return target


def stage(names: list[str], cache: Path, source_dir: Path | None = None, force: bool = False) -> dict[str, Path]:
    """Stage several benchmarks; validates every name before touching anything."""
    known = benchmarks()
    unknown = [b for b in names if b not in known]
    if unknown or not names:
        raise ValueError(f"unknown benchmark(s) {unknown}; known: {sorted(known)}")
    return {b: stage_benchmark(b, cache, source_dir, force) for b in names}
