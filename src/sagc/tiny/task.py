"""A synthetic step-by-step reasoning task whose solution *behaviours* differ in length and accuracy.

Each problem iterates one modular-arithmetic rule over consecutive letters; the warm start
teaches a mixture of behaviours (plain, miscount, slip, check) rendered by
``render_completion``, so that RL has choices of different lengths to select between and
some rollouts straggle, as in reasoning RL.

The task's format, the behaviours and why the task has this shape: src/sagc/tiny/README.md,
"The task's design".
"""

from __future__ import annotations

import json
import math
import random
import re
import string
from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import sagc.io

#: Split files, in the order they are generated.
SPLITS = ("train", "eval", "heldout")

OPERATORS = ("+", "-", "*")

#: Solution behaviours the warm start mixes (see the module docstring).
BEHAVIOURS = ("plain", "miscount", "slip", "check")

#: The line that opens the careful re-derivation of a ``check`` completion; the next line
#: restates the prompt (``start d:7 next=prev+4 find h``), so the re-derivation starts from a
#: fresh copy of the start value and the target, as the first pass does.
CHECK_LINE = "check"

#: How a value is written. Letters let the tokenizer merge a value with the sign before it
#: (``=d``, ``+f``): a step line is 5 tokens instead of 8 and every row ~1/3 shorter, with
#: the same problems, behaviours and length ratios (docs/history/2026-12-04-letter-world.md).
VALUE_SYMBOLS = {"digits": "0123456789", "letters": "abcdefghij"}

_VALUE = r"(\d|[a-j])"
_PROMPT = re.compile(rf"^start ([a-z]):{_VALUE} next=prev([+\-*]){_VALUE} find ([a-z])\n$")
_STEP = re.compile(rf"[a-z]={_VALUE}[+\-*]{_VALUE}={_VALUE}")


@dataclass(frozen=True)
class TaskParams:
    """Parameters of the task family (all have defaults; see ``validate`` for the ranges).

    ``median_steps`` / ``sigma_steps``: the number of steps is
    ``round(exp(N(log(median_steps), sigma_steps)))`` clipped to ``[min_steps, max_steps]``
    for train/eval and drawn uniformly from ``[heldout_min_steps, heldout_max_steps]`` for the
    held-out split (longer than anything seen in training).
    """

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

        if (
            not isinstance(self.operators, str)
            or not self.operators
            or any(c not in OPERATORS for c in self.operators)
            or len(set(self.operators)) != len(self.operators)
        ):
            fail("operators", f"must be a non-empty string of distinct characters from {''.join(OPERATORS)!r}")
        if self.values not in VALUE_SYMBOLS:
            fail("values", f"must be one of {sorted(VALUE_SYMBOLS)}")
        for f in fields(self):
            if f.name in ("operators", "values"):
                continue
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                fail(f.name, "must be a finite number")
        for f in fields(self):
            if f.type == "int" and int(getattr(self, f.name)) != getattr(self, f.name):
                fail(f.name, "must be an integer")
        if not 2 <= self.modulus <= 10:
            fail("modulus", "must be in [2, 10] so that every value is one digit")
        if self.min_steps < 1:
            fail("min_steps", "must be >= 1")
        if self.max_steps < self.min_steps:
            fail("max_steps", "must be >= min_steps")
        if self.median_steps <= 0:
            fail("median_steps", "must be > 0")
        if self.sigma_steps < 0:
            fail("sigma_steps", "must be >= 0")
        if self.heldout_min_steps <= self.max_steps:
            fail("heldout_min_steps", "must be > max_steps (held-out problems are longer)")
        if self.heldout_max_steps < self.heldout_min_steps:
            fail("heldout_max_steps", "must be >= heldout_min_steps")
        # One letter per variable: the start value, one per step, and one spare letter for a
        # chain that stops late (the ``miscount`` behaviour).
        if self.heldout_max_steps + 2 > len(string.ascii_lowercase):
            fail("heldout_max_steps", f"must be <= {len(string.ascii_lowercase) - 2} (one letter per step)")
        if self.n_train < 1:
            fail("n_train", "must be >= 1")
        for name in ("n_eval", "n_heldout"):
            if getattr(self, name) < 0:
                fail(name, "must be >= 0")
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
        """Parse a prompt written by ``prompt`` back into the problem (ValueError if not one)."""
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

    def chain_values(self, n: int | None = None) -> list[int]:
        """The value of every variable up to step ``n`` (default: the target), start included."""
        vals = [self.start_value]
        for _ in range(self.n_steps if n is None else n):
            vals.append(apply_op(vals[-1], self.op, self.operand, self.modulus))
        return vals

    @property
    def answer(self) -> str:
        return self.write(self.chain_values()[-1])

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
        """The JSONL row (contract: prompt, answer, solution, n_steps)."""
        return {"prompt": self.prompt, "answer": self.answer, "solution": self.solution, "n_steps": self.n_steps}


