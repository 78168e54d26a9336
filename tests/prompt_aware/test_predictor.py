"""The per-prompt length predictor learns known length scales from observed lengths alone."""

import json

import numpy as np
import pytest

from sagc.prompt_aware.predictor import PredictorConfig, PromptLengthPredictor, prompt_features


def _world(n=96, seed=0):
    """Prompts with known log-scales; the token count is a noisy hint of the scale."""
    rng = np.random.default_rng(seed)
    z = np.log(60.0) + rng.normal(0.0, 0.6, n)
    tokens = np.exp(3.0 + 0.8 * (z - z.mean()) + rng.normal(0.0, 0.3, n))
    return z, tokens, rng


def _rmse(pred: PromptLengthPredictor, z: np.ndarray) -> float:
    mu, _ = pred.predict()
    return float(np.sqrt(np.mean((mu - z) ** 2)))


def test_error_shrinks_as_observations_accumulate():
    z, tokens, rng = _world()
    n = z.size
    x = np.c_[np.ones(n), np.log(tokens)]
    pred = PromptLengthPredictor(n, x)
    errors = [_rmse(pred, z)]
    for _epoch in range(3):
        for i in rng.permutation(n):
            pred.observe([int(i)], [np.exp(z[i] + 0.4 * rng.standard_normal(8))])
        errors.append(_rmse(pred, z))
    assert errors[1] < 0.5 * errors[0]
    assert errors[3] < errors[1]
    assert errors[3] < 0.15  # the 8-rollout sampling error of one epoch's mean is 0.14


def test_features_predict_unseen_prompts():
    """Half the prompts are observed; the feature model predicts the other half better than
    the overall mean does."""
    z, tokens, rng = _world(seed=1)
    n = z.size
    with_feat = PromptLengthPredictor(n, prompt_features([[0] * int(round(t)) for t in tokens]))
    no_feat = PromptLengthPredictor(n)
    seen = np.arange(n // 2)
    for p in (with_feat, no_feat):
        for i in seen:
            p.observe([int(i)], [np.exp(z[i] + 0.4 * rng.standard_normal(8))])
    unseen = np.arange(n // 2, n)
    err = [float(np.sqrt(np.mean((p.predict(unseen)[0] - z[unseen]) ** 2))) for p in (with_feat, no_feat)]
    assert err[0] < 0.8 * err[1]


def test_risk_orders_prompts_by_their_scale():
    z, _, rng = _world(seed=2)
    n = z.size
    pred = PromptLengthPredictor(n)
    for i in range(n):
        pred.observe([i], [np.exp(z[i] + 0.3 * rng.standard_normal(16))])
    risk = pred.risk()
    assert np.corrcoef(risk, z)[0, 1] > 0.9
    assert np.all(risk > pred.predict()[0])  # an upper quantile lies above the mean


def test_edge_features_tell_start_from_end():
    """Two prompts with the same tokens in swapped edge positions get different features."""
    f = prompt_features([[1, 5, 7, 2], [2, 5, 7, 1]], hash_dim=64, edge=1)
    assert f.shape == (2, 66)
    assert not np.array_equal(f[0], f[1])
    assert f[0, 1] == pytest.approx(np.log(4))


def test_state_round_trips_exactly_through_json():
    z, tokens, rng = _world(seed=3)
    n = z.size
    x = np.c_[np.ones(n), np.log(tokens)]
    a, b = PromptLengthPredictor(n, x), PromptLengthPredictor(n, x)
    for i in rng.permutation(n)[:40]:
        a.observe([int(i)], [np.exp(z[i] + 0.4 * rng.standard_normal(4))])
    b.load_state_dict(json.loads(json.dumps(a.state_dict())))
    for p in (a, b):
        p.observe([0, 1], [[30, 40], [50, 70, 90]])
    np.testing.assert_array_equal(a.risk(), b.risk())


@pytest.mark.parametrize(
    "key, value",
    [
        ("quantile", 1.0),
        ("history_decay", 0.0),
        ("ridge", -1.0),
        ("prior_strength", float("nan")),
        ("min_between_var", "x"),
    ],
)
def test_bad_config_names_the_key(key, value):
    with pytest.raises(ValueError, match=f"sagc_prompt.{key}"):
        PredictorConfig(**{key: value})


def test_bad_observations_and_states_are_refused():
    pred = PromptLengthPredictor(4)
    with pytest.raises(ValueError, match="outside"):
        pred.observe([4], [[10]])
    with pytest.raises(ValueError, match="2 prompt indices for 1"):
        pred.observe([0, 1], [[10]])
    state = pred.state_dict()
    with pytest.raises(ValueError, match="'n'"):
        PromptLengthPredictor(5).load_state_dict(state)
    with pytest.raises(ValueError, match="'count'"):
        PromptLengthPredictor(4).load_state_dict({**state, "count": [1.0]})


def test_identical_lengths_keep_predictions_finite():
    """A deterministic answer gives a group of equal lengths: zero spread, still finite."""
    pred = PromptLengthPredictor(3)
    pred.observe([0, 1], [[21] * 16, [45] * 16])
    mu, sd = pred.predict()
    assert np.all(np.isfinite(mu)) and np.all(np.isfinite(sd)) and np.all(sd > 0)
    assert mu[0] == pytest.approx(np.log(21), abs=0.01) and mu[1] == pytest.approx(np.log(45), abs=0.01)


def test_feature_model_is_the_ridge_regression_of_the_group_means():
    """The running inverse gives the batch ridge solution of every observed group mean."""
    rng = np.random.default_rng(4)
    n, d = 50, 6
    x = np.c_[np.ones(n), rng.normal(size=(n, d - 1))]
    pred = PromptLengthPredictor(n, x, PredictorConfig(ridge=0.5))
    rows, means = [], []
    for _ in range(200):
        i = int(rng.integers(n))
        group = rng.integers(5, 200, 4)
        pred.observe([i], [group])
        rows.append(x[i])
        means.append(np.log(group).mean())
    xs = np.array(rows)
    want = np.linalg.solve(0.5 * np.eye(d) + xs.T @ xs, xs.T @ np.array(means))
    np.testing.assert_allclose(pred.coef(), want, rtol=1e-8, atol=1e-10)
