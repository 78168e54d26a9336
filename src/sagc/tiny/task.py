"""A synthetic step-by-step reasoning task with verifiable answers and long-tailed lengths.

Each problem iterates one modular-arithmetic rule over consecutive letters::

    Compute mod 10, one step per line.
    d=7
    Rule: next=prev+4
    Find h. Put the final answer in \\boxed{}.
    Solution:

and its reference solution evaluates one step per line::

    e=7+4=1
    f=1+4=5
    g=5+4=9
    h=9+4=3
    \\boxed{3}

Why this shape:

* Completion length is set by the problem (8 tokens per step), and the number of steps is
  drawn from a clipped log-normal, so lengths are right-skewed with a heavy tail, the
  property SAGC reacts to.
* Every line is a one-digit computation on the previous line's result plus knowing when
  to stop (the target letter). A ~1M-parameter model learns the format within seconds and
  the arithmetic only partly in a minute of CPU training; an error anywhere spoils the
  answer, so accuracy falls with the number of steps and RL has a real signal. (A first
  version with a different operation per step, looked up in the prompt, stayed at chance
  after minutes of CPU training: the lookup is too slow to learn at this size.)
* The first letter is random, so every letter is seen in every position in training; the
  held-out split only has more steps (longer chains) than training, not unseen symbols.

The prompt is a plain string (TRL "standard" format) that ends where the completion
begins; ``sagc.answers`` judges the final ``\\boxed{}`` answer.
"""

from __future__ import annotations

import json
import math
import random
import string
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Iterable, Iterator

#: Split files, in the order they are generated.
SPLITS = ("train", "eval", "heldout")

OPERATORS = ("+", "-", "*")

PROMPT_HEADER = "Compute mod {modulus}, one step per line."
PROMPT_FOOTER = "Find {target}. Put the final answer in \\boxed{{}}.\nSolution:\n"

#: Text that opens a re-verification pass in the warm-start data (see ``ramble_solution``).
CHECK_LINE = "Check again:"


@dataclass(frozen=True)
class TaskParams:
    """Parameters of the task family (all have defaults; see ``validate`` for the ranges).

    ``median_steps`` / ``sigma_steps``: the number of steps is
    ``round(exp(N(log(median_steps), sigma_steps)))`` clipped to ``[min_steps, max_steps]``
    for train/eval and drawn uniformly from ``[heldout_min_steps, heldout_max_steps]`` for the
    held-out split (longer than anything seen in training).
    """

    modulus: int = 10
    median_steps: float = 4.0
    sigma_steps: float = 0.4
    min_steps: int = 2
    max_steps: int = 12
    heldout_min_steps: int = 13
    heldout_max_steps: int = 20
    n_train: int = 4000
    n_eval: int = 200
    n_heldout: int = 200
    operators: str = "+-*"

    def validate(self) -> "TaskParams":
        """Raise ``ValueError`` naming the parameter when a value is out of range."""
        def fail(name: str, why: str) -> None:
            raise ValueError(f"task parameter {name!r}: {why} (got {getattr(self, name)!r})")

        if not isinstance(self.operators, str) or not self.operators or any(
            c not in OPERATORS for c in self.operators
        ) or len(set(self.operators)) != len(self.operators):
            fail("operators", f"must be a non-empty string of distinct characters from {''.join(OPERATORS)!r}")
        for f in fields(self):
            if f.name == "operators":
                continue
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                fail(f.name, "must be a finite number")
        for name in ("modulus", "min_steps", "max_steps", "heldout_min_steps",
                     "heldout_max_steps", "n_train", "n_eval", "n_heldout"):
            if int(getattr(self, name)) != getattr(self, name):
                fail(name, "must be an integer")
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
        # One letter per variable: the start value plus one per step.
        if self.heldout_max_steps + 1 > len(string.ascii_lowercase):
            fail("heldout_max_steps", f"must be <= {len(string.ascii_lowercase) - 1} (one letter per step)")
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
    modulus: int

    @property
    def letters(self) -> str:
        i = string.ascii_lowercase.index(self.start_letter)
        return string.ascii_lowercase[i : i + self.n_steps + 1]

    def values(self) -> list[int]:
        """The value of every variable, start included."""
        vals = [self.start_value]
        for _ in range(self.n_steps):
            vals.append(apply_op(vals[-1], self.op, self.operand, self.modulus))
        return vals

    @property
    def answer(self) -> str:
        return str(self.values()[-1])

    @property
    def prompt(self) -> str:
        ls = self.letters
        lines = [PROMPT_HEADER.format(modulus=self.modulus), f"{ls[0]}={self.start_value}"]
        lines.append(f"Rule: next=prev{self.op}{self.operand}")
        return "\n".join(lines) + "\n" + PROMPT_FOOTER.format(target=ls[-1])

    def step_lines(self) -> list[str]:
        """One evaluated line per step, e.g. ``e=7+4=1``."""
        ls, vals = self.letters, self.values()
        return [f"{ls[k + 1]}={vals[k]}{self.op}{self.operand}={vals[k + 1]}" for k in range(self.n_steps)]

    @property
    def solution(self) -> str:
        return "\n".join(self.step_lines()) + "\n\\boxed{" + self.answer + "}"

    def record(self) -> dict:
        """The JSONL row (contract: prompt, answer, solution, n_steps)."""
        return {
            "prompt": self.prompt,
            "answer": self.answer,
            "solution": self.solution,
            "n_steps": self.n_steps,
        }


