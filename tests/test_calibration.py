"""The classifier's posterior rule: temperature and pool weight (calibration.py)."""

import numpy as np
from scipy.special import logsumexp

from ltm_sklearn._estimators.calibration import (
    TEMPERATURE_BOUNDS,
    choose_pool,
    pooled_log_posterior,
    tempered_log_posterior,
)


def overconfident(n=4000, factor=3.0, seed=0):
    """Two Gaussian classes (means -1 and 1, unit variance): the true log-likelihood
    ratio is ``2 s``; the 'model' reports ``factor`` times it."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    s = rng.normal(size=n) + (2 * y - 1)
    true = np.column_stack([-s, s])  # log p(x | c) up to a shared term
    return y, true, factor * true


def test_tempered_posterior_is_normalised_and_equals_bayes_at_one():
    y, true, _ = overconfident(50)
    prior = np.log([0.3, 0.7])
    at_one = tempered_log_posterior(true, prior, 1.0)
    z = true + prior
    np.testing.assert_allclose(at_one, z - logsumexp(z, axis=1, keepdims=True))
    for t in (1.0, 2.5, 16.0):
        np.testing.assert_allclose(
            logsumexp(tempered_log_posterior(true, prior, t), axis=1), 0, atol=1e-12
        )


def test_pooled_posterior_is_the_linear_pool():
    y, true, model = overconfident(50)
    prior = np.log([0.5, 0.5])
    joint = tempered_log_posterior(true, prior, 1.0)
    pool = pooled_log_posterior(model, prior, joint, 0.3, 2.0)
    expected = 0.3 * np.exp(tempered_log_posterior(model, prior, 2.0)) + 0.7 * np.exp(joint)
    np.testing.assert_allclose(np.exp(pool), expected)
    np.testing.assert_allclose(
        pooled_log_posterior(model, prior, None, 1.0, 2.0),
        tempered_log_posterior(model, prior, 2.0),
    )
    np.testing.assert_allclose(pooled_log_posterior(model, prior, joint, 0.0, 2.0), joint)


def test_choose_pool_recovers_the_temperature_of_an_overconfident_model():
    y, _, model = overconfident(factor=3.0)
    (w, t), scores = choose_pool(model, np.log([0.5, 0.5]), None, y, np.ones(len(y)), (1, 1))
    assert w == 1.0 and abs(t - 3.0) < 0.3
    assert scores["chosen"] < scores["default"] - 0.1


def test_choose_pool_keeps_the_default_when_the_model_is_calibrated():
    y, true, _ = overconfident(factor=1.0, seed=1)
    (w, t), scores = choose_pool(true, np.log([0.5, 0.5]), None, y, np.ones(len(y)), (1, 1))
    assert (w, t) == (1, 1)  # any gain of the minimiser is within noise
    assert scores["default"] - scores["chosen"] < 1e-3


def test_choose_pool_never_sharpens():
    y, true, _ = overconfident(factor=0.3, seed=2)  # underconfident: T < 1 would help
    (_, t), _ = choose_pool(true, np.log([0.5, 0.5]), None, y, np.ones(len(y)), (1, 1))
    assert t >= TEMPERATURE_BOUNDS[0] == 1.0


def test_choose_pool_weighs_the_better_model():
    """A calibrated joint posterior against an uninformative per-class one: the weight
    goes to the joint model."""
    y, true, _ = overconfident(seed=3)
    prior = np.log([0.5, 0.5])
    joint = tempered_log_posterior(true, prior, 1.0)
    noise = np.random.default_rng(3).normal(size=true.shape)
    (w, _), scores = choose_pool(noise, prior, joint, y, np.ones(len(y)), (0.5, 1.0))
    assert w < 0.1 and scores["chosen"] < scores["default"]


def test_choose_pool_counts_weights_as_repeated_rows():
    y, _, model = overconfident(n=600, seed=4)
    prior = np.log([0.5, 0.5])
    w = np.random.default_rng(4).integers(1, 4, len(y)).astype(float)
    rows = np.repeat(np.arange(len(y)), w.astype(int))
    a = choose_pool(model, prior, None, y, w, (1, 1))
    b = choose_pool(model[rows], prior, None, y[rows], np.ones(rows.size), (1, 1))
    assert a[0] == b[0] or np.allclose(a[0], b[0], rtol=1e-3)
    np.testing.assert_allclose(list(a[1].values()), list(b[1].values()), rtol=1e-6)