def apply_op(value: int, op: str, operand: int, modulus: int) -> int:
    if op == "+":
        return (value + operand) % modulus
    if op == "-":
        return (value - operand) % modulus
    if op == "*":
        return (value * operand) % modulus
    raise ValueError(f"unknown operator {op!r}; expected one of {OPERATORS}")


def step_line(problem: Problem, k: int, prev: int, value: int) -> str:
    """The line of step ``k`` (1-based): ``e=7+4=1`` (letter, previous value, rule, value)."""
    w = problem.write
    return f"{problem.letter(k)}={w(prev)}{problem.op}{w(problem.operand)}={w(value)}"


def render_completion(
    problem: Problem,
    stop_shift: int = 0,
    slip: tuple[int, int] | None = None,
    checks: int = 0,
    check_slips: tuple[tuple[int, int] | None, ...] = (),
) -> str:
    """A completion of ``problem`` in one of the warm start's behaviours.

    ``stop_shift``: stop that many letters after (> 0) or before (< 0) the target
    (``miscount``). ``slip``: ``(step, offset)``: the value written at ``step`` (1-based) is
    off by ``offset`` and later steps carry the error on. ``checks``: append that many
    re-derivations from the start to the target letter, each opened by a ``CHECK_LINE`` line
    and the prompt line, and box the last one's result (so a check repairs a slip or a
    miscount of the pass before). ``check_slips``: per check, ``None`` or a slip of that
    pass. Defaults give the reference solution.
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
    """The step lines from the start value to letter ``n``, with ``slip`` carried on, and the
    last value."""
    if slip is not None and not 1 <= slip[0] <= n:
        raise ValueError(f"slip step {slip[0]} is outside the {n} written steps")
    if slip is not None and slip[1] % problem.modulus == 0:
        raise ValueError(f"slip offset {slip[1]} does not change a value mod {problem.modulus}")
    lines, value = [], problem.start_value
    for k in range(1, n + 1):
        new = apply_op(value, problem.op, problem.operand, problem.modulus)
        if slip is not None and k == slip[0]:
            new = (new + slip[1]) % problem.modulus
        lines.append(step_line(problem, k, value, new))
        value = new
    return lines, value


def behaviour_of(completion: str, problem: Problem) -> str:
    """Classify a completion (e.g. a sampled one) into ``BEHAVIOURS``, or ``"other"``.

    ``check`` wins over the others; ``miscount`` means the first pass stops at another
    letter than the target; ``slip`` means it stops at the target with a wrong value.
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
    """Number of steps: clipped log-normal (train/eval) or uniform longer range (heldout)."""
    if split == "heldout":
        return rng.randint(params.heldout_min_steps, params.heldout_max_steps)
    n = round(math.exp(rng.gauss(math.log(params.median_steps), params.sigma_steps)))
    return min(max(n, params.min_steps), params.max_steps)


def sample_problem(
    rng: random.Random, n_steps: int, modulus: int, operators: str = "".join(OPERATORS), values: str = "digits"
) -> Problem:
    n_letters = len(string.ascii_lowercase)
    if not 1 <= n_steps <= n_letters - 2:
        raise ValueError(f"n_steps must be in [1, {n_letters - 2}], got {n_steps}")
    # Leave one letter after the target for a chain that stops late.
    start = rng.randrange(0, n_letters - n_steps - 1)
    op = rng.choice(operators)
    # Operand 0 (and *1) would make every step trivial; keep the rule informative.
    lo = 2 if op == "*" else 1
    operand = rng.randint(lo, modulus - 1) if modulus - 1 >= lo else 1
    return Problem(
        start_letter=string.ascii_lowercase[start],
        start_value=rng.randrange(modulus),
        op=op,
        operand=operand,
        n_steps=n_steps,
        modulus=modulus,
        values=values,
    )


def generate_splits(params: TaskParams, seed: int) -> dict[str, list[dict]]:
    """Generate all splits deterministically from ``seed``.

    Prompts are unique across train and eval (eval is held out from train), and heldout
    prompts cannot collide with either because they have more steps.
    """
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
            p = sample_problem(rng, sample_n_steps(rng, params, split), params.modulus, params.operators, params.values)
            if p.prompt in seen:
                continue
            seen.add(p.prompt)
            rows.append(p.record())
        out[split] = rows
    return out


REQUIRED_COLUMNS = ("prompt", "answer", "solution", "n_steps")


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
