"""Sampling at training temperature: accuracy, length distribution and straggler rate per G.

A "step" is what one GRPO step generates (``prompts_per_step`` prompts x G, one ``generate`` call);
it straggles when max / median completion length over the whole step exceeds ``tau``.
"""

from __future__ import annotations

import random
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch

from sagc.lengths import REAL_RUN_TAIL, TAIL_GROUP_SIZE, as_groups, length_stats, tail_table
from sagc.rewards import correctness_reward, format_reward
from sagc.tiny.defaults import DEFAULT_MAX_COMPLETION_LENGTH, DEFAULT_PROMPTS_PER_STEP, DEFAULT_TAU, DEFAULT_TEMPERATURE
from sagc.tiny.task import BEHAVIOURS, Problem, behaviour_of


@dataclass(frozen=True)
class SampleParams:
    temperature: float = DEFAULT_TEMPERATURE
    max_new_tokens: int = DEFAULT_MAX_COMPLETION_LENGTH
    top_k: int = 0  # 0 = off: plain sampling at the training temperature
    top_p: float = 1.0

    def validate(self) -> SampleParams:
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature!r}")
        if isinstance(self.max_new_tokens, bool) or not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be a positive integer, got {self.max_new_tokens!r}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p!r}")
        return self


@torch.no_grad()
def sample_completions(
    model, tokenizer, prompts: list[str], params: SampleParams, greedy: bool = False, return_batch: bool = False
):
    """Generate one completion per prompt in one batch; return texts and token lengths (and, with
    ``return_batch``, the padded ids + attention mask of prompt + completion).

    A length counts tokens up to and including the first eos, as TRL's completion mask does; a
    completion without eos has ``max_new_tokens``.
    """
    params.validate()
    enc = tokenizer(prompts, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=False)
    gen_kwargs = dict(
        max_new_tokens=params.max_new_tokens, pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id
    )
    if greedy:
        gen_kwargs.update(do_sample=False, temperature=None, top_k=None, top_p=None)
    else:
        gen_kwargs.update(do_sample=True, temperature=params.temperature, top_k=params.top_k, top_p=params.top_p)
    out = model.generate(**enc, **gen_kwargs)
    completions = out[:, enc["input_ids"].shape[1] :]
    texts, lengths = [], []
    for row in completions.tolist():
        n = row.index(tokenizer.eos_token_id) + 1 if tokenizer.eos_token_id in row else params.max_new_tokens
        lengths.append(min(n, params.max_new_tokens))
        texts.append(tokenizer.decode(row[:n], skip_special_tokens=True))
    if return_batch:
        width = completions.shape[1]
        comp_mask = (torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]).long()
        batch = {
            "input_ids": out,
            "attention_mask": torch.cat([enc["attention_mask"], comp_mask], 1),
            "n_prompt": enc["input_ids"].shape[1],
        }
        return texts, lengths, batch
    return texts, lengths


def time_update(model, batch: dict) -> float:
    """Seconds of one training forward + backward on a generated batch (no optimizer step,
    weights unchanged): the update half of a GRPO step, to compare with generation."""
    labels = batch["input_ids"].clone()
    labels[:, : batch["n_prompt"]] = -100
    labels[batch["attention_mask"] == 0] = -100
    model.train()
    t0 = time.perf_counter()
    with torch.enable_grad():
        loss = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=labels).loss
        loss.backward()
    seconds = time.perf_counter() - t0
    model.zero_grad(set_to_none=True)
    model.eval()
    return seconds


def accuracy(
    model, tokenizer, rows: list[dict], params: SampleParams, greedy: bool = False, batch_size: int = 64
) -> dict:
    """Correctness and format rate of one completion per row (sampled unless ``greedy``)."""
    correct, formatted, lengths = [], [], []
    for i in range(0, len(rows), batch_size):
        chunk = rows[i : i + batch_size]
        texts, lens = sample_completions(model, tokenizer, [r["prompt"] for r in chunk], params, greedy)
        answers = [r["answer"] for r in chunk]
        correct += correctness_reward(None, texts, answer=answers)
        formatted += [1.0 if f > 0 else 0.0 for f in format_reward(None, texts)]
        lengths += lens
    n = len(correct)
    return {
        "n": n,
        "accuracy": float(np.mean(correct)) if n else float("nan"),
        "format_rate": float(np.mean(formatted)) if n else float("nan"),
        "truncated_frac": float(np.mean([x >= params.max_new_tokens for x in lengths])) if n else float("nan"),
        "greedy": greedy,
    }


