"""What a step measures of itself, without TRL's loop: the rows of its generate calls, the
parts of their times, the padded tokens it trains on, its clocks and its finished record."""

from __future__ import annotations

import math
import time

import pytest
import torch

from sagc.controller import FixedGroupSize
from sagc.train.metering import (
    CallTimes,
    StepClock,
    completion_rows,
    finish_step,
    record_call,
    train_padded_tokens,
    update_means,
)
from sagc.train.records import StepInProgress, step_costs

EOS, PAD, IM_END = 2, 0, 9


def test_a_row_is_truncated_when_it_ends_at_no_stop():
    prompts = [[5, 6], [5], [7, 7, 7], [8]]
    completions = [[4, 4, EOS], [4, 4, 4, 4], [], [3, IM_END]]
    assert completion_rows(prompts, completions, {EOS, PAD, IM_END}) == [
        (2, 3, False),
        (1, 4, True),
        (3, 0, False),
        (1, 2, False),
    ]
    # the chat end token is a stop only when it is among the stops
    assert completion_rows(prompts, completions, {EOS, PAD})[3] == (1, 2, True)
    with pytest.raises(ValueError):  # every prompt has its completion
        completion_rows(prompts, completions[:3], {EOS})


def test_calls_add_their_rows_by_group_and_their_shape():
    cur = StepInProgress(step=1, group_size=2)
    record_call(cur, [(3, 10, False), (3, 40, True), (1, 5, False), (1, 7, False)], 2)
    record_call(cur, [(2, 6, False), (2, 9, False)], 2)  # a refill round of one prompt
    assert cur.length_groups == [[10, 40], [5, 7], [6, 9]]
    assert cur.truncated == [False, True, False, False, False, False]
    assert [(c.rows, c.longest, c.tokens, c.prompt_padding) for c in cur.calls] == [(4, 40, 62, 4), (2, 9, 15, 0)]
    assert step_costs(cur.calls, 0)["decode_steps"] == 40 + 9
    with pytest.raises(RuntimeError, match="3 completions do not form groups of G=2"):
        record_call(cur, [(1, 1, False)] * 3, 2)


def test_a_rounds_times_add_to_the_step_and_the_rest_is_post_processing():
    cur = StepInProgress(step=1, group_size=4)
    CallTimes(sync=0.5, gen=2.0, wake=0.25, wait=0.125).add_to(cur, total=3.0, sleep_mode=True)
    CallTimes(sync=0.0, gen=1.0, wake=0.5, wait=0.0).add_to(cur, total=1.75, sleep_mode=True)
    assert (cur.gen_seconds, cur.sync_seconds, cur.wait_seconds) == (3.0, 0.5, 0.125)
    assert cur.post_seconds == pytest.approx(0.125 + 0.25)
    assert cur.wake_seconds == 0.75
    # without sleep mode the step reports no wake time at all (not zero)
    plain = StepInProgress(step=1, group_size=4)
    CallTimes(gen=1.0).add_to(plain, total=1.5, sleep_mode=False)
    assert plain.wake_seconds is None and plain.post_seconds == 0.5


def test_train_padded_tokens_count_every_row_at_the_batch_widths_each_iteration():
    scored = {"prompt_ids": torch.zeros(6, 7), "completion_ids": torch.zeros(6, 30)}
    assert train_padded_tokens(scored, rollouts=6, num_iterations=2) == 6 * 37 * 2


def test_an_updates_metrics_are_the_means_of_their_finite_numbers():
    assert update_means({"kl": [0.1, 0.3, math.nan], "clip": [math.nan], "text": ["a"], "n": [2, 4]}) == {
        "kl": pytest.approx(0.2),
        "n": 3.0,
    }


def test_the_step_clock_runs_from_the_first_micro_step_and_totals_the_run():
    clock = StepClock()
    with pytest.raises(RuntimeError, match="no step is running"):
        clock.stop()
    clock.start()
    time.sleep(0.05)
    clock.start()  # a later micro-step of the same step: the clock keeps its start
    time.sleep(0.05)
    first, cpu = clock.stop()
    assert first >= 0.1 and cpu < first  # sleeping takes wall time, not CPU time
    clock.start()
    time.sleep(0.02)
    second, _ = clock.stop()
    assert 0.02 <= second < first
    assert clock.wallclock_s == first + second


def test_a_finished_step_carries_its_times_losses_and_the_sizers_verdict():
    lengths = [[10, 40], [5, 7]]
    cur = StepInProgress(
        step=3,
        group_size=2,
        length_groups=lengths,
        truncated=[False, True, False, False],
        rewards=[torch.tensor([1.0, 0.0, 0.0, 1.0])],
        record=FixedGroupSize(2).observe(lengths),
        update_losses=[0.5, 0.25],
        trl_metrics=[{"kl": 0.1}, {"kl": 0.3}],
    )
    clock = StepClock()
    clock.wallclock_s, clock.cpu_s = 10.0, 4.0  # earlier steps (a resumed run)
    clock.start()
    time.sleep(0.01)
    result = finish_step(cur, clock, dynamic_sampling=False)
    assert result.step == 3 and result.losses == [0.5, 0.25] and result.trl_metrics == {"kl": pytest.approx(0.2)}
    assert result.step_s >= 0.01 and result.wallclock_s == 10.0 + result.step_s == clock.wallclock_s
    assert result.cpu_total_s == 4.0 + result.cpu_s
    assert result.straggler and result.ratio == pytest.approx(40 / 8.5)  # max over the true median
