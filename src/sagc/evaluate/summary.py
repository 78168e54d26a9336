"""``summary.json``: the per-model record the aggregation reads (fields: docs/evaluation.md)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from scipy.special import comb

from sagc.evaluate.recorder import GenerationRecorder
from sagc.evaluate.scoring import FILTER, LENIENT_METRIC, METRIC, generations

SUMMARY_FIELDS = (
    "accuracy",
    "accuracy_stderr",
    "accuracy_lenient",
    "pass_at_k",
    "samples_per_problem",
    "mean_output_tokens",
    "truncation_rate",
    "n_samples",
)
_FLOAT_FIELDS = ("accuracy", "accuracy_stderr", "accuracy_lenient", "mean_output_tokens", "truncation_rate")
_INT_FIELDS = ("samples_per_problem", "n_samples")


def measure_samples(
    samples: Iterable[dict], *, recorder: GenerationRecorder | None, tokenizer, max_gen_toks: int
) -> list[dict[str, Any]]:
    """One row per generation (doc id, repeat, tokens, truncated, source): the backend's recorded
    figures, else the text re-tokenised, truncated when it fills the budget (``"retokenized"``)."""
    rows = []
    for sample in samples:
        for k, text in enumerate(generations(sample.get("resps", []))):
            record = recorder.take(text) if recorder is not None else None
            row = {"doc_id": sample.get("doc_id"), "repeat": k}
            if record is None:
                n = len(tokenizer.encode(text, add_special_tokens=False))
                rows.append({**row, "n_tokens": n, "truncated": n >= max_gen_toks, "source": "retokenized"})
            else:
                rows.append({**row, "n_tokens": record.n_tokens, "truncated": record.truncated, "source": "generated"})
    return rows


def _as_float(value: Any, default: float) -> float:
    try:
        f = float(value)
    except (TypeError, ValueError):
        return default
    return f if math.isfinite(f) else default


def pass_at_k(n: int, c: int, k: int) -> float:
    """Chen et al.'s (2021) unbiased pass@k of one problem with ``c`` of ``n`` samples correct:
    1 - C(n - c, k) / C(n, k)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    return 1.0 - float(comb(n - c, k, exact=True)) / float(comb(n, k, exact=True))


def pass_at_ks(n: int) -> list[int]:
    """The k reported for n samples per problem: 1, 2, 4, ... up to n, and n itself."""
    ks = [1 << i for i in range(n.bit_length()) if 1 << i <= n]
    return ks if ks[-1] == n else ks + [n]


def pass_at_k_curve(samples: Iterable[dict]) -> tuple[int, dict[str, float]]:
    """Samples per problem, and strict pass@k averaged over problems for every k of ``pass_at_ks``,
    from lm-eval's logged samples (a problem's ``exact_match`` is c / n)."""
    counts = []
    for sample in samples:
        n = len(generations(sample.get("resps", [])))
        counts.append((n, round(float(sample[METRIC]) * n)))
    if not counts:
        raise ValueError("no logged sample to compute pass@k from")
    n = min(n for n, _ in counts)
    if any(m != n for m, _ in counts):
        raise ValueError(
            f"problems carry different sample counts {sorted({m for m, _ in counts})}: "
            "pass@k needs the same n for every problem"
        )
    return n, {str(k): sum(pass_at_k(n, c, k) for _, c in counts) / len(counts) for k in pass_at_ks(n)}


def task_summary(task_results: dict, n_docs: int, length_rows: list[dict], samples: list[dict]) -> dict[str, Any]:
    """One task's summary entry from lm-eval's results, the length rows and its samples."""
    key, lenient = f"{METRIC},{FILTER}", f"{LENIENT_METRIC},{FILTER}"
    for needed in (key, lenient):
        if needed not in task_results:
            raise ValueError(f"lm-eval results lack {needed!r}; got {sorted(task_results)}")
    if not length_rows:
        raise ValueError("no generation was logged for the task (log_samples off?)")
    n = len(length_rows)
    per_problem, curve = pass_at_k_curve(samples)
    return {
        "accuracy": _as_float(task_results[key], math.nan),
        "accuracy_stderr": _as_float(task_results.get(f"{METRIC}_stderr,{FILTER}"), 0.0),
        "accuracy_lenient": _as_float(task_results[lenient], math.nan),
        "pass_at_k": curve,
        "samples_per_problem": per_problem,
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
        for name in _INT_FIELDS:
            if not isinstance(fields[name], int):
                raise ValueError(f"summary task {task!r}: {name} must be an int")
        for name in _FLOAT_FIELDS:
            if not isinstance(fields[name], float) or not math.isfinite(fields[name]):
                raise ValueError(f"summary task {task!r}: {name} must be a finite float")
        curve = fields["pass_at_k"]
        if (
            not isinstance(curve, dict)
            or not curve
            or not all(k.isdigit() and isinstance(v, float) and 0.0 <= v <= 1.0 for k, v in curve.items())
        ):
            raise ValueError(f"summary task {task!r}: pass_at_k must map each k to a rate in [0, 1]")
    return summary