def behaviour_shares(texts: list[str], prompts: list[str], correct: list[float]) -> dict:
    """Share and accuracy of each behaviour (``task.behaviour_of``) among sampled completions."""
    rows: dict[str, list] = {b: [] for b in (*BEHAVIOURS, "other")}
    for text, prompt, c in zip(texts, prompts, correct):
        try:
            b = behaviour_of(text, Problem.from_prompt(prompt))
        except ValueError:  # not a tiny-task prompt
            b = "other"
        rows[b].append(c)
    n = max(1, len(texts))
    return {b: {"share": len(v) / n, "accuracy": float(np.mean(v)) if v else None} for b, v in rows.items()}


def describe_lengths(lengths: list[int], cap: int) -> dict:
    a = np.asarray(lengths, dtype=float)
    return {
        "n": int(a.size),
        "mean": float(a.mean()),
        "median": float(np.median(a)),
        "p90": float(np.percentile(a, 90)),
        "p99": float(np.percentile(a, 99)),
        "max": float(a.max()),
        "truncated_frac": float(np.mean(a >= cap)),
    }


def measure_group_sizes(
    model,
    tokenizer,
    rows: list[dict],
    group_sizes: list[int],
    steps: int,
    prompts_per_step: int = DEFAULT_PROMPTS_PER_STEP,
    tau: float = DEFAULT_TAU,
    params: SampleParams | None = None,
    seed: int = 0,
) -> dict:
    """Simulate ``steps`` rollout phases per G and report the straggler rate and lengths."""
    params = (params or SampleParams()).validate()
    if not group_sizes or any(isinstance(g, bool) or not isinstance(g, int) or g < 1 for g in group_sizes):
        raise ValueError(f"group_sizes must be positive integers, got {group_sizes!r}")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive integer, got {steps!r}")
    if not isinstance(prompts_per_step, int) or prompts_per_step < 1:
        raise ValueError(f"prompts_per_step must be a positive integer, got {prompts_per_step!r}")
    if not tau > 1:
        raise ValueError(f"tau must be > 1, got {tau!r}")
    if len(rows) < prompts_per_step:
        raise ValueError(f"need at least {prompts_per_step} rows, got {len(rows)}")
    model.eval()
    results = []
    all_lengths: list[int] = []
    tail_groups: list[list[int]] = []  # every group of >= TAIL_GROUP_SIZE completions
    for g in group_sizes:
        rng = random.Random(seed * 1000 + g)
        torch.manual_seed(seed * 1000 + g)
        ratios, rewards, varied, secs, upd, g_groups, texts_g, prompts_g = [], [], [], [], [], [], [], []
        for _ in range(steps):
            chunk = rng.sample(rows, prompts_per_step)
            prompts = [r["prompt"] for r in chunk for _ in range(g)]
            t0 = time.perf_counter()
            texts, lens, batch = sample_completions(model, tokenizer, prompts, params, return_batch=True)
            secs.append(time.perf_counter() - t0)
            upd.append(time_update(model, batch))
            correct = correctness_reward(None, texts, answer=[r["answer"] for r in chunk for _ in range(g)])
            groups = [lens[i * g : (i + 1) * g] for i in range(prompts_per_step)]
            g_groups += groups
            ratios.append(length_stats(as_groups(groups), scope="step").ratio)
            rewards += correct
            texts_g += texts
            prompts_g += prompts
            varied += [len(set(correct[i * g : (i + 1) * g])) > 1 for i in range(prompts_per_step)]
        lens_g = [n for group in g_groups for n in group]
        all_lengths += lens_g
        if g >= TAIL_GROUP_SIZE:
            tail_groups += g_groups
        results.append(
            {
                "group_size": g,
                "steps": steps,
                "straggler_rate": float(np.mean([r > tau for r in ratios])),
                "mean_ratio": float(np.mean(ratios)),
                "reward_mean": float(np.mean(rewards)),
                "varied_group_frac": float(np.mean(varied)),  # groups whose correctness varies (RL signal)
                "generate_seconds_mean": float(np.mean(secs)),
                "update_seconds_mean": float(np.mean(upd)),  # forward + backward on the step's rollouts
                "generation_share": float(np.sum(secs) / (np.sum(secs) + np.sum(upd))),
                "lengths": describe_lengths(lens_g, params.max_new_tokens),
                "tail": tail_table(g_groups) if g >= TAIL_GROUP_SIZE else {},  # lengths.tail_table (G >= 8)
                "behaviours": behaviour_shares(texts_g, prompts_g, rewards),
                "ratios": [round(r, 3) for r in ratios],
            }
        )
    return {
        "tau": tau,
        "prompts_per_step": prompts_per_step,
        "sampling": asdict(params),
        "seed": seed,
        "per_group_size": results,
        "lengths": describe_lengths(all_lengths, params.max_new_tokens),
        # The length tail at the real run's group size, over every G >= 8, beside the real run's.
        "tail": tail_table(tail_groups),
        "real_run_tail": dict(REAL_RUN_TAIL),
    }
