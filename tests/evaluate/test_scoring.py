"""Scoring hooks: the one answer extraction, avg@k over repeats, GPQA's fixed choice order."""

import random

import datasets
import pytest

from sagc.evaluate.scoring import (
    GPQA_LETTERS,
    gpqa_choice_order,
    keep_all_samples,
    process_gpqa_docs,
    process_results,
)


def test_process_results_uses_last_box_and_normalisation():
    doc = {"answer": "7"}
    assert process_results(doc, ["e=1\n\\boxed{3}\nso \\boxed{07}"])["exact_match"] == 1.0
    assert process_results(doc, ["\\boxed{7} then \\boxed{8}"])["exact_match"] == 0.0
    # no box: no strict credit; the lenient score reads the last number
    assert process_results(doc, ["so it is 7"]) == {"exact_match": 0.0, "exact_match_lenient": 1.0}


def test_process_results_averages_repeats():
    doc = {"answer": "1/2"}
    gens = ["\\boxed{0.5}", "\\boxed{\\frac{1}{2}}", "\\boxed{2}", "the answer is 1/2"]
    assert process_results(doc, [gens]) == {"exact_match": 0.5, "exact_match_lenient": 0.75}


def test_process_results_rejects_doc_without_answer():
    with pytest.raises(ValueError, match="answer"):
        process_results({"prompt": "x"}, ["\\boxed{1}"])


def test_keep_all_samples_keeps_every_repeat():
    assert keep_all_samples([("a", "b"), ("c",)], [{}, {}]) == [["a", "b"], ["c"]]


def _gpqa_rows(n):
    return [
        {
            "Record ID": f"rec{i}",
            "Question": f"Which is right {i}?",
            "Correct Answer": f"right{i}",
            "Incorrect Answer 1": f"wrong{i}a",
            "Incorrect Answer 2": f"wrong{i}b",
            "Incorrect Answer 3": f"wrong{i}c",
        }
        for i in range(n)
    ]


def test_gpqa_order_depends_only_on_question_id():
    rows = _gpqa_rows(12)
    random.seed(1)
    first = process_gpqa_docs(datasets.Dataset.from_list(rows))
    random.seed(2)  # the global random state must not matter
    second = process_gpqa_docs(datasets.Dataset.from_list(list(reversed(rows))))
    by_id = {d["Record ID"]: d for d in second}
    for doc in first:
        other = by_id[doc["Record ID"]]
        assert [doc[f"choice{k}"] for k in range(1, 5)] == [other[f"choice{k}"] for k in range(1, 5)]
        correct = "ABCD".index(doc["answer"])
        assert doc[f"choice{correct + 1}"] == doc["Correct Answer"]
    # The correct answer is not always in the same slot.
    assert len({d["answer"] for d in first}) > 1
    assert sorted(gpqa_choice_order("x")) == [0, 1, 2, 3]
    assert set(GPQA_LETTERS) == {"A", "B", "C", "D"}


def test_gpqa_missing_column_is_named():
    rows = _gpqa_rows(2)
    for r in rows:
        del r["Incorrect Answer 2"]
    with pytest.raises(ValueError, match="Incorrect Answer 2"):
        process_gpqa_docs(datasets.Dataset.from_list(rows))


def test_gpqa_text_is_kept_as_the_dataset_gives_it():
    """Only lm-eval's own clean-up: ends stripped, " [title]" -> ". ", one pass of double
    spaces (a triple space keeps two); newlines and the question stay untouched."""
    row = {
        "Record ID": "r1",
        "Question": "Line one\n\nLine  two ",
        "Correct Answer": " a\nb  c [title]d ",
        "Incorrect Answer 1": "x   y",
        "Incorrect Answer 2": "p\tq",
        "Incorrect Answer 3": "z",
    }
    doc = process_gpqa_docs(datasets.Dataset.from_list([row]))[0]
    assert doc["question"] == "Line one\n\nLine  two "
    choices = {doc[f"choice{k}"] for k in range(1, 5)}
    assert choices == {"a\nb c. d", "x  y", "p\tq", "z"}
    assert doc[f"choice{'ABCD'.index(doc['answer']) + 1}"] == "a\nb c. d"
