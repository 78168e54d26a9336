"""Final-answer extraction and comparison: the one place that decides what a model answered.

The training rewards (``sagc.tiny.rewards``), the local lm-eval tasks and the paper's
lm-eval tasks (AIME / AMC / GPQA) all call these functions, so a completion is judged the
same way during RL and during downstream evaluation.

Convention (R1-style): the final answer is the content of the *last* ``\\boxed{...}`` in
the completion. Braces nest (``\\boxed{\\frac{1}{2}}``). Anything malformed (no box, an
unclosed brace, a non-string) yields ``None``; nothing here raises on model output.
"""

from __future__ import annotations

import re
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


def is_correct(completion: object, reference: object) -> bool:
    """True when the completion's boxed answer equals ``reference`` after normalisation."""
    got = normalize_answer(extract_boxed(completion))
    want = normalize_answer(reference)
    return got is not None and got == want
