"""Length sources: a pool of ``W`` rollout lengths per step and prompt, of which a sizing takes
the first G (common random numbers; docs/controller.md, "The simulator's models")."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from sagc.simulate.config import ParametricLengthConfig, RealRunLengthConfig, ReplayConfig
from sagc.trace import TraceStep, read_trace

Block = np.ndarray | list

#: Steps per generated block, each with its own seeded streams: changing it changes the pool.
BLOCK_STEPS = 1024

#: The prompt scales' stream id in a block (column j uses stream j).
_PROMPT_STREAM = 1 << 20


class ParametricLengths:
    """Lengths from ``ParametricLengthConfig``; column j of a block comes from its own stream
    ``SeedSequence([seed, block, j])``, so a pool of width 16 starts with the pool of 8."""

    def __init__(self, cfg: ParametricLengthConfig, total_steps: int, prompts: int, seed: int) -> None:
        if total_steps < 1 or prompts < 1:
            raise ValueError(f"total_steps and prompts must be >= 1, got {total_steps}, {prompts}")
        self.cfg = cfg
        self.total_steps = int(total_steps)
        self.prompts = int(prompts)
        self.seed = int(seed)

    def blocks(self, steps: int, width: int) -> Iterator[tuple[int, np.ndarray]]:
        """Yield ``(first_step, pool)`` for steps ``0 .. steps-1`` in blocks."""
        if steps > self.total_steps:
            raise ValueError(f"asked for {steps} steps of a length model built for {self.total_steps}")
        for b, start in enumerate(range(0, steps, BLOCK_STEPS)):
            stop = min(start + BLOCK_STEPS, steps)
            yield start, self.block(b, width)[: stop - start]

    def _block_start(self, b: int) -> tuple[int, np.ndarray]:
        """The steps of block ``b`` and its prompts' standard-normal scale draws."""
        n = min(BLOCK_STEPS, self.total_steps - b * BLOCK_STEPS)
        if n <= 0:
            raise ValueError(f"block {b} is past the last step ({self.total_steps})")
        prompt_rng = np.random.default_rng(np.random.SeedSequence([self.seed, b, _PROMPT_STREAM]))
        return n, prompt_rng.standard_normal((n, self.prompts))

    def block(self, b: int, width: int) -> np.ndarray:
        """The whole block ``b`` (``BLOCK_STEPS`` steps, the last one possibly shorter)."""
        cfg = self.cfg
        n, prompt_z = self._block_start(b)
        t = np.arange(b * BLOCK_STEPS, b * BLOCK_STEPS + n, dtype=float)
        frac = t / (self.total_steps - 1) if self.total_steps > 1 else np.zeros(n)
        log_median = math.log(cfg.median_start) + frac * math.log(cfg.median_end / cfg.median_start)
        tail_prob = cfg.tail_prob_start + frac * (cfg.tail_prob_end - cfg.tail_prob_start)

        log_scale = log_median[:, None] + cfg.prompt_sigma * prompt_z
        scale = np.exp(log_scale)  # (n, P)
        q = np.broadcast_to(tail_prob[:, None], (n, self.prompts))
        tail_base = scale * cfg.tail_min
        inv_alpha = -1.0 / cfg.tail_alpha

        out = np.empty((n, self.prompts, width))
        col = np.empty((n, self.prompts))
        for j in range(width):
            rng = np.random.default_rng(np.random.SeedSequence([self.seed, b, j]))
            # float32 draws: half the generator's work; lengths are rounded to whole tokens.
            z = rng.standard_normal((n, self.prompts), dtype=np.float32)
            u = rng.random((n, self.prompts), dtype=np.float32)
            np.multiply(z, cfg.sigma, out=col)
            col += log_scale
            np.exp(col, out=col)
            # The Pareto quantile reuses the uniform that picked the tail: u / q ~ U(0, 1) given u < q.
            in_tail = u < q
            if in_tail.any():
                v = np.minimum(u[in_tail].astype(float) / q[in_tail], 1.0 - 1e-12)
                col[in_tail] = tail_base[in_tail] * (1.0 - v) ** inv_alpha
            out[:, :, j] = col
        np.rint(out, out=out)
        np.clip(out, cfg.min_tokens, cfg.max_tokens, out=out)
        return out


