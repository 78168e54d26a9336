"""pass@k: Chen et al.'s unbiased estimator against brute-force enumeration, and the curve
a summary reports from lm-eval's logged samples."""

import itertools
import random

import pytest

from sagc.evaluate.summary import pass_at_k, pass_at_k_curve, pass_at_ks


def _enumerated(n, c, k):
    """The fraction of all k-subsets of n samples (c of them correct) holding a correct one."""
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(samples[i] for i in s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_estimator_equals_enumeration(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(_enumerated(n, c, k), abs=1e-12)


def test_pass_at_1_is_the_mean_and_large_n_is_stable():
    assert pass_at_k(64, 16, 1) == pytest.approx(16 / 64)
    assert pass_at_k(64, 0, 64) == 0.0 and pass_at_k(64, 1, 64) == 1.0
    assert 0.0 < pass_at_k(1024, 3, 512) < 1.0


def test_bad_counts_are_refused():
    for n, c, k in ((4, 5, 1), (4, 1, 5), (4, 1, 0)):
        with pytest.raises(ValueError, match="pass@k"):
            pass_at_k(n, c, k)


def test_reported_ks():
    assert pass_at_ks(1) == [1]
    assert pass_at_ks(8) == [1, 2, 4, 8]
    assert pass_at_ks(6) == [1, 2, 4, 6]


def test_curve_from_logged_samples():
    rng = random.Random(3)
    samples, expected = [], {k: 0.0 for k in (1, 2, 4, 8)}
    for doc in range(20):
        c = rng.randint(0, 8)
        samples.append({"doc_id": doc, "resps": [["g"] * 8], "exact_match": c / 8})
        for k in expected:
            expected[k] += _enumerated(8, c, k) / 20
    n, curve = pass_at_k_curve(samples)
    assert n == 8 and list(curve) == ["1", "2", "4", "8"]
    for k, value in expected.items():
        assert curve[str(k)] == pytest.approx(value, abs=1e-12)
    assert curve["1"] == pytest.approx(sum(s["exact_match"] for s in samples) / 20)
    with pytest.raises(ValueError, match="different sample counts"):
        pass_at_k_curve(samples + [{"doc_id": 99, "resps": [["g"] * 4], "exact_match": 0.5}])
