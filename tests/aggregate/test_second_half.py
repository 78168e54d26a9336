"""One "second half": the trainer's done.json and the aggregation's tables select the same
steps for the second-half straggler rate (the paper's budget), for odd and even run lengths."""

import random

import pandas as pd
import pytest

from sagc import metrics as M
from sagc.aggregate.stats import NEEDED_METRICS, cell_stats
from sagc.train.run import summarize_history


@pytest.mark.parametrize("steps", [1, 2, 3, 7, 8, 31, 32])
def test_done_json_and_the_tables_agree_on_the_second_half(steps):
    rng = random.Random(steps)
    flags = [rng.random() < 0.5 for _ in range(steps)]
    flags[-1] = not flags[0]  # the last step always counts, the first only in a 1-step run
    rows = [{"step": s, "straggler": f, "group_size": 4, "step_s": 1.0, "rollout_s": 0.5,
             "wallclock_s": float(s), "cpu_total_s": float(s), "reward_mean": 0.5,
             **{name: 1 for name in M.COST}} for s, f in zip(range(1, steps + 1), flags)]  # fmt: skip
    history = pd.DataFrame([{**{m: 1.0 for m in NEEDED_METRICS}, M.STEP: r["step"], M.STRAGGLER: float(r["straggler"]),
                             M.WALLCLOCK_SECONDS: r["wallclock_s"], M.CPU_TOTAL_SECONDS: r["cpu_total_s"]}
                            for r in rows])  # fmt: skip
    done = summarize_history(rows)["straggler_rate_second_half"]
    table = cell_stats(history, last_k=5)["straggler_rate_second_half"]
    want = sum(flags[steps // 2 :]) / (steps - steps // 2)  # steps floor(N/2)+1 .. N
    assert done == pytest.approx(want) and table == pytest.approx(want)
