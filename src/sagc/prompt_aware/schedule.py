"""Tail batching: a ``PromptStream`` that defers prompts predicted long into long rounds, so
the other rounds finish early (docs/prompt-aware.md, "Tail batching: the schedule").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from sagc.prompt_aware.predictor import PromptLengthPredictor
from sagc.prompts import PromptStream

STATE_VERSION = 1

#: Share of an epoch's prompts deferred to long rounds by default: RollPacker's tail
#: rounds hold the longest ~quarter; with 4 prompts a step it is one step in four.
DEFAULT_LONG_FRACTION = 0.25

#: Rounds' worth of deferred prompts that start a long round (the riskiest first): 2 sorts
#: the long prompts better than 1 at a delay of ~6 rounds (docs/prompt-aware.md).
DEFAULT_QUEUE_ROUNDS = 2


class TailBatchingStream(PromptStream):
    """A ``PromptStream`` whose ``observe(prompts, lengths)`` teaches its predictor."""

    def __init__(
        self,
        n: int,
        seed: int,
        shuffle: bool = True,
        predictor: PromptLengthPredictor | None = None,
        long_fraction: float = DEFAULT_LONG_FRACTION,
        queue_rounds: int = DEFAULT_QUEUE_ROUNDS,
    ) -> None:
        super().__init__(n, seed, shuffle)
        lf = long_fraction
        if isinstance(lf, bool) or not isinstance(lf, (int, float)) or not 0.0 < lf < 1.0:
            raise ValueError(f"sagc_prompt.long_fraction must lie in (0, 1), got {long_fraction!r}")
        self.predictor = predictor if predictor is not None else PromptLengthPredictor(n)
        if self.predictor.n != n:
            raise ValueError(f"the predictor knows {self.predictor.n} prompts, the stream {n}")
        self.long_fraction = float(long_fraction)
        if isinstance(queue_rounds, bool) or not isinstance(queue_rounds, int) or queue_rounds < 1:
            raise ValueError(f"sagc_prompt.queue_rounds must be an integer >= 1, got {queue_rounds!r}")
        self.queue_rounds = queue_rounds
        self.deferred: list[int] = []  # predicted long, passed over in base order, not yet trained
        self.round_prompts: int | None = None  # prompts of the last round (what a long round needs)
        self.round_open = False
        self.rounds: list[bool] = []  # per round (step): was it a long round?

    @property
    def round_long(self) -> bool:
        """Whether the last round drawn is a long one."""
        return bool(self.rounds) and self.rounds[-1]

    def next_round_long(self) -> bool:
        """Whether the next round is long: the queue holds ``queue_rounds`` rounds' worth of
        prompts, or the epoch's base order is exhausted and the queue must be flushed."""
        if self.round_open:
            return self.rounds[-1]
        if not self.deferred:
            return False
        if self.pos == self.n:
            return True
        return self.round_prompts is not None and len(self.deferred) >= self.queue_rounds * self.round_prompts

    def take(self, k: int) -> list[int]:
        """The next ``k`` prompt indices; the first take after ``observe`` opens a round."""
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise ValueError(f"TailBatchingStream.take needs a non-negative integer, got {k!r}")
        if k == 0:
            return []
        risk = self.predictor.risk()
        if not self.round_open:
            long_round = self.next_round_long()
            if long_round:  # the riskiest queued prompts first (stable: oldest on ties)
                self.deferred.sort(key=lambda i: -risk[i])
            self.rounds.append(long_round)
            self.round_prompts = k
            self.round_open = True
        long_round = self.rounds[-1]
        long = risk > np.quantile(risk, 1.0 - self.long_fraction)  # strictly: no information defers nothing
        out: list[int] = []
        while len(out) < k:
            if self.deferred and (long_round or self.pos == self.n):
                out.append(self.deferred.pop(0))
                continue
            if self.pos == self.n:
                self.epoch += 1
                self.pos = 0
                self._order = self._permutation(self.epoch)
            i = int(self._order[self.pos])
            self.pos += 1
            if long[i] and not long_round:
                self.deferred.append(i)
            else:
                out.append(i)
        return out

    def observe(self, prompts: Sequence[int], lengths: Iterable[Iterable[float]]) -> None:
        """Close the round: learn the lengths of its prompts (one group per prompt)."""
        self.predictor.observe(prompts, lengths)
        self.round_open = False

    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "kind": "tail_batching",
            "version": STATE_VERSION,
            "long_fraction": self.long_fraction,
            "queue_rounds": self.queue_rounds,
            "deferred": list(self.deferred),
            "round_prompts": self.round_prompts,
            "round_open": self.round_open,
            "rounds": list(self.rounds),
            "predictor": self.predictor.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict()``: checked whole (``ValueError`` naming the key) before use."""
        if not isinstance(state, dict) or state.get("kind") != "tail_batching":
            raise ValueError(
                "prompt stream state key 'kind': expected a 'tail_batching' state "
                "(was the run started with another prompt schedule?)"
            )
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"unsupported tail_batching state version {state.get('version')!r}")
        for key in ("long_fraction", "queue_rounds"):
            if state.get(key) != getattr(self, key):
                raise ValueError(
                    f"tail_batching state key {key!r}: saved {state.get(key)!r}, this run has {getattr(self, key)}"
                )
        base = PromptStream(self.n, self.seed, self.shuffle)
        base.load_state_dict(state)  # checks n, seed and shuffle; gives epoch, pos and the base order
        deferred = state.get("deferred")
        passed = set(int(i) for i in base._order[: base.pos])
        if (not isinstance(deferred, list) or len(set(deferred)) != len(deferred)
                or not all(isinstance(i, int) and i in passed for i in deferred)):  # fmt: skip
            raise ValueError(
                "tail_batching state key 'deferred' must list distinct prompts already passed in the epoch"
            )
        rounds = state.get("rounds")
        if not isinstance(rounds, list) or not all(isinstance(r, bool) for r in rounds):
            raise ValueError("tail_batching state key 'rounds' must be a list of booleans")
        rp = state.get("round_prompts")
        if rp is not None and (isinstance(rp, bool) or not isinstance(rp, int) or rp < 1):
            raise ValueError(f"tail_batching state key 'round_prompts' must be null or an integer >= 1, got {rp!r}")
        if not isinstance(state.get("round_open"), bool):
            raise ValueError("tail_batching state key 'round_open' must be true or false")
        self.predictor.load_state_dict(state.get("predictor"))  # checked whole before it assigns
        self.epoch, self.pos, self._order = base.epoch, base.pos, base._order
        self.deferred = list(deferred)
        self.round_prompts = rp
        self.round_open = state["round_open"]
        self.rounds = list(rounds)
