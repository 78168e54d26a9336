"""The default controller is the paper's algorithm, bit for bit: its G sequences, straggler
flags and final lambda on fixed synthetic lengths are pinned here.

The pinned values were recorded from the controller *before* the optional extensions
(``counterfactual``, ``selection``) existed; any change to the default path that alters a
single choice fails this test.
"""

import numpy as np
import pytest

from sagc import SAGCConfig, SAGCController

LETTER = {"a": 4, "b": 8, "c": 16}


def world_lengths(seed, steps=48, prompts=4, width=16):
    """A lognormal body with a 3% chance per rollout of a 4x runaway: G=16 straggles often."""
    rng = np.random.default_rng(1000 + seed)
    body = rng.lognormal(5.0, 0.35, size=(steps, prompts, width))
    body[rng.random((steps, prompts, width)) < 0.03] *= 4.0
    return np.rint(body)


# (config overrides, seed, G sequence (a=4, b=8, c=16), straggler flags, final lambda)
PINNED = [
    (
        {},
        0,
        "bcccccccccbabcbccccccccbabbbbaaaaabccbbabaaaaaab",
        "111111111111111111111110011110100111101010111111",
        12.799999999999988,
    ),
    (
        {},
        1,
        "bcccccccccbabccbbbbabcbbcbbabbccbabcccbcbcbabbab",
        "011111011111011101111111111001111111110111111111",
        13.44999999999999,
    ),
    (
        {},
        2,
        "bccccbccbcbaaabbcbcccbaaaaabababcbaabccccbaaaaba",
        "011111111110111110111110011111111111111111001011",
        12.949999999999989,
    ),
    (
        {},
        7,
        "bccccccccbbbcbaabbaaaaabaaabccccccbababaaaaaaaab",
        "111111111110110111010011001111111101101001111111",
        11.299999999999988,
    ),
    (
        {"tau": 2.5, "eta": 2.0},
        0,
        "bcccbccbaabcbccccccbbaaaaaaaaaaaabaaaabaaabaaabb",
        "111111111111111111111010010110000100101000011111",
        20.0,
    ),
    (
        {"tau": 2.5, "eta": 2.0},
        1,
        "bcccccbbbbbcbbbbbbbbcbbabcbcbabcbbababccbcccbaba",
        "010111000111001101111111111000011111011011111101",
        20.0,
    ),
    (
        {"tau": 2.5, "eta": 2.0},
        2,
        "bcccbbccbabcbabaabbbbbbaaaabaaaabaaaabaaaaaabbaa",
        "001111111111011000001110010101111010110001000101",
        19.999999999999986,
    ),
    (
        {"tau": 2.5, "eta": 2.0},
        7,
        "bcccccbccccccccccbaaaabaaaaaaaaaaabbccbaaaaaaaaa",
        "100111111110111111010011000010001100111000011110",
        19.4,
    ),
]


@pytest.mark.parametrize("overrides, seed, gs, flags, lam", PINNED)
def test_default_controller_is_unchanged(overrides, seed, gs, flags, lam):
    lengths = world_lengths(seed)
    ctrl = SAGCController(SAGCConfig(seed=seed, **overrides))
    got_g, got_flags = [], []
    for t in range(lengths.shape[0]):
        g = ctrl.next_group_size()
        rec = ctrl.observe(lengths[t, :, :g].tolist())
        got_g.append(g)
        got_flags.append(rec.straggler)
    assert got_g == [LETTER[c] for c in gs]
    assert got_flags == [c == "1" for c in flags]
    assert ctrl.lambda_ == lam
