"""Final-answer extraction and comparison, shared by the training rewards and every
evaluation task; nothing here raises on model output. The rules: docs/evaluation.md,
"Extracting and comparing answers".
"""

from __future__ import annotations

import re
import threading
from fractions import Fraction

#: A box command: ``\boxed`` or ``\fbox``, not the prefix of a longer command name.
_BOX_COMMAND = re.compile(r"\\(boxed|fbox)(?![A-Za-z])")


def _braced(text: str, open_at: int) -> str | None:
    """The content of the brace group opening at ``text[open_at]``, or None if unclosed."""
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[open_at + 1 : i]
    return None


def extract_boxed(text: object) -> str | None:
    """The content of the last complete box in ``text`` (an unclosed one is skipped), else None."""
    if not isinstance(text, str):
        return None
    for match in reversed(list(_BOX_COMMAND.finditer(text))):
        j = match.end()
        while j < len(text) and text[j] in " \t":
            j += 1
        if j < len(text) and text[j] == "{":
            content = _braced(text, j)
            if content is not None:
                return content.strip()
        elif match.group(1) == "boxed" and j > match.end():
            content = re.split(r"[$\n]", text[j:], maxsplit=1)[0].strip()
            if content:
                return content
    return None


_DECORATION = re.compile(r"\\(?:text|textbf|textrm|mathbf|mathrm)\s*\{([^{}]*)\}")


def undecorate(answer: str) -> str:
    """``answer`` without font and text wrappers (``\\textbf{(C) }42`` -> ``(C) 42``)."""
    previous = None
    while previous != answer:
        previous, answer = answer, _DECORATION.sub(r"\1", answer)
    return answer


#: An option label in front of its text: ``(C) ...``, ``C) ...``, ``C: ...``, ``C. ...``.
_LABELLED = re.compile(r"^\s*(?:\(([A-Z])\)|([A-Z])\)|([A-Z])\s*:|([A-Z])\.(?=\s))\s*(.*)$", re.S)
_BARE_LETTER = re.compile(r"^\s*\(?([A-Za-z])\)?\s*\.?\s*$")


def choice_letter(answer: object) -> str | None:
    """The option letter an answer names: bare (``C``, ``(c)``) or labelled (``(C) 4.2 eV``)."""
    if not isinstance(answer, str):
        return None
    s = undecorate(answer).replace("$", "")
    bare = _BARE_LETTER.match(s)
    if bare:
        return bare.group(1).upper()
    labelled = _LABELLED.match(s)
    if labelled:
        return next(g for g in labelled.groups()[:4] if g)
    return None


def drop_option_label(answer: str) -> str:
    """``(C) 42`` -> ``42``: an option label in front of a value (AMC); unchanged otherwise."""
    s = undecorate(answer)
    m = re.match(r"^\s*\(?[A-E]\)\s*(\S.*)$", s, re.S)
    return m.group(1).strip() if m else s


_FRAC = re.compile(r"^\\d?frac\{(-?[\d.]+)\}\{(-?[\d.]+)\}$")


def normalize_answer(answer: object) -> str | None:
    """Canonical string form of an answer: whitespace, ``$``, thousands commas, a trailing
    period and text/font wrappers removed; numbers in canonical form (``007`` -> ``7``,
    ``0.50`` -> ``1/2``, ``\\frac{1}{2}`` -> ``1/2``); choice letters upper-cased."""
    if answer is None:
        return None
    s = undecorate(str(answer).strip())
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


def answer_matches(answer: object, reference: object) -> bool:
    """True when an extracted ``answer`` equals ``reference``."""
    want = normalize_answer(reference)
    if not isinstance(answer, str) or want is None:
        return False
    if _CHOICE.fullmatch(want):
        return choice_letter(answer) == want
    answer = drop_option_label(answer)
    got = normalize_answer(answer)
    if got is None:
        return False
    if got == want:
        return True
    if _NUMBER.fullmatch(got) and _NUMBER.fullmatch(want):
        return False
    return equivalent_math(answer, str(reference))


def is_correct(completion: object, reference: object) -> bool:
    """Strict: the completion's last box equals ``reference`` (the training reward's test)."""
    return answer_matches(extract_boxed(completion), reference)


_ANSWER_PHRASE = re.compile(r"(?:answer is|answer:)\s*:?\s*(.+)", re.I)
_LAST_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:/\d+)?|-?\.\d+")
_OPTION_LABEL = re.compile(r"\(([A-Z])\)")


def lenient_answer(completion: object, reference: object) -> str | None:
    """The answer the lenient score reads: the box; else the last answer phrase; else the
    last number, or the last ``(X)`` label for a letter reference."""
    boxed = extract_boxed(completion)
    if boxed is not None or not isinstance(completion, str):
        return boxed
    phrases = _ANSWER_PHRASE.findall(completion)
    if phrases:
        # "The answer is $42$." / "Answer: (C)": up to the line's end, without the period.
        return phrases[-1].splitlines()[0].strip().rstrip(".").strip()
    if _CHOICE.fullmatch(normalize_answer(reference) or ""):
        labels = _OPTION_LABEL.findall(completion)
        return labels[-1] if labels else None
    numbers = _LAST_NUMBER.findall(completion)
    return numbers[-1].rstrip(",") if numbers else None


def is_correct_lenient(completion: object, reference: object) -> bool:
    """Lenient: ``lenient_answer`` equals ``reference``; true wherever ``is_correct`` is."""
    return answer_matches(lenient_answer(completion, reference), reference)


def equivalent_math(answer: str, reference: str) -> bool:
    """``math-verify``'s verdict on two LaTeX answers (False when either does not parse);
    its time limits use ``signal.alarm``, so only the main thread gets them."""
    from math_verify import parse, verify

    limit = 5 if threading.current_thread() is threading.main_thread() else None
    try:
        gold = parse(f"${reference}$", parsing_timeout=limit)
        pred = parse(f"${answer}$", parsing_timeout=limit)
        return bool(gold) and bool(pred) and verify(gold, pred, timeout_seconds=limit)
    except Exception:
        return False
