"""A synthetic step-by-step reasoning task whose solution *behaviours* differ in length and accuracy.

Format, behaviours and why the task has this shape: src/sagc/tiny/README.md, "The task's design".
"""

from __future__ import annotations

import json
import math
import operator
import random
import re
import string
from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import sagc.io

#: Split files, in the order they are generated.
SPLITS = ("train", "eval", "heldout")
REQUIRED_COLUMNS = ("prompt", "answer", "solution", "n_steps")
_APPLY = {"+": operator.add, "-": operator.sub, "*": operator.mul}
OPERATORS = tuple(_APPLY)
BEHAVIOURS = ("plain", "miscount", "slip", "check")

#: Opens a check pass; the next line restates the prompt, so the pass starts from a fresh copy.
CHECK_LINE = "check"

#: How a value is written. Letters merge with the sign before them (``=d``, ``+f``): a step
#: line is 5 tokens instead of 8, with the same problems, behaviours and length ratios.
VALUE_SYMBOLS = {"digits": "0123456789", "letters": "abcdefghij"}

_VALUE = r"(\d|[a-j])"
_PROMPT = re.compile(rf"^start ([a-z]):{_VALUE} next=prev([+\-*]){_VALUE} find ([a-z])\n$")
_STEP = re.compile(rf"[a-z]={_VALUE}[+\-*]{_VALUE}={_VALUE}")


@dataclass(frozen=True)
class TaskParams:
    """Parameters of the task family (ranges: ``validate``; how step counts are drawn: ``sample_n_steps``)."""

    modulus: int = 10
    median_steps: float = 3.0
    sigma_steps: float = 0.3
    min_steps: int = 2
    max_steps: int = 5
    heldout_min_steps: int = 6
    heldout_max_steps: int = 8
    n_train: int = 4000
    n_eval: int = 256
    n_heldout: int = 128
    operators: str = "+-"
    values: str = "digits"

    def validate(self) -> TaskParams:
        """Raise ``ValueError`` naming the parameter when a value is out of range."""

        def fail(name: str, why: str) -> None:
            raise ValueError(f"task parameter {name!r}: {why} (got {getattr(self, name)!r})")

        ops = self.operators
        if not isinstance(ops, str) or not ops or any(c not in OPERATORS for c in ops) or len(set(ops)) != len(ops):
            fail("operators", f"must be a non-empty string of distinct characters from {''.join(OPERATORS)!r}")
        if self.values not in VALUE_SYMBOLS:
            fail("values", f"must be one of {sorted(VALUE_SYMBOLS)}")
        numbers = [f for f in fields(self) if f.name not in ("operators", "values")]
        for f in numbers:
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                fail(f.name, "must be a finite number")
        for f in numbers:
            if f.type == "int" and int(getattr(self, f.name)) != getattr(self, f.name):
                fail(f.name, "must be an integer")
        # One letter per variable: the start, one per step, and a spare for a chain that stops late.
        cap = len(string.ascii_lowercase) - 2
        rules = (
            ("modulus", 2 <= self.modulus <= 10, "must be in [2, 10] so that every value is one digit"),
            ("min_steps", self.min_steps >= 1, "must be >= 1"),
            ("max_steps", self.max_steps >= self.min_steps, "must be >= min_steps"),
            ("median_steps", self.median_steps > 0, "must be > 0"),
            ("sigma_steps", self.sigma_steps >= 0, "must be >= 0"),
            (
                "heldout_min_steps",
                self.heldout_min_steps > self.max_steps,
                "must be > max_steps (held-out problems are longer)",
            ),
            ("heldout_max_steps", self.heldout_max_steps >= self.heldout_min_steps, "must be >= heldout_min_steps"),
            ("heldout_max_steps", self.heldout_max_steps <= cap, f"must be <= {cap} (one letter per step)"),
            ("n_train", self.n_train >= 1, "must be >= 1"),
            ("n_eval", self.n_eval >= 0, "must be >= 0"),
            ("n_heldout", self.n_heldout >= 0, "must be >= 0"),
        )
        for name, ok, why in rules:
            if not ok:
                fail(name, why)
        return self

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Problem:
    """One problem: the start letter/value, the rule (operator, operand) and the step count."""

    start_letter: str
    start_value: int
    op: str
    operand: int
    n_steps: int
    modulus: int = 10
    values: str = "digits"

    @classmethod
    def from_prompt(cls, prompt: str, modulus: int = 10) -> Problem:
        """Parse a prompt back into its problem (ValueError if it is not one)."""
        m = _PROMPT.match(prompt) if isinstance(prompt, str) else None
        if m is None:
            raise ValueError(f"not a tiny-task prompt: {prompt!r}")
        start, value, op, operand, target = m.groups()
        n = ord(target) - ord(start)
        if n < 1:
            raise ValueError(f"target letter {target!r} does not follow start letter {start!r}: {prompt!r}")
        values = "digits" if value.isdigit() else "letters"
        if operand.isdigit() != value.isdigit():
            raise ValueError(f"not a tiny-task prompt (a digit and a letter value): {prompt!r}")
        symbols = VALUE_SYMBOLS[values]
        return cls(start, symbols.index(value), op, symbols.index(operand), n, modulus, values)

    def write(self, value: int) -> str:
        """A value as the problem writes it (a digit, or a letter in a ``letters`` task)."""
        return VALUE_SYMBOLS[self.values][value]

    def letter(self, k: int) -> str:
        """The letter of the k-th variable (0 = the start)."""
        return chr(ord(self.start_letter) + k)

    @property
    def answer(self) -> str:
        return self.write(_chain(self, self.n_steps, None)[1])

    @property
    def prompt(self) -> str:
        return (
            f"start {self.start_letter}:{self.write(self.start_value)} next=prev{self.op}{self.write(self.operand)} "
            f"find {self.letter(self.n_steps)}\n"
        )

    @property
    def solution(self) -> str:
        return render_completion(self)

    def record(self) -> dict:
        """The JSONL row (``REQUIRED_COLUMNS``)."""
        return {"prompt": self.prompt, "answer": self.answer, "solution": self.solution, "n_steps": self.n_steps}


