"""The deterministic cost metrics against an independent computation from recorded lengths.

A real cell trains for a few steps (real TRL, real generation); the costs the trainer logs
are then recomputed here from what it recorded elsewhere: ``lengths.jsonl`` (every
completion length, grouped by prompt, in generation order) and the tokenized prompts.
"""

from __future__ import annotations

import json

import pytest

from sagc import metrics as M
from sagc.train.config import TrainConfig

pytestmark = pytest.mark.slow


def _read_trace(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _prompt_token_lengths(train_world) -> set[int]:
    from sagc.tiny.tokenizer import load_tokenizer

    tok = load_tokenizer(train_world["model"])
    rows = [json.loads(line) for line in train_world["data"].read_text().splitlines()]
    return {len(tok(r["prompt"], add_special_tokens=False)["input_ids"]) for r in rows}


@pytest.mark.parametrize("algorithm", ["grpo", "dapo"])
def test_costs_match_recorded_lengths(algorithm, make_cell, train_world, tmp_path):
    from sagc.train.run import run_cell

    out = tmp_path / algorithm
    done = run_cell(TrainConfig.from_dict(make_cell(out, algorithm=algorithm, sizing="sagc", steps=4)))
    trace = _read_trace(out / "lengths.jsonl")
    assert [t["step"] for t in trace] == [h["step"] for h in done["history"]] == [1, 2, 3, 4]

    prompt_lengths = _prompt_token_lengths(train_world)
    assert len(prompt_lengths) == 1, "the fixture's prompts should tokenize to one length"
    (prompt_len,) = prompt_lengths

    for step, h in zip(trace, done["history"]):
        # Generation order: the trace's groups are the calls' rows, call after call.
        flat = [n for group in step["lengths"] for n in group]
        calls, pos = [], 0
        for call in h["calls"]:
            chunk = flat[pos : pos + call["rows"]]
            pos += call["rows"]
            assert call["longest"] == max(chunk)
            assert call["tokens"] == sum(chunk)
            assert call["prompt_padding"] == 0  # every prompt has the same length
            calls.append(chunk)
        assert pos == len(flat), "the calls' rows must account for every recorded completion"
        assert h["generate_calls"] == len(calls)
        assert h["decode_steps"] == sum(max(c) for c in calls)
        assert h["padded_tokens"] == sum(len(c) * max(c) for c in calls)
        if algorithm == "grpo":
            # One call, and TRL trains on rows padded to the longest prompt + completion.
            assert len(calls) == 1
            assert h["train_padded_tokens"] == len(flat) * (prompt_len + max(flat))
        else:
            assert h["generate_calls"] == 1 + h["ds_rounds"]
            # Two optimisation passes over the kept rows (P x G of them), each padded to at
            # least the prompt plus the longest kept completion.
            assert h["train_padded_tokens"] >= h["rollouts"] * (prompt_len + 1)
            assert h["train_padded_tokens"] <= h["rollouts"] * (prompt_len + max(flat)) * 2

    # The run's totals are the sums of the steps.
    for name in M.COST:
        assert done[name] == sum(h[name] for h in done["history"])
    assert done["cpu_s"] == pytest.approx(sum(h["cpu_s"] for h in done["history"]))
