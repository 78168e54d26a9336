"""The task generator: determinism, contract columns, answers, length tail, bad params."""

import json
import random

import numpy as np
import pytest

from sagc.answers import extract_boxed, is_correct
from sagc.tiny.task import (
    CHECK_LINE,
    SPLITS,
    Problem,
    TaskParams,
    apply_op,
    behaviour_of,
    generate_splits,
    load_split,
    render_completion,
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
            assert row["prompt"].endswith("\n") and row["prompt"].count("\n") == 1
            assert row["solution"].endswith("\\boxed{" + row["answer"] + "}")
            assert extract_boxed(row["solution"]) == row["answer"]
            assert is_correct(row["solution"], row["answer"])
            # One evaluated line per step, then the box.
            assert len(row["solution"].split("\n")) == row["n_steps"] + 1


def test_answer_is_recomputed_from_the_prompt():
    """Re-evaluate the chain from the prompt text alone: the reference answer must match."""
    for row in generate_splits(SMALL, seed=3)["train"][:100]:
        _, start, rule, _, target = row["prompt"].split()
        letter, value = start.split(":")
        op, x = rule[len("next=prev")], int(rule[len("next=prev") + 1 :])
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


def test_step_counts_are_narrow_so_problems_alone_rarely_straggle():
    """Plain chains of a step should stay within ~2x of each other: the long rows that make
    a step straggle are meant to come from the per-rollout check, not from the problems."""
    n = np.array([r["n_steps"] for r in generate_splits(TaskParams(n_train=3000, n_eval=0, n_heldout=0), 0)["train"]])
    assert np.median(n) == 3
    assert n.min() >= 2 and n.max() <= 5
    assert 0.3 <= np.mean(n == 3) <= 0.5 and np.mean(n == 5) <= 0.15  # typical problems, a short tail


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
        ({"heldout_min_steps": 5}, "heldout_min_steps"),
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


PROBLEM = Problem("d", 7, "+", 4, 4)


def test_prompt_round_trips_and_bad_prompts_are_rejected():
    assert PROBLEM.prompt == "start d:7 next=prev+4 find h\n"
    assert Problem.from_prompt(PROBLEM.prompt) == PROBLEM
    bad_prompts = ("start d:7 next=prev+4 find h", "start h:7 next=prev+4 find d\n", "d=7 next=prev+4 find h\n",
                   "start d:h next=prev+4 find h\n", "start d:7 next=prev+k find h\n", None)  # fmt: skip
    for bad in bad_prompts:
        with pytest.raises(ValueError, match="prompt|target"):
            Problem.from_prompt(bad)


def test_a_letters_task_is_the_digits_task_with_each_value_a_letter():
    """Same seed, same problems and solutions; only the value symbols differ (0 -> a ... 9 -> j),
    and a letters prompt parses back to its problem."""
    digits = generate_splits(SMALL, seed=5)
    letters = generate_splits(TaskParams(**{**SMALL.to_dict(), "values": "letters"}), seed=5)
    to_letter = str.maketrans("0123456789", "abcdefghij")
    for split in SPLITS:
        for d, row in zip(digits[split], letters[split], strict=True):
            problem = Problem.from_prompt(row["prompt"])
            assert problem.values == "letters" and problem.prompt == row["prompt"]
            # Only digits are translated: step names and words keep their letters.
            for key in ("prompt", "solution", "answer"):
                assert row[key] == d[key].translate(to_letter)
            assert row["n_steps"] == d["n_steps"]
            assert is_correct(row["solution"], row["answer"])
            wrong = "abcdefghij"[("abcdefghij".index(row["answer"]) + 1) % 10]
            assert not is_correct(row["solution"], wrong)


def test_reference_solution_writes_every_operation():
    assert PROBLEM.solution == "e=7+4=1\nf=1+4=5\ng=5+4=9\nh=9+4=3\n\\boxed{3}"
    assert PROBLEM.answer == "3"


@pytest.mark.parametrize("values", ["digits", "letters"])
@pytest.mark.parametrize("op", ["+", "-"])
def test_each_behaviour_is_recognised_and_judged(op, values):
    """The answer checker on every behaviour: plain and check right, slip and miscount wrong,
    and a check repairs a slip or a miscount of the first pass."""
    rng = random.Random(0)
    for _ in range(200):
        p = Problem(rng.choice("abcdefg"), rng.randrange(10), op, rng.randint(1, 9), rng.randint(2, 5), values=values)
        slip = (rng.randint(1, p.n_steps), rng.randint(1, 9))
        cases = {
            "plain": (render_completion(p), True),
            "slip": (render_completion(p, slip=slip), False),
            "miscount": (render_completion(p, stop_shift=rng.choice([-1, 1])), False),
            "check": (render_completion(p, slip=slip, checks=rng.randint(1, 2)), True),
            "check ": (render_completion(p, stop_shift=rng.choice([-1, 1]), checks=1), True),
        }
        for behaviour, (text, right) in cases.items():
            assert behaviour_of(text, p) == behaviour.strip(), text
            assert is_correct(text, p.answer) is right, text
            assert text.count("\\boxed{") == 1 and text.endswith("}")
    assert behaviour_of("garbage", PROBLEM) == behaviour_of(None, PROBLEM) == "other"


def test_a_check_is_at_least_two_and_a_half_times_as_long():
    """A check pass restates the problem and re-derives it: one pass makes a row at least
    2.5x a plain one in characters (2.2-2.4x in tokens; the straggler threshold of the
    default config is 2.5 on the median of a step), two passes at least 4x. The warm start
    draws one or two."""
    for n in (2, 3, 4, 5):
        p = Problem("c", 3, "-", 7, n)
        plain, one, two = (len(render_completion(p, checks=k)) for k in (0, 1, 2))
        assert 2.5 * plain < one < 3.1 * plain
        assert 4.0 * plain < two < 5.1 * plain
        assert render_completion(p, checks=2).count(CHECK_LINE) == 2


def test_a_check_restates_the_prompt_verbatim():
    """A check pass opens with the prompt line itself, so the start value, rule and target it
    re-derives from are a copy of tokens the model has seen in the same order (each copied
    field follows a token that occurs once in the prompt: ``start``, ``:``, ``prev``, ``find``)."""
    rng = random.Random(1)
    for _ in range(50):
        p = Problem(rng.choice("abcdefg"), rng.randrange(10), rng.choice("+-"), rng.randint(1, 9), rng.randint(2, 5))
        lines = render_completion(p, stop_shift=1, checks=2).split("\n")
        opens = [i for i, line in enumerate(lines) if line == CHECK_LINE]
        assert len(opens) == 2
        for i in opens:
            assert lines[i + 1] + "\n" == p.prompt
            assert lines[i + 2] == render_completion(p).split("\n")[0]


def test_the_last_check_decides_and_a_slipped_check_is_wrong():
    """A check pass that slips carries its error to the box; an earlier check's slip is
    repaired by the next check, as a first pass's is."""
    rng = random.Random(3)
    for _ in range(200):
        p = Problem(rng.choice("abcdefg"), rng.randrange(10), rng.choice("+-"), rng.randint(1, 9), rng.randint(2, 5))
        slip = (rng.randint(1, p.n_steps), rng.randint(1, 9))
        assert not is_correct(render_completion(p, checks=1, check_slips=(slip,)), p.answer)
        assert is_correct(render_completion(p, slip=slip, checks=2, check_slips=(slip, None)), p.answer)
        assert render_completion(p, checks=2, check_slips=(None, None)) == render_completion(p, checks=2)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"stop_shift": -4},
        {"slip": (5, 3)},
        {"slip": (1, 10)},
        {"checks": -1},
        {"checks": 2, "check_slips": ((1, 1),)},
        {"checks": 1, "check_slips": ((9, 1),)},
    ],
)
def test_impossible_behaviours_are_rejected(kwargs):
    with pytest.raises(ValueError):
        render_completion(PROBLEM, **kwargs)
