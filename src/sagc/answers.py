"""Final-answer extraction and comparison: the one place that decides what a model answered.

The training rewards (``sagc.rewards``), the local lm-eval tasks and the paper's
lm-eval tasks (AIME / AMC / GPQA) all call these functions, so a completion is judged the
same way during RL and during downstream evaluation.

Convention (R1-style): the final answer is the content of the *last* ``\\boxed{...}`` in
the completion. Braces nest (``\\boxed{\\frac{1}{2}}``). Anything malformed (no box, an
unclosed brace, a non-string) yields ``None``; nothing here raises on model output.

Comparison (``is_correct``), cheapest test first:

1. the normalised strings are equal (``normalize_answer``);
2. both sides are plain numbers, or the reference is a multiple-choice letter: then that
   comparison is final (a single-digit tiny-world answer or a GPQA letter never reaches the
   symbolic check, so their cost and their verdicts stay those of step 1);
3. otherwise the two answers are compared as mathematics by ``math-verify`` (the verifier
   TRL's and open-r1's math rewards use): ``\\dfrac{\\sqrt3}{2}`` equals
   ``\\frac{\\sqrt{3}}{2}``, ``[1,2)`` equals ``[1, 2)``, ``3\\pi/4`` equals
   ``\\frac{3\\pi}{4}``. Competition answers (DeepScaleR's AIME/AMC/Omni-MATH) come in many
   such forms, and string matching would score right answers 0.
"""

from __future__ import annotations

import re
import threading
from fractions import Fraction

_BOX = "\\boxed{"


def extract_boxed(text: object) -> str | None:
    """Return the content of the last complete ``\\boxed{...}`` in ``text``, else None."""
    if not isinstance(text, str):
        return None
    start = text.rfind(_BOX)
    while start != -1:
        i = start + len(_BOX)
        depth = 1
        while i < len(text):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    return text[start + len(_BOX) : i].strip()
            i += 1
        # Unclosed box (e.g. a completion truncated mid-answer): try an earlier one.
        start = text.rfind(_BOX, 0, start)
    return None


_FRAC = re.compile(r"^\\d?frac\{(-?[\d.]+)\}\{(-?[\d.]+)\}$")


def normalize_answer(answer: object) -> str | None:
    """Canonical string form of an answer: whitespace, ``$``, thousands commas, a trailing
    period and ``\\text{}`` wrappers removed; numbers in canonical form (``007`` -> ``7``,
    ``0.50`` -> ``1/2``, ``\\frac{1}{2}`` -> ``1/2``); choice letters upper-cased."""
    if answer is None:
        return None
    s = str(answer).strip()
    s = re.sub(r"\\text\{([^{}]*)\}", r"\1", s)
    s = s.replace("$", "").replace(" ", "").rstrip(".")
    s = s.replace("\\left", "").replace("\\right", "").replace("\\!", "")
    if not s:
        return None
    if re.fullmatch(r"\(?[A-Za-z]\)?", s):  # multiple choice: "(b)" -> "B"
        return s.strip("()").upper()
    num = _as_number(s)
    if num is not None:
        return str(num.numerator) if num.denominator == 1 else f"{num.numerator}/{num.denominator}"
    return s


def _as_number(s: str) -> Fraction | None:
    s = s.replace(",", "") if re.fullmatch(r"-?\d{1,3}(,\d{3})+(\.\d+)?", s) else s
    m = _FRAC.match(s)
    try:
        if m:
            return Fraction(m.group(1)) / Fraction(m.group(2))
        if re.fullmatch(r"-?\d+(\.\d+)?(/-?\d+(\.\d+)?)?", s):
            return Fraction(s)
    except (ValueError, ZeroDivisionError):
        return None
    return None


_CHOICE = re.compile(r"[A-Z]")
_NUMBER = re.compile(r"-?\d+(/\d+)?")


def is_correct(completion: object, reference: object) -> bool:
    """True when the completion's boxed answer equals ``reference`` (see the module docstring)."""
    boxed = extract_boxed(completion)
    got, want = normalize_answer(boxed), normalize_answer(reference)
    if got is None or want is None:
        return False
    if got == want:
        return True
    if _CHOICE.fullmatch(want) or (_NUMBER.fullmatch(got) and _NUMBER.fullmatch(want)):
        return False
    return equivalent_math(boxed, str(reference))


def equivalent_math(answer: str, reference: str) -> bool:
    """``math-verify``'s verdict on two LaTeX answers (False when either does not parse).

    Its time limits use ``signal.alarm``, which only the main thread may set: elsewhere the
    check runs without one (TRL's rewards and lm-eval's scoring run in the main thread)."""
    from math_verify import parse, verify

    limit = 5 if threading.current_thread() is threading.main_thread() else None
    try:
        gold = parse(f"${reference}$", parsing_timeout=limit)
        pred = parse(f"${answer}$", parsing_timeout=limit)
        return bool(gold) and bool(pred) and verify(gold, pred, timeout_seconds=limit)
    except Exception:  # noqa: BLE001 - model output must never crash a reward or a score
        return False
