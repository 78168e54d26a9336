"""Tail batching: a ``PromptStream`` that defers prompts predicted long into long rounds.

A synchronous step waits for its longest rollout. Mixing a few long prompts into every step
makes every step wait for one; gathering them into a few dedicated *long rounds* lets the
other (*short*) rounds finish early. Every prompt is still trained exactly once per epoch
and on-policy (its rollouts come from the policy of the step that draws it); only the
order within an epoch changes.

Per epoch ``e`` the base order is ``PromptStream``'s permutation (``default_rng([seed,
e])``). At every draw the predictor (``PromptLengthPredictor``) scores all prompts; the
top ``long_fraction`` by ``risk`` (strictly above the (1 - long_fraction) quantile, so a
predictor with no information defers nothing) are *long*. A round is short while
short prompts remain in the epoch: it takes them in base order. Once none remains, rounds
are long: the remaining prompts go in increasing predicted risk, so similar lengths share
a step. Only the round in which the short prompts run out holds both kinds.

Rounds are delimited by ``observe``: the first ``take`` after it starts a round (its kind
is ``next_round_long()`` at that moment, which a prompt-aware sizer reads before choosing
G); later takes of the same step (dynamic-sampling refills) continue it.

The state (epoch, the prompts drawn in it, the round flags, the predictor) is saved with
every checkpoint; the predictions are a function of the observations, so a resumed run
draws exactly the prompts the uninterrupted one would have.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

import numpy as np

from sagc.prompt_aware.config import DEFAULT_LONG_FRACTION
from sagc.prompt_aware.predictor import PromptLengthPredictor
from sagc.train.prompts import PromptStream

STATE_VERSION = 1


class TailBatchingStream(PromptStream):
    """``take(k)`` / ``observe(prompts, lengths)`` / ``state_dict`` (module docstring)."""

    def __init__(
        self,
        n: int,
        seed: int,
        shuffle: bool = True,
        predictor: PromptLengthPredictor | None = None,
        long_fraction: float = DEFAULT_LONG_FRACTION,
    ) -> None:
        super().__init__(n, seed, shuffle)
        if isinstance(long_fraction, bool) or not isinstance(long_fraction, (int, float)) or not 0.0 < long_fraction < 1.0:
            raise ValueError(f"sagc_prompt.long_fraction must lie in (0, 1), got {long_fraction!r}")
        self.predictor = predictor if predictor is not None else PromptLengthPredictor(n)
        if self.predictor.n != n:
            raise ValueError(f"the predictor knows {self.predictor.n} prompts, the stream {n}")
        self.long_fraction = float(long_fraction)
        self._drawn = np.zeros(n, dtype=bool)  # drawn in the current epoch
        self.drawn: list[int] = []  # the same, in draw order (the state)
        self.round_open = False
        self.rounds: list[bool] = []  # per round (step): was it a long round?
        self.deferred: list[int] = []  # per round: predicted-long prompts it holds

    # -- which prompts are long ------------------------------------------------------------

    def long_mask(self) -> np.ndarray:
        """Prompts predicted long now: risk strictly above the (1 - long_fraction) quantile."""
        risk = self.predictor.risk()
        cut = np.quantile(risk, 1.0 - self.long_fraction)
        return risk > cut

    @property
    def round_long(self) -> bool:
        """Whether the last round drawn is a long one."""
        return bool(self.rounds) and self.rounds[-1]

    def next_round_long(self) -> bool:
        """Whether the next round will be long (no short prompt left in the epoch)."""
        if self.round_open:
            return self.rounds[-1]
        long = self.long_mask()
        if self._drawn.all():  # the next draw opens a new epoch
            return not (~long).any()
        return not (~long & ~self._drawn).any()

    # -- drawing -----------------------------------------------------------------------------

    def take(self, k: int) -> list[int]:
        """The next ``k`` prompt indices: short ones in base order, then long ones by risk."""
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise ValueError(f"TailBatchingStream.take needs a non-negative integer, got {k!r}")
        if k == 0:
            return []
        if not self.round_open:
            self.rounds.append(self.next_round_long())
            self.deferred.append(0)
            self.round_open = True
        long = self.long_mask()
        risk = self.predictor.risk()
        out: list[int] = []
        while len(out) < k:
            if self._drawn.all():
                self.epoch += 1
                self._order = self._permutation(self.epoch)
                self._drawn[:] = False
                self.drawn = []
            base = self._order[~self._drawn[self._order]]
            short = base[~long[base]]
            m = k - len(out)
            if short.size:
                pick = short[:m]
            else:  # long rounds: the least risky first, ties in base order
                pick = base[np.argsort(risk[base], kind="stable")][:m]
            self.deferred[-1] += int(long[pick].sum())
            self._drawn[pick] = True
            self.drawn.extend(int(i) for i in pick)
            out.extend(int(i) for i in pick)
        self.pos = int(self._drawn.sum())
        return out

    def observe(self, prompts: Sequence[int], lengths: Iterable[Iterable[float]]) -> None:
        """Close the round: learn the lengths of its prompts (one group per prompt)."""
        self.predictor.observe(prompts, lengths)
        self.round_open = False

    # -- exact resume ------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "kind": "tail_batching",
            "version": STATE_VERSION,
            "long_fraction": self.long_fraction,
            "drawn": list(self.drawn),
            "round_open": self.round_open,
            "rounds": list(self.rounds),
            "deferred": list(self.deferred),
            "predictor": self.predictor.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict()``: checked whole (``ValueError`` naming the key) before use."""
        if not isinstance(state, dict) or state.get("kind") != "tail_batching":
            raise ValueError("prompt stream state key 'kind': expected a 'tail_batching' state "
                             "(was the run started with another prompt schedule?)")
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"unsupported tail_batching state version {state.get('version')!r}")
        if state.get("long_fraction") != self.long_fraction:
            raise ValueError(f"tail_batching state key 'long_fraction': saved {state.get('long_fraction')!r}, "
                             f"this run has {self.long_fraction}")
        drawn = state.get("drawn")
        if (not isinstance(drawn, list) or len(set(drawn)) != len(drawn)
                or not all(isinstance(i, int) and 0 <= i < self.n for i in drawn)):  # fmt: skip
            raise ValueError(f"tail_batching state key 'drawn' must list distinct prompt indices in [0, {self.n})")
        rounds, deferred = state.get("rounds"), state.get("deferred")
        if not isinstance(rounds, list) or not all(isinstance(r, bool) for r in rounds):
            raise ValueError("tail_batching state key 'rounds' must be a list of booleans")
        if not isinstance(deferred, list) or len(deferred) != len(rounds):
            raise ValueError("tail_batching state key 'deferred' must hold one count per round")
        if not isinstance(state.get("round_open"), bool):
            raise ValueError("tail_batching state key 'round_open' must be true or false")
        super().load_state_dict(state)
        if self.pos != len(drawn):
            raise ValueError(f"tail_batching state key 'pos' ({self.pos}) disagrees with 'drawn' ({len(drawn)} prompts)")
        self.predictor.load_state_dict(state.get("predictor"))
        self.drawn = list(drawn)
        self._drawn[:] = False
        self._drawn[drawn] = True
        self.round_open = state["round_open"]
        self.rounds = list(rounds)
        self.deferred = [int(x) for x in deferred]


def round_summary(rounds: Sequence[bool]) -> dict[str, float]:
    """How many rounds were long, and their share (NaN before any round)."""
    n = len(rounds)
    long = int(sum(bool(r) for r in rounds))
    return {"rounds": n, "long_rounds": long, "long_share": long / n if n else math.nan}
