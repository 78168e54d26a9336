"""Warm start: a short supervised fine-tune on the task's solutions.

Why: a randomly initialised model never answers, so RL would have no signal. A short SFT
brings the base model to a partial accuracy (it learns the format and most of the
arithmetic, but makes mistakes on long chains), so rewards vary within a group.

The SFT targets are ``solution + eos``; a fraction ``ramble_frac`` of them are replaced by
``task.ramble_solution`` (re-verification passes before the box; another pass follows
with probability ``ramble_continue``). Sampling at temperature 1 then reproduces that habit
at roughly that rate: most completions stop with eos at a length set by the problem, a few
run to the length cap. That per-rollout tail is what makes a step at G=16 straggle far more
often than at G=4 (``sagc.tiny.measure`` reports it).

A plain PyTorch loop (not TRL's SFTTrainer): a minute of CPU, no Trainer machinery, fully
seeded. The loss is on completion tokens only.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import asdict, dataclass

from sagc.tiny.task import ramble_solution


@dataclass(frozen=True)
class WarmStartParams:
    """SFT settings. ``steps`` is the knob that sets base accuracy (more steps: higher)."""

    steps: int = 500
    batch_size: int = 16
    learning_rate: float = 3e-3
    warmup_steps: int = 20
    weight_decay: float = 0.01
    ramble_frac: float = 0.008
    ramble_continue: float = 0.85
    max_length: int = 192

    def validate(self) -> "WarmStartParams":
        for name in ("steps", "batch_size", "warmup_steps", "max_length"):
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
        for name in ("ramble_frac", "ramble_continue"):
            v = getattr(self, name)
            if not 0.0 <= v < 1.0:
                raise ValueError(f"warm-start parameter {name!r} must be in [0, 1), got {v!r}")
        return self

    def to_dict(self) -> dict:
        return asdict(self)


def _encode(tokenizer, prompt: str, target: str, max_length: int) -> tuple[list[int], int]:
    """Token ids of prompt + target + eos (truncated) and the number of prompt tokens."""
    p = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    t = tokenizer(target, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    ids = (p + t)[:max_length]
    return ids, min(len(p), len(ids))


def _batch(examples: list[tuple[list[int], int]], pad_id: int) -> dict:
    """Right-padded batch; labels are -100 on prompt and padding tokens."""
    import torch

    width = max(len(ids) for ids, _ in examples)
    input_ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(examples), width), dtype=torch.long)
    labels = torch.full((len(examples), width), -100, dtype=torch.long)
    for i, (ids, n_prompt) in enumerate(examples):
        input_ids[i, : len(ids)] = torch.tensor(ids)
        attention[i, : len(ids)] = 1
        labels[i, n_prompt : len(ids)] = torch.tensor(ids[n_prompt:])
    return {"input_ids": input_ids, "attention_mask": attention, "labels": labels}


def warm_start(model, tokenizer, rows: list[dict], params: WarmStartParams | None = None,
               seed: int = 0, log_every: int = 0) -> dict:
    """Fine-tune ``model`` in place on ``rows`` (train split); return a small report."""
    import torch

    params = (params or WarmStartParams()).validate()
    if not rows:
        raise ValueError("warm start needs at least one training row")
    rng = random.Random(seed)
    torch.manual_seed(seed)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=params.learning_rate,
                            weight_decay=params.weight_decay, betas=(0.9, 0.98))

    def lr_at(step: int) -> float:
        # Linear warmup then cosine decay to 10%: stable for tiny models at a high lr.
        if step < params.warmup_steps:
            return (step + 1) / params.warmup_steps
        progress = (step - params.warmup_steps) / max(1, params.steps - params.warmup_steps)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    order: list[int] = []
    n_ramble = 0
    losses: list[float] = []
    t0 = time.perf_counter()
    for step in range(params.steps):
        examples = []
        for _ in range(params.batch_size):
            if not order:
                order = list(range(len(rows)))
                rng.shuffle(order)
            row = rows[order.pop()]
            target = row["solution"]
            if rng.random() < params.ramble_frac:
                target = ramble_solution(row, rng, params.ramble_continue)
                n_ramble += 1
            examples.append(_encode(tokenizer, row["prompt"], target, params.max_length))
        batch = _batch(examples, tokenizer.pad_token_id)
        loss = model(**batch).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if log_every and (step + 1) % log_every == 0:
            print(f"warm start step {step + 1}/{params.steps} loss {sum(losses[-log_every:]) / log_every:.4f}"
                  f" ({time.perf_counter() - t0:.1f}s)", flush=True)
    model.eval()
    tail = losses[-max(1, min(20, len(losses))):] if losses else [math.nan]
    return {
        "params": params.to_dict(),
        "seconds": time.perf_counter() - t0,
        "final_loss": sum(tail) / len(tail),
        "ramble_examples": n_ramble,
        "examples": params.steps * params.batch_size,
    }
