"""A seeded, resumable stream of prompt indices: where every step's prompts come from
(docs/trainer.md, "The prompt stream").
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

    # Overridden by a schedule that learns from lengths (tail batching).
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
