"""The task generator: determinism, contract columns, answers, length tail, bad params."""

import json
import random

import numpy as np
import pytest

from sagc.answers import extract_boxed, is_correct
from sagc.tiny.task import (
    SPLITS,
    TaskParams,
    apply_op,
    generate_splits,
    load_split,
    ramble_solution,
    write_splits,
)

SMALL = TaskParams(n_train=300, n_eval=50, n_heldout=30)


def test_same_seed_same_splits_other_seed_differs():
    a = generate_splits(SMALL, seed=7)
    b = generate_splits(SMALL, seed=7)
    c = generate_splits(SMALL, seed=8)
    assert a == b
    assert a["train"] != c["train"]


def test_rows_follow_the_contract_and_answers_are_right():
    splits = generate_splits(SMALL, seed=1)
    assert set(splits) == set(SPLITS)
    for rows in splits.values():
        for row in rows:
            assert set(row) >= {"prompt", "answer", "solution", "n_steps"}
            assert row["prompt"].endswith("Solution:\n")
            assert row["solution"].endswith("\\boxed{" + row["answer"] + "}")
            assert extract_boxed(row["solution"]) == row["answer"]
            assert is_correct(row["solution"], row["answer"])
            # One evaluated line per step, then the box.
            assert len(row["solution"].split("\n")) == row["n_steps"] + 1


def test_answer_is_recomputed_from_the_prompt():
    """Re-evaluate the chain from the prompt text alone: the reference answer must match."""
    for row in generate_splits(SMALL, seed=3)["train"][:100]:
        _, start, rule, find, _ = row["prompt"].split("\n", 4)
        letter, value = start.split("=")
        op, x = rule[len("Rule: next=prev")], int(rule[len("Rule: next=prev") + 1 :])
        target = find.split()[1].rstrip(".")
        steps = ord(target) - ord(letter)
        assert steps == row["n_steps"]
        value = int(value)
        for _ in range(steps):
            value = apply_op(value, op, x, 10)
        assert str(value) == row["answer"]


def test_eval_is_held_out_and_heldout_is_longer():
    splits = generate_splits(SMALL, seed=2)
    train_prompts = {r["prompt"] for r in splits["train"]}
    assert not train_prompts & {r["prompt"] for r in splits["eval"]}
    assert min(r["n_steps"] for r in splits["heldout"]) > max(r["n_steps"] for r in splits["train"])


def test_step_counts_are_right_skewed_with_a_tail():
    n = np.array([r["n_steps"] for r in generate_splits(TaskParams(n_train=3000, n_eval=0, n_heldout=0), 0)["train"]])
    assert np.median(n) == 4
    assert n.mean() > np.median(n)  # right skew
    assert n.max() >= 2.5 * np.median(n)  # a real tail
    assert n.min() >= 2


def test_write_and_load_round_trip(tmp_path):
    sizes = write_splits(tmp_path, SMALL, seed=5)
    assert sizes == {"train": 300, "eval": 50, "heldout": 30}
    assert load_split(tmp_path, "train") == generate_splits(SMALL, seed=5)["train"]
    meta = json.loads((tmp_path / "task.json").read_text())
    assert meta["seed"] == 5 and meta["params"]["n_train"] == 300


def test_load_split_errors_name_the_file(tmp_path):
    with pytest.raises(ValueError, match="train.jsonl"):
        load_split(tmp_path, "train")
    (tmp_path / "eval.jsonl").write_text('{"prompt": "x"}\n')
    with pytest.raises(ValueError, match=r"eval.jsonl:1: missing column"):
        load_split(tmp_path, "eval")
    (tmp_path / "heldout.jsonl").write_text("not json\n")
    with pytest.raises(ValueError, match="heldout.jsonl:1"):
        load_split(tmp_path, "heldout")
    with pytest.raises(ValueError, match="split"):
        load_split(tmp_path, "test")


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"modulus": 11}, "modulus"),
        ({"modulus": 1}, "modulus"),
        ({"min_steps": 0}, "min_steps"),
        ({"max_steps": 1}, "max_steps"),
        ({"median_steps": 0}, "median_steps"),
        ({"sigma_steps": -1}, "sigma_steps"),
        ({"heldout_min_steps": 12}, "heldout_min_steps"),
        ({"heldout_max_steps": 30}, "heldout_max_steps"),
        ({"n_train": 0}, "n_train"),
        ({"n_eval": -1}, "n_eval"),
        ({"n_train": 2.5}, "n_train"),
        ({"operators": "+/"}, "operators"),
        ({"operators": ""}, "operators"),
        ({"median_steps": float("nan")}, "median_steps"),
    ],
)
def test_bad_task_parameters_name_the_parameter(kwargs, name):
    with pytest.raises(ValueError, match=f"'{name}'"):
        generate_splits(TaskParams(**kwargs), seed=0)


def test_bad_seed_is_rejected():
    with pytest.raises(ValueError, match="seed"):
        generate_splits(SMALL, seed="0")


def test_ramble_solution_repeats_the_work_and_keeps_the_answer():
    row = generate_splits(SMALL, seed=0)["train"][0]
    long = ramble_solution(row, random.Random(0), continue_prob=0.9)
    assert len(long) > 2 * len(row["solution"])
    assert long.count("\\boxed{") == 1 and is_correct(long, row["answer"])
