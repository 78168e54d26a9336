"""The length-tail table reads groups at the real run's group size, by hand-countable cases."""

import math

import numpy as np
import pytest

from sagc.lengths import REAL_RUN_TAIL, tail_table


def test_shares_above_the_median_and_groups_counted_by_hand():
    # Block 1: median 10, one row at 2.6x (above 2x and 2.5x, not 3x).
    # Block 2: median 10, one row at 3.5x; block 3: all equal.
    blocks = [[10] * 7 + [26], [10] * 7 + [35], [20] * 8]
    t = tail_table(blocks)
    assert t["blocks"] == 3
    assert t["over_2x_median"] == pytest.approx(2 / 24)
    assert t["over_2.5x_median"] == pytest.approx(2 / 24)
    assert t["over_3x_median"] == pytest.approx(1 / 24)
    assert t["groups_max_over_2x"] == pytest.approx(2 / 3)
    assert t["groups_max_over_2.5x"] == pytest.approx(2 / 3)
    # The equal block has no spread: the pooled within-block variance is the mean of the three.
    var1 = np.var(np.log([10] * 7 + [26]), ddof=1)
    var2 = np.var(np.log([10] * 7 + [35]), ddof=1)
    assert t["sd_log_within_group"] == pytest.approx(math.sqrt((var1 + var2 + 0.0) / 3))


def test_a_group_of_sixteen_is_two_groups_of_eight_and_small_groups_are_left_out():
    sixteen = [[10] * 7 + [40] + [10] * 8]
    t = tail_table(sixteen + [[5, 5, 5, 50]])  # a G=4 group has no block of 8
    assert t["blocks"] == 2
    assert t["groups_max_over_2x"] == pytest.approx(1 / 2)
    assert t["over_3x_median"] == pytest.approx(1 / 16)


def test_no_block_gives_nan_for_every_statistic():
    t = tail_table([[1, 2, 3, 4]])
    assert t["blocks"] == 0
    assert all(math.isnan(t[k]) for k in REAL_RUN_TAIL)


def test_between_prompt_share_separates_prompt_from_completion_variance():
    rng = np.random.default_rng(0)
    prompts = rng.normal(0.0, 0.5, size=400)  # prompt sd 0.5, completion sd 0.5: share 0.5
    groups = [np.exp(5 + p + rng.normal(0.0, 0.5, size=8)) for p in prompts]
    t = tail_table(groups)
    # Block means carry 1/8 of the completion variance: 0.25 + 0.25/8 against 0.25.
    assert t["between_prompt_share"] == pytest.approx((0.25 + 0.25 / 8) / (0.5 + 0.25 / 8), abs=0.05)
    assert t["sd_log_within_group"] == pytest.approx(0.5, abs=0.03)