def apply_op(value: int, op: str, operand: int, modulus: int) -> int:
    if op == "+":
        return (value + operand) % modulus
    if op == "-":
        return (value - operand) % modulus
    if op == "*":
        return (value * operand) % modulus
    raise ValueError(f"unknown operator {op!r}; expected one of {OPERATORS}")


def sample_n_steps(rng: random.Random, params: TaskParams, split: str) -> int:
    """Number of steps: clipped log-normal (train/eval) or uniform longer range (heldout)."""
    if split == "heldout":
        return rng.randint(params.heldout_min_steps, params.heldout_max_steps)
    n = round(math.exp(rng.gauss(math.log(params.median_steps), params.sigma_steps)))
    return min(max(n, params.min_steps), params.max_steps)


def sample_problem(rng: random.Random, n_steps: int, modulus: int, operators: str = "".join(OPERATORS)) -> Problem:
    n_letters = len(string.ascii_lowercase)
    if not 1 <= n_steps <= n_letters - 1:
        raise ValueError(f"n_steps must be in [1, {n_letters - 1}], got {n_steps}")
    start = rng.randrange(0, n_letters - n_steps)
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
            p = sample_problem(rng, sample_n_steps(rng, params, split), params.modulus, params.operators)
            if p.prompt in seen:
                continue
            seen.add(p.prompt)
            rows.append(p.record())
        out[split] = rows
    return out


def write_jsonl(rows: Iterable[dict], path: Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


REQUIRED_COLUMNS = ("prompt", "answer", "solution", "n_steps")


def read_jsonl(path: Path) -> list[dict]:
    """Read a split file; raise ``ValueError`` naming the file on a malformed row."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"data file not found: {path}")
    rows = []
    with path.open(encoding="utf-8") as fh:
        for i, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{i}: not valid JSON ({e})") from None
            missing = [c for c in REQUIRED_COLUMNS if c not in row]
            if missing:
                raise ValueError(f"{path}:{i}: missing column(s) {missing}")
            rows.append(row)
    return rows


def write_splits(out_dir: Path, params: TaskParams, seed: int) -> dict[str, int]:
    """Generate and write ``train/eval/heldout.jsonl`` plus ``task.json`` (params + seed)."""
    out_dir = Path(out_dir)
    splits = generate_splits(params, seed)
    for split, rows in splits.items():
        write_jsonl(rows, out_dir / f"{split}.jsonl")
    meta = {"seed": seed, "params": params.to_dict(), "sizes": {k: len(v) for k, v in splits.items()}}
    (out_dir / "task.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta["sizes"]


def load_split(data_dir: Path, split: str) -> list[dict]:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    return read_jsonl(Path(data_dir) / f"{split}.jsonl")


def ramble_solution(row: dict, rng: random.Random, continue_prob: float) -> str:
    """The solution with re-verification passes inserted before the final box.

    Used only by the warm start (the ``solution`` column stays clean): it teaches the model
    a habit that real reasoning models have, re-checking the work again and again, at a
    small rate. At sampling time this makes a few completions run to the length cap, the
    per-rollout straggler mechanism SAGC is about. Each pass repeats every step line;
    another pass follows with probability ``continue_prob``.
    """
    lines = row["solution"].split("\n")
    steps, box = lines[:-1], lines[-1]
    passes = [steps]
    while True:
        passes.append([CHECK_LINE] + steps)
        if rng.random() >= continue_prob:
            break
    return "\n".join(line for p in passes for line in p) + "\n" + box


def iter_texts(data_dir: Path) -> Iterator[str]:
    """All text of the splits (tokenizer training corpus), rambling marker included."""
    for split in SPLITS:
        for row in load_split(data_dir, split):
            yield row["prompt"] + row["solution"]
    yield CHECK_LINE
