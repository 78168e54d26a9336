"""Exact output length and truncation of every generation, counted on the generated tokens and filed
under the string lm-eval logs for it (why: docs/evaluation.md, "The summary's fields")."""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class GenerationRecord:
    n_tokens: int
    truncated: bool


def measure_generation(
    tokens: Sequence[int],
    *,
    budget: int,
    eos_ids: Iterable[int],
    pad_id: int | None,
    stop_strings: Iterable[str],
    decode: Callable[[Sequence[int]], str],
) -> GenerationRecord:
    """Length and truncation of one generated row (prompt removed). ``decode`` must keep special
    tokens, to find stop strings spelled as one (``<|im_end|>``); trailing pads are not output."""
    tokens = list(tokens)
    eos = set(int(i) for i in eos_ids)
    first_eos = next((i for i, tok in enumerate(tokens) if tok in eos), None)
    stopped = first_eos is not None
    end = first_eos + 1 if stopped else len(tokens)
    if not stopped and pad_id is not None:
        # A row the stopping criteria finished early is padded to the batch's length.
        j = end
        while j > 0 and tokens[j - 1] == pad_id:
            j -= 1
        if j < end:
            end, stopped = j, True
    stops = [s for s in stop_strings if s]
    if stops and any(s in decode(tokens[:end]) for s in stops):
        # Smallest prefix whose text contains a stop string (prefix text only grows).
        lo, hi = 1, end
        while lo < hi:
            mid = (lo + hi) // 2
            if any(s in decode(tokens[:mid]) for s in stops):
                hi = mid
            else:
                lo = mid + 1
        end, stopped = lo, True
    truncated = not stopped and len(tokens) >= budget
    return GenerationRecord(n_tokens=end, truncated=truncated)


class GenerationRecorder:
    """Records keyed by the generation's final text; equal texts are matched first-in first-out."""

    def __init__(self) -> None:
        self._by_text: dict[str, deque[GenerationRecord]] = defaultdict(deque)

    def add(self, text: str, record: GenerationRecord) -> None:
        self._by_text[text].append(record)

    def take(self, text: str) -> GenerationRecord | None:
        queue = self._by_text.get(text)
        return queue.popleft() if queue else None
