"""Warm start: a short, fully seeded supervised fine-tune on a mixture of solution behaviours.

Shares of the behaviours and why: src/sagc/tiny/README.md, "The warm start".
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import asdict, dataclass

from sagc.tiny.task import CHECK_LINE, Problem, render_completion

#: Shares and chances of the behaviour mix, each in [0, 1).
_FRACTIONS = "miscount_frac slip_frac check_frac check_continue lesson_frac lesson_slip_frac check_slip_frac".split()


@dataclass(frozen=True)
class WarmStartParams:
    """SFT settings. ``steps`` is the knob that sets base accuracy (more steps: higher)."""

    steps: int = 1000
    batch_size: int = 16
    learning_rate: float = 3e-3
    warmup_steps: int = 20
    weight_decay: float = 0.01
    miscount_frac: float = 0.3
    slip_frac: float = 0.15
    check_frac: float = 0.12
    lesson_frac: float = 0.5
    lesson_slip_frac: float = 0.5
    check_continue: float = 0.6
    max_checks: int = 2
    #: Chance that a check pass itself slips (0: a check is always right in the data).
    check_slip_frac: float = 0.0
    max_length: int = 160

    def validate(self) -> WarmStartParams:
        for name in ("steps", "batch_size", "warmup_steps", "max_length", "max_checks"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"warm-start parameter {name!r} must be a non-negative integer, got {v!r}")
        if self.batch_size < 1:
            raise ValueError(f"warm-start parameter 'batch_size' must be >= 1, got {self.batch_size}")
        if self.max_length < 16:
            raise ValueError(f"warm-start parameter 'max_length' must be >= 16, got {self.max_length}")
        if not (self.learning_rate > 0 and math.isfinite(self.learning_rate)):
            raise ValueError(f"warm-start parameter 'learning_rate' must be > 0, got {self.learning_rate!r}")
        if self.weight_decay < 0:
            raise ValueError(f"warm-start parameter 'weight_decay' must be >= 0, got {self.weight_decay!r}")
        if self.max_checks < 1:
            raise ValueError(f"warm-start parameter 'max_checks' must be >= 1, got {self.max_checks}")
        for name in _FRACTIONS:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v < 1.0:
                raise ValueError(f"warm-start parameter {name!r} must be in [0, 1), got {v!r}")
        return self

    def to_dict(self) -> dict:
        return asdict(self)


def draw_behaviour(
    problem: Problem, rng: random.Random, params: WarmStartParams, lesson: bool = False
) -> tuple[str, dict]:
    """One SFT target for ``problem`` and the behaviour flags it was drawn with.

    The draws are independent (a check can repair a slip or a miscount); a ``lesson`` always checks.
    """
    flags = {
        "miscount": rng.random() < params.miscount_frac,
        "slip": rng.random() < (params.lesson_slip_frac if lesson else params.slip_frac),
        "check": lesson or rng.random() < params.check_frac,
    }
    shift = 0
    if flags["miscount"]:
        shift = -1 if problem.n_steps > 1 and rng.random() < 0.5 else 1
    n = problem.n_steps + shift
    slip = (rng.randint(1, n), rng.randint(1, problem.modulus - 1)) if flags["slip"] else None
    checks = int(flags["check"])
    while 0 < checks < params.max_checks and rng.random() < params.check_continue:
        checks += 1
    check_slips = ()
    if checks and params.check_slip_frac:  # no draw at 0: the default world's stream is unchanged
        check_slips = tuple(
            (rng.randint(1, problem.n_steps), rng.randint(1, problem.modulus - 1))
            if rng.random() < params.check_slip_frac
            else None
            for _ in range(checks)
        )
    return render_completion(problem, stop_shift=shift, slip=slip, checks=checks, check_slips=check_slips), flags


def _encode(tokenizer, prompt: str, target: str, max_length: int, lesson: bool = False) -> tuple[list[int], int]:
    """Token ids of prompt + target + eos (truncated) and the number of context tokens (no loss).

    A lesson's context runs to its first ``CHECK_LINE`` included: it teaches how to check, not when.
    """
    if lesson:
        cut = target.index(CHECK_LINE) + len(CHECK_LINE)
        prompt, target = prompt + target[:cut], target[cut:]
    p = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    t = tokenizer(target, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    ids = (p + t)[:max_length]
    return ids, min(len(p), len(ids))


def _batch(examples: list[tuple[list[int], int]], pad_id: int) -> dict:
    """Right-padded batch; labels are -100 on prompt and padding tokens."""
    import torch

    width = max(len(ids) for ids, _ in examples)
    return {
        "input_ids": torch.tensor([ids + [pad_id] * (width - len(ids)) for ids, _ in examples]),
        "attention_mask": torch.tensor([[1] * len(ids) + [0] * (width - len(ids)) for ids, _ in examples]),
        "labels": torch.tensor([[-100] * n + ids[n:] + [-100] * (width - len(ids)) for ids, n in examples]),
    }


def warm_start(
    model,
    tokenizer,
    rows: list[dict],
    params: WarmStartParams | None = None,
    seed: int = 0,
    log_every: int = 0,
    modulus: int = 10,
) -> dict:
    """Fine-tune ``model`` in place on ``rows`` (train split of a task with ``modulus``); return a
    report with the number of SFT examples of each behaviour. The loss is on completion tokens only."""
    import torch

    params = (params or WarmStartParams()).validate()
    if not rows:
        raise ValueError("warm start needs at least one training row")
    rng = random.Random(seed)
    torch.manual_seed(seed)
    model.train()
    opt = torch.optim.AdamW(
        model.parameters(), lr=params.learning_rate, weight_decay=params.weight_decay, betas=(0.9, 0.98)
    )

    def lr_at(step: int) -> float:
        # Linear warmup then cosine decay to 10%: stable for tiny models at a high lr.
        if step < params.warmup_steps:
            return (step + 1) / params.warmup_steps
        progress = (step - params.warmup_steps) / max(1, params.steps - params.warmup_steps)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    order: list[int] = []
    counts = {"miscount": 0, "slip": 0, "check": 0, "lesson": 0}
    losses: list[float] = []
    t0 = time.perf_counter()
    for step in range(params.steps):
        examples = []
        for _ in range(params.batch_size):
            if not order:
                order = list(range(len(rows)))
                rng.shuffle(order)
            row = rows[order.pop()]
            lesson = rng.random() < params.lesson_frac
            target, flags = draw_behaviour(Problem.from_prompt(row["prompt"], modulus), rng, params, lesson)
            for k, v in {**flags, "lesson": lesson}.items():
                counts[k] += int(v)
            examples.append(_encode(tokenizer, row["prompt"], target, params.max_length, lesson))
        batch = _batch(examples, tokenizer.pad_token_id)
        loss = model(**batch).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if log_every and (step + 1) % log_every == 0:
            print(
                f"warm start step {step + 1}/{params.steps} loss {sum(losses[-log_every:]) / log_every:.4f}"
                f" ({time.perf_counter() - t0:.1f}s)",
                flush=True,
            )
    model.eval()
    tail = losses[-max(1, min(20, len(losses))) :] if losses else [math.nan]
    return {
        "params": params.to_dict(),
        "seconds": time.perf_counter() - t0,
        "final_loss": sum(tail) / len(tail),
        "behaviour_examples": counts,
        "examples": params.steps * params.batch_size,
    }