def apply_op(value: int, op: str, operand: int, modulus: int) -> int:
    if op not in _APPLY:
        raise ValueError(f"unknown operator {op!r}; expected one of {OPERATORS}")
    return _APPLY[op](value, operand) % modulus


def render_completion(
    problem: Problem,
    stop_shift: int = 0,
    slip: tuple[int, int] | None = None,
    checks: int = 0,
    check_slips: tuple[tuple[int, int] | None, ...] = (),
) -> str:
    """A completion of ``problem`` in one of the warm start's behaviours (defaults: the reference).

    ``stop_shift``: stop that many letters after (> 0) or before (< 0) the target. ``slip``:
    ``(step, offset)``, the value at ``step`` (1-based) is off by ``offset``, carried on.
    ``checks``: that many re-derivations, each boxing its result over the pass before.
    ``check_slips``: per check, ``None`` or a slip of that pass.
    """
    n = problem.n_steps + stop_shift
    if n < 1:
        raise ValueError(f"stop_shift {stop_shift} leaves no step for a {problem.n_steps}-step problem")
    if checks < 0:
        raise ValueError(f"checks must be >= 0, got {checks}")
    if check_slips and len(check_slips) != checks:
        raise ValueError(f"check_slips gives {len(check_slips)} passes for {checks} checks")
    lines, value = _chain(problem, n, slip)
    for check_slip in check_slips or (None,) * checks:
        check, value = _chain(problem, problem.n_steps, check_slip)
        lines += [CHECK_LINE, problem.prompt.strip(), *check]
    lines.append(f"\\boxed{{{problem.write(value)}}}")
    return "\n".join(lines)


def _chain(problem: Problem, n: int, slip: tuple[int, int] | None) -> tuple[list[str], int]:
    """The step lines (``e=7+4=1``) up to letter ``n``, with ``slip`` carried on, and the last value."""
    if slip is not None and not 1 <= slip[0] <= n:
        raise ValueError(f"slip step {slip[0]} is outside the {n} written steps")
    if slip is not None and slip[1] % problem.modulus == 0:
        raise ValueError(f"slip offset {slip[1]} does not change a value mod {problem.modulus}")
    w = problem.write
    lines, value = [], problem.start_value
    for k in range(1, n + 1):
        new = apply_op(value, problem.op, problem.operand, problem.modulus)
        if slip is not None and k == slip[0]:
            new = (new + slip[1]) % problem.modulus
        lines.append(f"{problem.letter(k)}={w(value)}{problem.op}{w(problem.operand)}={w(new)}")
        value = new
    return lines, value


