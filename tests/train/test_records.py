"""One record per step: the W&B row, done.json's history entry, the lengths trace line and
the checkpoint form are views of the same ``StepResult``."""

import json
import math

import torch

from sagc import metrics as M
from sagc.controller import SAGCConfig, SAGCController
from sagc.trace import read_trace, write_trace
from sagc.train.records import GenerateCall, StepInProgress, StepResult

#: A DAPO step at G=4, P=2 with two refill rounds: round 1 draws two prompts (the second
#: group's rewards are all equal: dropped), round 2 two fresh ones (both dropped), round 3
#: the one prompt still missing. Per round: the prompt token ids of its groups and the
#: completion lengths (grouped by prompt) of its generate call.
ROUNDS = [
    ([[1, 2], [3]], [[10, 12, 40, 11], [9, 9, 10, 30]]),  # 8 rows, longest 40, 131 tokens, 4 pad
    ([[5, 6, 7], [8]], [[3, 5, 4, 6], [2, 2, 2, 2]]),  # 8 rows, longest 6, 26 tokens, 8 pad
    ([[9, 9]], [[15, 14, 13, 12]]),  # 4 rows, longest 15, 54 tokens, no pad
]
G = 4


def _call(prompts, lengths) -> GenerateCall:
    """The generate call of one round: G rows per prompt, in group order."""
    prompt_lengths = [len(ids) for ids in prompts for _ in range(G)]
    return GenerateCall.of_lengths(prompt_lengths, [n for group in lengths for n in group])


def _finished_step(dynamic_sampling=True) -> StepResult:
    lengths = [group for _, groups in ROUNDS for group in groups]  # every round's groups
    sizer = SAGCController(SAGCConfig(candidates=(2, 4, 8), seed=3))
    g = sizer.next_group_size()
    assert g == G
    truncated = [n == 40 for group in lengths for n in group]  # the row at the cap of 40
    cur = StepInProgress(
        step=1,
        group_size=g,
        length_groups=lengths,
        truncated=truncated,
        rewards=[
            torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0]),
            torch.tensor([1.0, 1.0, 1.0, 1.0, 0.0, float("nan"), 0.0, 0.0]),
            torch.tensor([0.0, 1.1, 0.0, 0.5]),
        ],
        gen_seconds=0.5,
        calls=[_call(*r) for r in ROUNDS],
        train_padded_tokens=400,
        ds_rounds=2,
        ds_dropped=3,
        ds_filled=0,
        ds_seconds=0.2,
        n_prompts=2,
        n_rollouts=8,
        record=sizer.observe(lengths),
        update_losses=[0.5, 0.25],
        trl_metrics=[{"kl": 0.1}, {"kl": 0.3, "clip": 0.0}],
    )
    return cur.finish(step_s=1.0, cpu_s=0.9, wallclock_s=3.0, cpu_total_s=2.5, dynamic_sampling=dynamic_sampling)


def test_row_is_computed_from_the_step():
    r = _finished_step()
    row = r.row()
    assert row[M.GROUP_SIZE] == 4 and row[M.N_ROLLOUTS] == 8
    # Over the 20 rows of all three rounds: the true median of 20 lengths (9 and 10 in the
    # middle), not the lower middle; every round's tokens.
    assert row[M.LENGTH_MEDIAN] == 9.5
    assert row[M.LENGTH_MAX] == 40.0 and row[M.TOKENS_GENERATED] == 131 + 26 + 54
    rewards = [1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0,
               1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0,  # the NaN row left out
               0.0, 1.100000023841858, 0.0, 0.5]  # fmt: skip
    assert math.isclose(row[M.REWARD_MEAN], sum(rewards) / 19)
    assert row[M.LOSS] == 0.375 and row["trl/kl"] == 0.2 and row["trl/clip"] == 0.0
    assert row[M.TRUNCATED_FRAC] == 1 / 20
    assert row[M.DS_ROUNDS] == 2 and row[M.DS_DROPPED_GROUPS] == 3 and M.LAMBDA in row
    assert row[M.COST["train_padded_tokens"]] == 400
    assert M.DS_ROUNDS not in _finished_step(dynamic_sampling=False).row()


def test_costs_sum_over_every_generate_call_of_the_step():
    """A step with refills pays for every round's generate call, not the first or the last."""
    r = _finished_step()
    row, h = r.row(), r.history_entry()
    expected = {
        "generate_calls": 3,
        "decode_steps": 40 + 6 + 15,  # each call waits for its own longest row
        "padded_tokens": 8 * 40 + 8 * 6 + 4 * 15,  # rows x longest, per call
        "prompt_padding": 4 * (2 - 1) + 4 * (3 - 1) + 0,  # left-padding to each call's longest prompt
        "train_padded_tokens": 400,
    }
    assert r.costs == expected
    assert {name: row[M.COST[name]] for name in expected} == expected
    assert {name: h[name] for name in expected} == expected
    assert h["calls"] == [
        {"rows": 8, "longest": 40, "tokens": 131, "prompt_padding": 4},
        {"rows": 8, "longest": 6, "tokens": 26, "prompt_padding": 8},
        {"rows": 4, "longest": 15, "tokens": 54, "prompt_padding": 0},
    ]
    # The calls' rows and tokens account for every completion of the step.
    assert sum(c["rows"] for c in h["calls"]) == sum(len(g) for g in r.lengths) == 20
    assert sum(c["tokens"] for c in h["calls"]) == row[M.TOKENS_GENERATED]


def test_history_entry_agrees_with_the_row():
    r = _finished_step()
    row, h = r.row(), r.history_entry()
    assert (h["reward_mean"], h["length_max"], h["length_median"], h["loss"]) == (
        row[M.REWARD_MEAN],
        row[M.LENGTH_MAX],
        row[M.LENGTH_MEDIAN],
        row[M.LOSS],
    )
    assert h["straggler"] == bool(row[M.STRAGGLER]) and h["decode_steps"] == row[M.COST["decode_steps"]]
    assert h["calls"] == [c.to_dict() for c in r.calls]


def test_checkpoint_form_round_trips_through_json():
    r = _finished_step()
    back = StepResult.from_dict(json.loads(json.dumps(r.to_dict())))
    assert back.row().keys() == r.row().keys()
    assert all(back.row()[k] == v or (math.isnan(v) and math.isnan(back.row()[k])) for k, v in r.row().items())
    assert back.history_entry() == r.history_entry()
    assert set(back.posterior_mean) == {2, 4, 8}  # candidate keys come back as integers


def test_trace_line_is_what_the_simulator_reads(tmp_path):
    r = _finished_step()
    write_trace(tmp_path / "lengths.jsonl", [r.trace_step()])
    (step,) = read_trace(tmp_path / "lengths.jsonl")
    assert step.step == 1 and step.group_size == 4 and step.straggler == r.straggler
    assert [list(g) for g in step.lengths] == r.lengths