class RealRunLengths(ParametricLengths):
    """Lengths from ``RealRunLengthConfig`` on ``ParametricLengths``' streams."""

    cfg: RealRunLengthConfig

    def block(self, b: int, width: int) -> np.ndarray:
        cfg = self.cfg
        n, prompt_z = self._block_start(b)
        log_scale = math.log(cfg.scale) + cfg.prompt_sigma * prompt_z
        short, long = math.log(cfg.short_scale), math.log(cfg.long_scale)
        out = np.empty((n, self.prompts, width))
        for j in range(width):
            rng = np.random.default_rng(np.random.SeedSequence([self.seed, b, j]))
            z = rng.standard_normal((n, self.prompts))
            u = rng.random((n, self.prompts))
            component = np.where(u < cfg.short_prob, short, np.where(u < cfg.short_prob + cfg.long_prob, long, 0.0))
            out[:, :, j] = log_scale + component + cfg.sigma * z
        np.exp(out, out=out)
        np.rint(out, out=out)
        np.clip(out, cfg.min_tokens, cfg.max_tokens, out=out)
        return out


class ReplayLengths:
    """A recorded trace: each group in a seeded order, bootstrapped to width W from the group or
    the step; at the recorded G a fixed controller reproduces the recorded flags exactly."""

    def __init__(self, trace: Sequence[TraceStep] | str | Path, cfg: ReplayConfig | None = None, seed: int = 0) -> None:
        self.trace = read_trace(trace) if isinstance(trace, (str, Path)) else list(trace)
        if not self.trace:
            raise ValueError("a replay needs at least one recorded step")
        self.cfg = cfg if cfg is not None else ReplayConfig(trace="<in-memory>")
        self.seed = int(seed)

    def n_steps(self, requested: int) -> int:
        """Steps the simulation runs: the trace's length, or ``requested`` when cycling."""
        return requested if self.cfg.cycle else len(self.trace)

    def blocks(self, steps: int, width: int) -> Iterator[tuple[int, Block]]:
        if steps > len(self.trace) and not self.cfg.cycle:
            raise ValueError(f"the trace has {len(self.trace)} steps, {steps} were asked for (set lengths.cycle: true)")
        rng = np.random.default_rng(self.seed)
        rows = [self._pool_step(self.trace[t % len(self.trace)], width, rng) for t in range(steps)]
        yield 0, np.stack(rows) if len({r.shape[0] for r in rows}) == 1 else rows

    def _pool_step(self, rec: TraceStep, width: int, rng: np.random.Generator) -> np.ndarray:
        out = np.empty((len(rec.lengths), width))
        everything = np.concatenate(rec.lengths)
        for i, grp in enumerate(rec.lengths):
            n = grp.size
            perm = grp[rng.permutation(n)]
            k = min(n, width)
            out[i, :k] = perm[:k]
            if width > n:
                source = grp if self.cfg.upsample == "group" else everything
                out[i, n:] = source[rng.integers(0, source.size, width - n)]
        return out


class CachedSource:
    """A source whose blocks are drawn once and kept, for many runs on the same pool."""

    def __init__(self, source, steps: int, width: int) -> None:
        self.inner = source
        self.steps = int(steps)
        self.width = int(width)
        self._blocks = list(source.blocks(self.steps, self.width))

    def n_steps(self, requested: int) -> int:
        return self.steps

    def blocks(self, steps: int, width: int):
        if steps != self.steps or width > self.width:
            raise ValueError(
                f"this cached pool holds {self.steps} steps x width {self.width}; asked for {steps} x {width}"
            )
        for start, block in self._blocks:
            yield start, block[:, :, :width] if isinstance(block, np.ndarray) else [b[:, :width] for b in block]
