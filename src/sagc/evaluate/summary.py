"""``summary.json``: the small per-model record that the aggregation reads.

Shape (contract in docs/architecture.md; nothing else goes into this file)::

    {"model": str, "cell": str,
     "tasks": {task: {"accuracy": float, "accuracy_stderr": float,
                      "mean_output_tokens": float, "truncation_rate": float,
                      "n_samples": int}}}

* ``accuracy`` / ``accuracy_stderr``: lm-eval's own ``exact_match`` (mean over documents of
  the per-document avg@k) and its standard error; the stderr is 0.0 when lm-eval reports
  none (a single document).
* ``n_samples``: documents evaluated (lm-eval's effective ``n-samples``).
* ``mean_output_tokens`` / ``truncation_rate``: over every generation (documents x repeats),
  in the evaluated model's tokens, before any filtering (see ``sagc.evaluate.recorder``).

The per-generation figures behind the means go to ``output_lengths.jsonl`` next to it.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

from sagc.evaluate.recorder import GenerationRecord, GenerationRecorder
from sagc.evaluate.scoring import FILTER, METRIC

SUMMARY_FIELDS = ("accuracy", "accuracy_stderr", "mean_output_tokens", "truncation_rate", "n_samples")


def _generations(sample: dict) -> list[str]:
    """Raw generations of one logged sample (``resps``: one list of k strings per request)."""
    out: list[str] = []
    for entry in sample.get("resps", []):
        out.extend([entry] if isinstance(entry, str) else list(entry))
    return out


def measure_samples(
    samples: Iterable[dict],
    *,
    recorder: GenerationRecorder | None,
    tokenizer,
    max_gen_toks: int,
) -> list[dict[str, Any]]:
    """One row per generation: doc id, repeat index, token count, truncation and its source.

    Recorded figures (exact, HF backend) are preferred; otherwise the generation is
    re-tokenised with the model's tokenizer and counted as truncated when it fills the
    budget (``source = "retokenized"``, an approximation documented in the recorder).
    """
    rows = []
    for sample in samples:
        for k, text in enumerate(_generations(sample)):
            record = recorder.take(text) if recorder is not None else None
            source = "generated"
            if record is None:
                n = len(tokenizer.encode(text, add_special_tokens=False))
                record = GenerationRecord(n_tokens=n, truncated=n >= max_gen_toks)
                source = "retokenized"
            rows.append({
                "doc_id": sample.get("doc_id"),
                "repeat": k,
                "n_tokens": record.n_tokens,
                "truncated": record.truncated,
                "source": source,
            })
    return rows


def _as_float(value: Any, default: float) -> float:
    try:
        f = float(value)
    except (TypeError, ValueError):
        return default
    return f if math.isfinite(f) else default


def task_summary(task_results: dict, n_docs: int, length_rows: list[dict]) -> dict[str, Any]:
    key = f"{METRIC},{FILTER}"
    if key not in task_results:
        raise ValueError(f"lm-eval results lack {key!r}; got {sorted(task_results)}")
    if not length_rows:
        raise ValueError("no generation was logged for the task (log_samples off?)")
    n = len(length_rows)
    return {
        "accuracy": _as_float(task_results[key], math.nan),
        "accuracy_stderr": _as_float(task_results.get(f"{METRIC}_stderr,{FILTER}"), 0.0),
        "mean_output_tokens": sum(r["n_tokens"] for r in length_rows) / n,
        "truncation_rate": sum(bool(r["truncated"]) for r in length_rows) / n,
        "n_samples": int(n_docs),
    }


def validate_summary(summary: dict) -> dict:
    """Raise ``ValueError`` naming the key when ``summary`` breaks the contract."""
    for key, typ in (("model", str), ("cell", str), ("tasks", dict)):
        if not isinstance(summary.get(key), typ):
            raise ValueError(f"summary key {key!r} must be a {typ.__name__}")
    if set(summary) != {"model", "cell", "tasks"}:
        raise ValueError(f"summary has unexpected keys {sorted(set(summary) - {'model', 'cell', 'tasks'})}")
    for task, fields in summary["tasks"].items():
        if set(fields) != set(SUMMARY_FIELDS):
            raise ValueError(f"summary task {task!r} fields {sorted(fields)} != {list(SUMMARY_FIELDS)}")
        if not isinstance(fields["n_samples"], int):
            raise ValueError(f"summary task {task!r}: n_samples must be an int")
        for name in SUMMARY_FIELDS[:-1]:
            if not isinstance(fields[name], float) or not math.isfinite(fields[name]):
                raise ValueError(f"summary task {task!r}: {name} must be a finite float")
    return summary
