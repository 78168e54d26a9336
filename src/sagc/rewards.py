"""The paper's reward functions for a task with a boxed final answer, in TRL's signature
``fn(prompts, completions, **kw)``: indicators that never raise on model output
(src/sagc/tiny/README.md, "Rewards").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from sagc.answers import extract_boxed, is_correct

FORMAT_REWARD = 1.0
CORRECT_REWARD = 1.0

_BOXED_AT_END = re.compile(r"\\boxed\{[^{}]*(\{[^{}]*\}[^{}]*)*\}\s*$")


def completion_text(completion: Any) -> str | None:
    """The text of a completion: a string, or the concatenated ``content`` of a message list."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        content = completion.get("content")
        return content if isinstance(content, str) else None
    if isinstance(completion, (list, tuple)):
        parts = [completion_text(m) for m in completion]
        parts = [p for p in parts if p is not None]
        return "".join(parts) if parts else None
    return None


def _column(kwargs: dict, name: str, n: int) -> list:
    values = kwargs.get(name)
    if values is None:
        raise ValueError(f"reward function needs the dataset column {name!r} in kwargs")
    values = list(values)
    if len(values) != n:
        raise ValueError(f"column {name!r} has {len(values)} values for {n} completions")
    return values


def correctness_reward(prompts: Sequence | None, completions: Sequence, **kwargs) -> list[float]:
    """1.0 if the completion's boxed answer equals the ``answer`` column, else 0.0."""
    answers = _column(kwargs, "answer", len(completions))
    return [CORRECT_REWARD if is_correct(completion_text(c), a) else 0.0 for c, a in zip(completions, answers)]


def is_well_formed(text: str | None) -> bool:
    """Exactly one non-empty ``\\boxed{}``, which closes the completion."""
    if not isinstance(text, str) or text.count("\\boxed{") != 1:
        return False
    return bool(_BOXED_AT_END.search(text)) and bool(extract_boxed(text))


def format_reward(prompts: Sequence | None, completions: Sequence, **kwargs) -> list[float]:
    """``FORMAT_REWARD`` for a well-formed completion (see ``is_well_formed``), else 0.0."""
    return [FORMAT_REWARD if is_well_formed(completion_text(c)) else 0.0 for c in completions]


#: The default reward functions, in the order the trainer should pass them.
REWARD_FUNCS = (correctness_reward, format_reward)
