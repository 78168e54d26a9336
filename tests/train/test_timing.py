"""The step's times are those of a synchronous step: per generation round the slowest rank's,
summed over rounds; the wait for the slowest rank, sleep mode's wake and sleep and the refill
rounds' weight pushes are timed apart (real TRL; two ranks over gloo where ranks matter)."""

from __future__ import annotations

import time

import pytest
import torch

from sagc import metrics as M
from sagc.train import rollout

from .test_cli import read_offline_history, run_files
from .test_distributed import done_json, launch

pytestmark = pytest.mark.slow

#: Seconds a straggling rank adds to a round; the other times of a round on the test model
#: are a few hundredths of a second.
SLOW = 1.0
#: Timing slack per round: what the trainer's window holds beyond the model's generate call
#: (padding the prompts, entering the generation context, trimming), and scheduling noise.
SLACK = 0.25


@pytest.fixture(scope="module")
def straggling_ranks(train_world, tmp_path_factory):
    """One DAPO step on two ranks with one refill round (the random test model answers
    nothing right: every group's accuracy is 0, so the filter drops all of them and the cap
    of one extra round is reached). Rank 0 is slow in round 1, rank 1 in round 2."""
    from .conftest import cell_dict

    tmp = tmp_path_factory.mktemp("timing")
    cell = cell_dict(
        train_world,
        tmp / "run",
        algorithm="dapo",
        sizing="g4",
        steps=1,
        prompts=4,
        save_steps=100,
        algo_overrides={"ds_max_rounds": 1},
    )
    res, ranks = launch(cell, tmp, "slow", "--slow", f"0:1:{SLOW}", "--slow", f"1:2:{SLOW}")
    assert res.returncode == 0, res.stderr[-4000:]
    (row,) = read_offline_history(run_files(tmp / "run")[0])
    return cell, ranks, row


def test_rollout_time_is_the_slowest_rank_of_each_round_summed(straggling_ranks):
    cell, ranks, row = straggling_ranks
    assert done_json(cell)["history"][0]["ds_rounds"] == 1
    rounds = list(zip(*(r["generate"] for r in ranks)))  # per round: each rank's generate call
    assert len(rounds) == 2
    by_hand = sum(max(call["end"] - call["start"] for call in calls) for calls in rounds)
    assert by_hand > 2 * SLOW  # each round waited for its straggler
    assert by_hand <= row[M.ROLLOUT_SECONDS] <= by_hand + 2 * SLACK
    # Each rank alone generated about SLOW + its fast round: the max of the ranks' sums, the
    # old definition, would have hidden one straggler.
    per_rank = [sum(c["end"] - c["start"] for c in r["generate"]) for r in ranks]
    assert max(per_rank) < by_hand - SLOW / 2


def test_the_wait_for_the_slowest_rank_is_apart_from_post_processing(straggling_ranks):
    _cell, ranks, row = straggling_ranks
    rounds = list(zip(*(r["generate"] for r in ranks)))
    # In each round the rank that finished first waits until the last one finishes.
    by_hand = sum(max(c["end"] for c in calls) - min(c["end"] for c in calls) for calls in rounds)
    assert by_hand > 2 * SLOW - SLACK
    assert by_hand - SLACK <= row[M.GATHER_WAIT_SECONDS] <= by_hand + 2 * SLACK
    # Post-processing (tokenizing, decoding, in both rounds) is CPU work of tenths at most,
    # without the seconds of waiting.
    assert row[M.POSTPROCESS_SECONDS] < SLOW / 2
    # HF generate: no weight push, no sleep mode.
    assert row[M.WEIGHT_SYNC_SECONDS] == row[M.REFILL_SYNC_SECONDS] == 0.0
    assert M.VLLM_WAKE_SECONDS not in row
    assert row[M.STEP_NO_REFILL_SYNC_SECONDS] == row[M.STEP_SECONDS]


def test_refill_rounds_weight_pushes_are_logged_apart(make_cell, tmp_path, monkeypatch):
    """vLLM sleep mode pushes the policy before every round; stand in for the push (no vLLM
    here) with one that takes a known time and count where it lands."""
    from .test_trainer import _build

    torch.set_num_threads(1)
    pushes: list[float] = []

    def push(trainer):
        t0 = time.perf_counter()
        time.sleep(0.1 * (len(pushes) + 1))  # different per round: which ones count shows
        pushes.append(time.perf_counter() - t0)
        return pushes[-1]

    monkeypatch.setattr(rollout, "timed_weight_sync", push)
    cfg = make_cell(
        tmp_path / "run",
        algorithm="dapo",
        sizing="g4",
        steps=1,
        prompts=4,
        save_steps=100,
        wandb_mode="disabled",
        algo_overrides={"ds_max_rounds": 2},
    )
    trainer = _build(cfg)
    trainer.train()
    (result,) = trainer.steps
    row = result.row()
    assert result.ds_rounds == 2 and len(pushes) == 3  # every group wrong: the cap is reached
    assert row[M.WEIGHT_SYNC_SECONDS] == pytest.approx(sum(pushes))
    assert row[M.REFILL_SYNC_SECONDS] == pytest.approx(pushes[1] + pushes[2])
    assert row[M.STEP_NO_REFILL_SYNC_SECONDS] == pytest.approx(row[M.STEP_SECONDS] - pushes[1] - pushes[2])
    assert row[M.ROLLOUT_SECONDS] < row[M.STEP_SECONDS] - sum(pushes)  # generation alone


def test_sleep_mode_timer_counts_the_engine_s_wake_and_sleep():
    class Engine:
        """An engine's wake_up / sleep (vLLM's LLM; sleep mode needs a GPU)."""

        def wake_up(self, tags=None):
            time.sleep(0.05)
            return ("woke", tuple(tags or ()))

        def sleep(self, level=1):
            time.sleep(0.03)
            return ("slept", level)

        def generate(self):
            return self.wake_up(tags=["kv_cache"]), self.sleep(level=2)

    engine = Engine()
    timer = rollout.SleepModeTimer(engine)
    assert engine.generate() == (("woke", ("kv_cache",)), ("slept", 2))
    assert 0.08 <= timer.seconds < 0.08 + SLACK
    before = timer.seconds
    engine.wake_up(tags=["weights"])
    assert 0.05 <= timer.seconds - before < 0.05 + SLACK
