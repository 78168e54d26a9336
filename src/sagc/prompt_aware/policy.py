"""``sagc-prompt``: one SAGC controller per round kind (short, long), since one posterior over
both kinds' risks would pick a G that fits neither (docs/prompt-aware.md, "The hybrid policy").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from sagc.controller.sagc import (
    STATE_VERSION,
    FixedGroupSize,
    GroupSizer,
    SAGCConfig,
    SAGCController,
    StepRecord,
    check_state,
    state_counts,
)
from sagc.prompt_aware.config import PromptSAGCConfig
from sagc.prompt_aware.predictor import PromptLengthPredictor, prompt_features
from sagc.prompt_aware.schedule import TailBatchingStream
from sagc.prompts import PromptStream


def tail_batching(
    config: PromptSAGCConfig,
    base: PromptStream,
    token_ids: Sequence[Sequence[int]] | None = None,
    features: np.ndarray | None = None,
) -> TailBatchingStream:
    """The tail-batching stream of a ``sagc_prompt`` block over ``base``'s prompts and seed;
    its predictor's features: ``features``, else those of ``token_ids`` (or of the function
    returning them), else an intercept only."""
    if features is None and token_ids is not None:
        ids = token_ids() if callable(token_ids) else token_ids
        features = prompt_features(ids, config.hash_dim, config.edge_tokens)
    predictor = PromptLengthPredictor(base.n, features, config.predictor)
    return TailBatchingStream(base.n, base.seed, base.shuffle, predictor, config.long_fraction, config.queue_rounds)


class PromptAwareSAGC(GroupSizer):
    """Two SAGC controllers, one per round kind; ``tail``: the ``sagc_prompt`` block whose
    tail-batching stream ``prompt_stream`` supplies (None: the plain stream)."""

    def __init__(
        self,
        config: SAGCConfig | None = None,
        schedule: TailBatchingStream | None = None,
        tail: PromptSAGCConfig | None = None,
    ) -> None:
        self.config = config if config is not None else SAGCConfig()
        self.short = SAGCController(self.config)
        self.long = SAGCController(replace(self.config, seed=self.config.seed + 1))
        self.candidates = self.short.candidates
        self.schedule = schedule
        self.step = 0
        self.n_stragglers = 0
        self._active: SAGCController | None = None
        self.round_long = False
        self.tail = tail

    def prompt_stream(
        self, base: PromptStream, token_ids: Sequence[Sequence[int]] | None = None, features: np.ndarray | None = None
    ) -> PromptStream:
        """The tail-batching stream (``tail_batching``), attached; ``base`` without ``tail``."""
        if self.tail is None:
            return base
        self.schedule = tail_batching(self.tail, base, token_ids, features)  # its round kinds choose the controller
        return self.schedule

    @property
    def max_group_size(self) -> int:
        return self.candidates[-1]

    def next_group_size(self) -> int:
        self.round_long = bool(self.schedule is not None and self.schedule.next_round_long())
        self._active = self.long if self.round_long else self.short
        return self._active.next_group_size()

    def observe(self, lengths: Iterable[Iterable[float]]) -> StepRecord:
        """The step's lengths go to the controller that chose its G; counts are the run's."""
        active = self._active or self.short
        rec = active.observe(lengths)
        if rec.skipped:
            return rec
        self.step += 1
        self.n_stragglers += int(rec.straggler)
        return replace(rec, step=self.step, straggler_rate=self.n_stragglers / self.step)

    @property
    def straggler_rate(self) -> float:
        return self.n_stragglers / self.step if self.step else 0.0

    def state_dict(self) -> dict[str, Any]:
        return {
            "kind": "sagc_prompt",
            "version": STATE_VERSION,  # the controller's: its two controllers' states are inside
            "step": self.step,
            "n_stragglers": self.n_stragglers,
            "round_long": self.round_long,
            "active": None if self._active is None else ("long" if self._active is self.long else "short"),
            "short": self.short.state_dict(),
            "long": self.long.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict()``; both controllers validate their part before either loads."""
        check_state(state, "sagc_prompt", ())
        step, n = state_counts(state, "sagc_prompt")
        if state.get("active") not in (None, "short", "long"):
            raise ValueError(
                f"sagc_prompt state key 'active' must be 'short', 'long' or null, got {state.get('active')!r}"
            )
        if not isinstance(state.get("round_long"), bool):
            raise ValueError("sagc_prompt state key 'round_long' must be true or false")
        short, long = SAGCController(self.short.config), SAGCController(self.long.config)
        for name, ctl in (("short", short), ("long", long)):
            try:
                ctl.load_state_dict(state.get(name))
            except ValueError as e:
                raise ValueError(f"sagc_prompt state key {name!r}: {e}") from None
        self.short, self.long = short, long
        self.step, self.n_stragglers = step, n
        self.round_long = state["round_long"]
        self._active = {"short": short, "long": long, None: None}[state["active"]]

    def __repr__(self) -> str:
        return f"PromptAwareSAGC({self.config})"


class TailBatchedFixedGroupSize(FixedGroupSize):
    """Tail batching alone: the fixed baseline at ``tail.group_size``, drawing its prompts from
    the tail-batching stream."""

    def __init__(self, tail: PromptSAGCConfig) -> None:
        super().__init__(tail.group_size, tau=tail.sagc.tau, scope=tail.sagc.scope)
        self.tail = tail

    def prompt_stream(
        self, base: PromptStream, token_ids: Sequence[Sequence[int]] | None = None, features: np.ndarray | None = None
    ) -> PromptStream:
        return tail_batching(self.tail, base, token_ids, features)


def build_prompt_sagc(config: PromptSAGCConfig) -> GroupSizer:
    """The registry's builder of the ``sagc-prompt`` sizings: the hybrid, or tail batching
    alone at a fixed G when the block sets ``group_size``."""
    if config.group_size is not None:
        return TailBatchedFixedGroupSize(config)
    return PromptAwareSAGC(config.sagc, tail=config)
