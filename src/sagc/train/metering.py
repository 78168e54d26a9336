"""What a training step measures of itself (lengths, costs, times) into its ``StepInProgress``.

Why each measurement is taken as it is: docs/trainer.md, "Inside the trainer".
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sagc.train import distributed
from sagc.train.records import GenerateCall, StepInProgress, StepResult


def completion_rows(
    prompt_ids: Sequence[Sequence[int]], completion_ids: Sequence[Sequence[int]], stop_ids: set[int]
) -> list[tuple[int, int, bool]]:
    """``(prompt length, completion length, truncated)`` of each row: truncated when its last
    token is none of ``stop_ids``."""
    return [
        (len(p), len(c), bool(c) and c[-1] not in stop_ids) for p, c in zip(prompt_ids, completion_ids, strict=True)
    ]


def record_call(cur: StepInProgress, rows: Sequence[tuple[int, int, bool]], group_size: int) -> None:
    """Add one generate call's rows (every rank's, in global order) to the step."""
    lengths = [r[1] for r in rows]
    if len(lengths) % group_size:
        raise RuntimeError(f"{len(lengths)} completions do not form groups of G={group_size}")
    cur.length_groups.extend(lengths[i : i + group_size] for i in range(0, len(lengths), group_size))
    cur.truncated.extend(r[2] for r in rows)
    cur.calls.append(GenerateCall.of_lengths([r[0] for r in rows], lengths))


@dataclass
class CallTimes:
    """The seconds of one generate call's parts, set inside it."""

    sync: float = 0.0
    gen: float = 0.0
    wake: float = 0.0
    wait: float = 0.0

    def add_to(self, cur: StepInProgress, total: float, sleep_mode: bool) -> None:
        """Add the round's times to the step's, each part the slowest rank's; the rest of the
        call's ``total`` seconds is post-processing."""
        post = total - self.gen - self.sync - self.wake - self.wait
        gen, sync, post, wait, wake = distributed.slowest(self.gen, self.sync, post, self.wait, self.wake)
        cur.gen_seconds += gen
        cur.sync_seconds += sync
        cur.post_seconds += post
        cur.wait_seconds += wait
        if sleep_mode:
            cur.wake_seconds = (cur.wake_seconds or 0.0) + wake


def train_padded_tokens(scored: dict, rollouts: int, num_iterations: int) -> int:
    """Tokens of the padded tensors TRL trains on, ``num_iterations`` times."""
    widths = distributed.slowest(scored["prompt_ids"].shape[1], scored["completion_ids"].shape[1])
    return rollouts * int(sum(widths)) * num_iterations


def update_means(metrics: dict[str, list]) -> dict[str, float]:
    """TRL's metric buffers of one update, each the mean of its finite numbers (if any)."""
    finite = {k: [x for x in v if isinstance(x, (int, float)) and not math.isnan(x)] for k, v in metrics.items()}
    return {k: float(np.mean(vals)) for k, vals in finite.items() if vals}


class StepClock:
    """A step's wall and CPU seconds, from its first micro-step to its last update, and the
    run's totals."""

    def __init__(self) -> None:
        self.wallclock_s = 0.0
        self.cpu_s = 0.0
        self._t0: float | None = None
        self._cpu0: float | None = None

    def start(self) -> None:
        """Start the step's clocks, unless they run already."""
        if self._t0 is None:
            self._t0 = time.perf_counter()
            self._cpu0 = time.process_time()

    def stop(self) -> tuple[float, float]:
        """The step's ``(wall, CPU)`` seconds, added to the totals."""
        if self._t0 is None:
            raise RuntimeError("StepClock.stop without start: no step is running")
        (step_s,) = distributed.slowest(time.perf_counter() - self._t0)
        (cpu_s,) = distributed.total(time.process_time() - self._cpu0)
        self.wallclock_s += step_s
        self.cpu_s += cpu_s
        self._t0 = self._cpu0 = None
        return step_s, cpu_s


def finish_step(cur: StepInProgress, clock: StepClock, *, dynamic_sampling: bool) -> StepResult:
    """The finished step's record; its updates' losses are the mean of the ranks'."""
    step_s, cpu_s = clock.stop()
    n = distributed.world()[1]
    cur.update_losses = [x / n for x in distributed.total(*cur.update_losses)]
    return cur.finish(
        step_s=step_s,
        cpu_s=cpu_s,
        wallclock_s=clock.wallclock_s,
        cpu_total_s=clock.cpu_s,
        dynamic_sampling=dynamic_sampling,
    )
