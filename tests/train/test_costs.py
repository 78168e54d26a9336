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


#: DAPO's refill cap in the dapo cell below.
DS_MAX_ROUNDS = 2


@pytest.mark.parametrize("algorithm", ["grpo", "dapo"])
def test_costs_match_recorded_lengths(algorithm, make_cell, train_world, tmp_path):
    from sagc.train.run import run_cell

    out = tmp_path / algorithm
    cfg = make_cell(out, algorithm=algorithm, sizing="sagc", steps=4)
    if algorithm == "dapo":
        # Every reward weight zero (the overlong punishment's too): every row's weighted
        # reward is exactly 0.0, so every group has zero variance whatever the model
        # samples. Dynamic sampling then drops every group of every round and refills until
        # the cap: each step makes exactly 1 + DS_MAX_ROUNDS generate calls of P x G rows
        # (no RNG involved), and the cap completes the batch with the last round's groups.
        cfg["rewards"] = {name: 0.0 for name in cfg["rewards"]}
        cfg["algorithm"].update(overlong_weight=0.0, ds_max_rounds=DS_MAX_ROUNDS)
    done = run_cell(TrainConfig.from_dict(cfg))
    prompts = cfg["train"]["prompts_per_step"]
    trace = _read_trace(out / "lengths.jsonl")
    assert [t["step"] for t in trace] == [h["step"] for h in done["history"]] == [1, 2, 3, 4]

    prompt_lengths = _prompt_token_lengths(train_world)
    assert len(prompt_lengths) == 1, "the fixture's prompts should tokenize to one length"
    (prompt_len,) = prompt_lengths

    for step, h in zip(trace, done["history"]):
        # Generation order: the trace's groups are the calls' rows, call after call.
        flat = [n for group in step["lengths"] for n in group]
        rows = prompts * h["group_size"]
        if algorithm == "grpo":
            n_calls = 1
        else:
            n_calls = 1 + DS_MAX_ROUNDS  # see above: every round refills all P prompts
            assert (h["ds_rounds"], h["ds_dropped_groups"], h["ds_filled_groups"]) == (
                DS_MAX_ROUNDS,
                prompts * n_calls,
                prompts,
            )
        assert len(flat) == n_calls * rows
        calls = [flat[k * rows : (k + 1) * rows] for k in range(n_calls)]
        # The step's recorded calls, one by one, against the trace's chunks.
        assert h["calls"] == [
            {"rows": rows, "longest": max(c), "tokens": sum(c), "prompt_padding": 0} for c in calls
        ]  # prompt_padding 0: every prompt has the same length
        # The step's costs: summed over all its calls.
        assert h["generate_calls"] == n_calls
        assert h["decode_steps"] == sum(max(c) for c in calls)
        assert h["padded_tokens"] == sum(len(c) * max(c) for c in calls)
        assert h["prompt_padding"] == 0
        # TRL trains on the step's P x G rows padded to the prompt plus the longest
        # completion among them: GRPO's only call; under the cap, DAPO's last round (the
        # filler takes the most recent round first, and it holds all P groups). One pass
        # (num_iterations = 1) in both presets.
        trained = calls[-1]
        assert h["rollouts"] == len(trained) == rows
        assert h["train_padded_tokens"] == len(trained) * (prompt_len + max(trained))
    if algorithm == "dapo":
        # The refill branch ran: by the records, every step made more than one generate call.
        assert all(len(h["calls"]) > 1 for h in done["history"])

    # The run's totals are the sums of the steps.
    for name in M.COST:
        assert done[name] == sum(h[name] for h in done["history"])
    assert done["cpu_s"] == pytest.approx(sum(h["cpu_s"] for h in done["history"]))
