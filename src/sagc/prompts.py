"""A seeded, resumable stream of prompt indices: where every step's prompts come from.

TRL's ``RepeatSampler`` bakes a fixed G (and a fixed prompts-per-batch) into the data
loader. With a G that changes per step, a rollout budget (prompts = budget / G) and dynamic
sampling (refill with *fresh* prompts mid-step), the number of prompts a step consumes is
only known while the step runs, so the trainer draws them itself from this stream; the
prompt-aware simulator draws from it too.

Epoch ``e`` is a permutation of ``range(n)`` drawn from ``numpy.random.default_rng([seed,
e])``; a draw that crosses an epoch end continues in the next permutation. The state is
two integers, saved with every checkpoint, so a resumed run draws exactly the prompts the
uninterrupted one would have. Every cell with the same seed sees the same prompt sequence,
whatever its G.

A group-size policy may replace this plain order with its own stream (a subclass) through
its ``prompt_stream`` hook (``sagc.controller.GroupSizer``). The stream lives here, below
the controller, the trainer and the prompt-aware package, because all of them name it.
"""

from __future__ import annotations

import numpy as np


class PromptStream:
    def __init__(self, n: int, seed: int, shuffle: bool = True) -> None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"PromptStream needs a positive number of prompts, got {n!r}")
        self.n = n
        self.seed = int(seed)
        self.shuffle = bool(shuffle)
        self.epoch = 0
        self.pos = 0
        self._order = self._permutation(0)

    def _permutation(self, epoch: int) -> np.ndarray:
        if not self.shuffle:
            return np.arange(self.n)
        return np.random.default_rng([self.seed, epoch]).permutation(self.n)

    def take(self, k: int) -> list[int]:
        """The next ``k`` prompt indices (crossing epochs as needed)."""
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise ValueError(f"PromptStream.take needs a non-negative integer, got {k!r}")
        out: list[int] = []
        while len(out) < k:
            if self.pos == self.n:
                self.epoch += 1
                self.pos = 0
                self._order = self._permutation(self.epoch)
            m = min(k - len(out), self.n - self.pos)
            out.extend(int(i) for i in self._order[self.pos : self.pos + m])
            self.pos += m
        return out

    # What a schedule that learns from lengths overrides (tail batching): the plain order
    # learns nothing and has no long rounds.
    round_long = False

    def observe(self, prompts: list[int], lengths: list) -> None:
        """Told each step's prompt indices and their length groups; the plain order ignores them."""

    def state_dict(self) -> dict:
        return {"n": self.n, "seed": self.seed, "shuffle": self.shuffle, "epoch": self.epoch, "pos": self.pos}

    def load_state_dict(self, state: dict) -> None:
        if state.get("n") != self.n or state.get("seed") != self.seed or state.get("shuffle") != self.shuffle:
            raise ValueError(
                f"prompt stream state was saved for n={state.get('n')}, seed={state.get('seed')}, "
                f"shuffle={state.get('shuffle')}; this run has n={self.n}, seed={self.seed}, shuffle={self.shuffle} "
                "(did the training data or train.seed change?)"
            )
        self.epoch = int(state["epoch"])
        self.pos = int(state["pos"])
        self._order = self._permutation(self.epoch)
