"""Scoring hooks the task YAMLs register with lm-eval: each generation judged by ``sagc.answers``
(strict ``is_correct``, the training reward's check, and ``is_correct_lenient``), averaged over repeats."""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Any

from sagc.answers import is_correct, is_correct_lenient
from sagc.evaluate.normalizers import GPQA_COLUMNS

#: The strict, primary score (lm-eval's results key is ``exact_match,<filter>``).
METRIC = "exact_match"
#: The lenient score beside it (every task YAML lists both in its ``metric_list``).
LENIENT_METRIC = "exact_match_lenient"
#: Name of the filter pipeline every task YAML declares.
FILTER = "all_samples"

#: Seed of the GPQA choice shuffle: part of the task definition (it fixes the letters), not a run option.
GPQA_SHUFFLE_SEED = 0
GPQA_LETTERS = ("A", "B", "C", "D")


def keep_all_samples(resps: Iterable[list[str]], docs: Iterable[dict]) -> list[list[str]]:
    """lm-eval ``custom`` filter: pass every repeat of every document through unchanged."""
    return [list(r) for r in resps]


def generations(entries: Iterable[Any]) -> list[str]:
    """One document's generations: each entry a list of k generations (``keep_all_samples``, lm-eval's
    logged ``resps``) or a bare string (lm-eval's default ``take_first`` filter)."""
    out: list[str] = []
    for entry in entries:
        out.extend([entry] if isinstance(entry, str) else list(entry))
    return out


def process_results(doc: dict, results: list[Any]) -> dict[str, float]:
    """Score one document: the fraction of its generations that are correct, strict and lenient."""
    texts = generations(results)
    if not texts:
        raise ValueError("process_results got no generation for a document")
    if "answer" not in doc:
        raise ValueError(f"task document has no 'answer' column (columns: {sorted(doc)})")
    reference, n = str(doc["answer"]), len(texts)
    return {
        METRIC: sum(is_correct(g, reference) for g in texts) / n,
        LENIENT_METRIC: sum(is_correct_lenient(g, reference) for g in texts) / n,
    }


def _clean(text: Any) -> str:
    """lm-eval's clean-up of a GPQA choice (``tasks/gpqa/*/utils.py: preprocess``)."""
    if text is None:
        return " "
    return str(text).strip().replace(" [title]", ". ").replace("  ", " ")


def gpqa_choice_order(question_id: str) -> list[int]:
    """The four GPQA choices' order for one question (index 3 is the correct one), from its id
    alone, unlike lm-eval's shuffle of the global ``random`` state (docs/evaluation.md)."""
    order = [0, 1, 2, 3]
    random.Random(f"{GPQA_SHUFFLE_SEED}:{question_id}").shuffle(order)
    return order


def process_gpqa_docs(dataset):
    """lm-eval ``process_docs`` for GPQA: adds ``choice1..4`` in ``gpqa_choice_order`` and
    ``answer``, the correct choice's letter."""
    missing = [c for c in GPQA_COLUMNS if c not in dataset.column_names]
    if missing:
        raise ValueError(f"GPQA data lacks column(s) {missing}; has {dataset.column_names}")

    def _one(doc: dict) -> dict:
        raw = [_clean(doc[f"Incorrect Answer {i}"]) for i in (1, 2, 3)] + [_clean(doc["Correct Answer"])]
        order = gpqa_choice_order(str(doc["Record ID"]))
        choices = {f"choice{k + 1}": raw[i] for k, i in enumerate(order)}
        return {**choices, "question": doc["Question"], "answer": GPQA_LETTERS[order.index(3)]}

    return dataset.map(_one)