def behaviour_of(completion: str, problem: Problem) -> str:
    """Classify a completion into ``BEHAVIOURS``, or ``"other"``.

    ``check`` wins; ``miscount``: the first pass stops at another letter than the target;
    ``slip``: it stops at the target with a wrong value.
    """
    if not isinstance(completion, str):
        return "other"
    first = completion.split(f"\n{CHECK_LINE}", 1)
    if len(first) == 2 and "\\boxed{" in first[1]:
        return "check"
    lines = first[0].split("\n")
    steps = [ln for ln in lines if _STEP.fullmatch(ln)]
    if not steps or not lines[-1].startswith("\\boxed{"):
        return "other"
    if steps[-1][0] != problem.letter(problem.n_steps):
        return "miscount"
    return "plain" if steps[-1].rsplit("=", 1)[1] == problem.answer else "slip"


def sample_n_steps(rng: random.Random, params: TaskParams, split: str) -> int:
    """``round(exp(N(log(median_steps), sigma_steps)))`` clipped to ``[min_steps, max_steps]``
    (train/eval), or uniform in ``[heldout_min_steps, heldout_max_steps]`` (heldout)."""
    if split == "heldout":
        return rng.randint(params.heldout_min_steps, params.heldout_max_steps)
    n = round(math.exp(rng.gauss(math.log(params.median_steps), params.sigma_steps)))
    return min(max(n, params.min_steps), params.max_steps)


def sample_problem(rng: random.Random, n_steps: int, params: TaskParams) -> Problem:
    n_letters = len(string.ascii_lowercase)
    if not 1 <= n_steps <= n_letters - 2:
        raise ValueError(f"n_steps must be in [1, {n_letters - 2}], got {n_steps}")
    # Leave one letter after the target for a chain that stops late.
    start = rng.randrange(0, n_letters - n_steps - 1)
    op = rng.choice(params.operators)
    # Operand 0 (and *1) would make every step trivial.
    lo = 2 if op == "*" else 1
    modulus = params.modulus
    operand = rng.randint(lo, modulus - 1) if modulus - 1 >= lo else 1
    return Problem(string.ascii_lowercase[start], rng.randrange(modulus), op, operand, n_steps, modulus, params.values)


def generate_splits(params: TaskParams, seed: int) -> dict[str, list[dict]]:
    """All splits, deterministically from ``seed``; prompts are unique across splits."""
    params.validate()
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    rng = random.Random(seed)
    seen: set[str] = set()
    out: dict[str, list[dict]] = {}
    sizes = {"train": params.n_train, "eval": params.n_eval, "heldout": params.n_heldout}
    for split in SPLITS:
        rows: list[dict] = []
        attempts = 0
        while len(rows) < sizes[split]:
            attempts += 1
            if attempts > 50 * sizes[split] + 1000:
                raise ValueError(
                    f"could not draw {sizes[split]} distinct {split!r} problems; "
                    "increase max_steps or reduce n_train/n_eval"
                )
            p = sample_problem(rng, sample_n_steps(rng, params, split), params)
            if p.prompt in seen:
                continue
            seen.add(p.prompt)
            rows.append(p.record())
        out[split] = rows
    return out


def write_splits(out_dir: Path, params: TaskParams, seed: int) -> dict[str, int]:
    """Generate and write ``train/eval/heldout.jsonl`` plus ``task.json`` (params + seed)."""
    out_dir = Path(out_dir)
    splits = generate_splits(params, seed)
    for split, rows in splits.items():
        sagc.io.atomic_write_text(
            out_dir / f"{split}.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        )
    meta = {"seed": seed, "params": params.to_dict(), "sizes": {k: len(v) for k, v in splits.items()}}
    sagc.io.atomic_write_json(out_dir / "task.json", meta)
    return meta["sizes"]


def load_split(data_dir: Path, split: str) -> list[dict]:
    """The rows of a split file; ``ValueError`` naming the file on a malformed row."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    path = Path(data_dir) / f"{split}.jsonl"
    if not path.is_file():
        raise ValueError(f"data file not found: {path}")
    rows = []
    for i, row in sagc.io.read_jsonl(path):
        if not isinstance(row, dict):
            raise ValueError(f"{path}:{i}: expected a JSON object")
        missing = [c for c in REQUIRED_COLUMNS if c not in row]
        if missing:
            raise ValueError(f"{path}:{i}: missing column(s) {missing}")
        rows.append(row)
    return rows


def iter_texts(data_dir: Path) -> Iterator[str]:
    """All text of the splits (tokenizer training corpus), the check behaviour included."""
    for split in SPLITS:
        for row in load_split(data_dir, split):
            yield row["prompt"] + row["solution"]
            if split == "train":
                yield render_completion(Problem.from_prompt(row["prompt"]), checks=1)
