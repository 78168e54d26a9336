"""The real-run length world: a generated pool reproduces the real DAPO run's length tail."""

from __future__ import annotations

import numpy as np
import pytest

from sagc.lengths import REAL_RUN_TAIL, tail_table
from sagc.simulate import SimConfig
from sagc.simulate.config import RealRunLengthConfig
from sagc.simulate.engine import make_source
from sagc.simulate.sources import RealRunLengths

#: Rows matched and how closely (absolute): the completion shares within 0.006, the group
#: shares above 2.5x within 0.015, the spread within 0.015. Groups above 2x are the row
#: the mixture does not match: 0.61 against the run's 0.60 (its completions are a little
#: more independent within a group than the run's), within 0.02.
TOLERANCE = {
    "over_2x_median": 0.006,
    "over_2.5x_median": 0.006,
    "over_3x_median": 0.006,
    "groups_max_over_2x": 0.02,
    "groups_max_over_2.5x": 0.015,
    "sd_log_within_group": 0.015,
    "between_prompt_share": 0.015,
}


def pool(seed: int, steps: int = 1000, prompts: int = 8, width: int = 16) -> np.ndarray:
    cfg = SimConfig.from_dict({"source": "real_run", "steps": steps, "prompts_per_step": prompts, "seed": seed,
                               "sizings": ["g16"]})  # fmt: skip
    src, n = make_source(cfg)
    assert isinstance(src, RealRunLengths)
    return np.concatenate([b for _, b in src.blocks(n, width)])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pool_reproduces_the_real_run_tail_table(seed):
    x = pool(seed)  # 8,000 prompt groups of 16 = 16,000 groups of 8
    table = tail_table(x.reshape(-1, x.shape[-1]))
    assert table["blocks"] == 16000
    for key, tol in TOLERANCE.items():
        assert abs(table[key] - REAL_RUN_TAIL[key]) <= tol, (key, table[key], REAL_RUN_TAIL[key])


def test_pool_has_the_real_run_body_and_far_tail():
    # mean / median 581 / 466 and p99 / median 2,711 / 466 in the real run.
    x = pool(3)
    med = np.median(x)
    assert x.mean() / med == pytest.approx(581 / 466, abs=0.03)
    assert np.percentile(x, 99) / med == pytest.approx(2711 / 466, abs=0.3)


def test_a_single_lognormal_with_the_run_spread_misses_the_tail():
    # Why the source is a mixture: sd 0.85 alone puts about twice the run's share above 2.5x
    # the group median (12 %) and a straggler in 83 % of groups of 8.
    rng = np.random.default_rng(0)
    table = tail_table(767.0 * np.exp(0.85 * rng.standard_normal((16000, 8))))
    assert table["over_2.5x_median"] > 1.8 * REAL_RUN_TAIL["over_2.5x_median"]
    assert table["groups_max_over_2x"] > REAL_RUN_TAIL["groups_max_over_2x"] + 0.15


def test_the_cap_truncates_and_the_scale_scales():
    small = SimConfig.from_dict({"source": "real_run", "steps": 50, "seed": 0, "sizings": ["g8"],
                                 "lengths": {"max_tokens": 2000, "scale": 500.0}})  # fmt: skip
    src, n = make_source(small)
    x = np.concatenate([b for _, b in src.blocks(n, 8)])
    assert x.max() == 2000 and np.median(x) < 500
    base = np.concatenate([b for _, b in make_source(small.replace(lengths={}))[0].blocks(n, 8)])
    assert base.max() > 2000


def test_wider_pool_starts_with_the_narrower_one():
    assert np.array_equal(pool(5, steps=20, width=16)[:, :, :8], pool(5, steps=20, width=8))


@pytest.mark.parametrize(
    "lengths, named",
    [
        ({"short_prob": 0.6, "long_prob": 0.5}, r"short_prob \+ lengths.long_prob"),
        ({"sigma": -0.1}, "lengths.sigma"),
        ({"median_start": 40.0}, "lengths.median_start"),  # a parametric key under real_run
    ],
)
def test_bad_real_run_keys_are_named(lengths, named):
    with pytest.raises(ValueError, match=named):
        SimConfig.from_dict({"source": "real_run", "lengths": lengths})


def test_source_key_selects_the_model():
    assert isinstance(SimConfig.from_dict({"source": "real_run"}).lengths, RealRunLengthConfig)
