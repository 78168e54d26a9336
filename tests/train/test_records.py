"""One record per step: the W&B row, done.json's history entry, the lengths trace line and
the checkpoint form are views of the same ``StepResult``."""

import json
import math

import torch

from sagc import metrics as M
from sagc.controller import SAGCConfig, SAGCController
from sagc.trace import read_trace, write_trace
from sagc.train.records import GenerateCall, StepInProgress, StepResult


def _finished_step(dynamic_sampling=True) -> StepResult:
    lengths = [[10, 12, 40, 11], [9, 9, 10, 30]]
    sizer = SAGCController(SAGCConfig(candidates=(2, 4, 8), seed=3))
    g = sizer.next_group_size()
    cur = StepInProgress(step=1, group_size=g, length_groups=lengths,
                         truncated=[False] * 7 + [True],
                         rewards=[torch.tensor([1.0, 0.0, 1.0, 1.0]), torch.tensor([0.0, float("nan"), 1.1, 0.0])],
                         gen_seconds=0.5, calls=[GenerateCall.of([[1, 2], [3]] * 4, [[0] * n for row in lengths for n in row])],
                         train_padded_tokens=400, ds_rounds=1, ds_dropped=1, ds_filled=0, ds_seconds=0.2,
                         n_prompts=2, n_rollouts=8, record=sizer.observe(lengths),
                         update_losses=[0.5, 0.25], trl_metrics=[{"kl": 0.1}, {"kl": 0.3, "clip": 0.0}])
    return cur.finish(step_s=1.0, cpu_s=0.9, wallclock_s=3.0, cpu_total_s=2.5, dynamic_sampling=dynamic_sampling)


def test_row_is_computed_from_the_step():
    r = _finished_step()
    row = r.row()
    assert row[M.GROUP_SIZE] == 4 and row[M.N_ROLLOUTS] == 8
    assert row[M.LENGTH_MEDIAN] == 10.5  # the true median of 8 lengths, not the lower middle
    assert row[M.LENGTH_MAX] == 40.0 and row[M.TOKENS_GENERATED] == 131
    rewards = [1.0, 0.0, 1.0, 1.0, 0.0, 1.100000023841858, 0.0]  # the NaN row left out
    assert math.isclose(row[M.REWARD_MEAN], sum(rewards) / 7)
    assert row[M.LOSS] == 0.375 and row["trl/kl"] == 0.2 and row["trl/clip"] == 0.0
    assert row[M.TRUNCATED_FRAC] == 1 / 8
    assert row[M.DS_ROUNDS] == 1 and M.LAMBDA in row
    assert row[M.COST["decode_steps"]] == 40 and row[M.COST["train_padded_tokens"]] == 400
    assert M.DS_ROUNDS not in _finished_step(dynamic_sampling=False).row()


def test_history_entry_agrees_with_the_row():
    r = _finished_step()
    row, h = r.row(), r.history_entry()
    assert (h["reward_mean"], h["length_max"], h["length_median"], h["loss"]) == (
        row[M.REWARD_MEAN], row[M.LENGTH_MAX], row[M.LENGTH_MEDIAN], row[M.LOSS])
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
