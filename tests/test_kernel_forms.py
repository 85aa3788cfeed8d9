"""KernelLatentTree's forms of hidden variables: discrete, Gaussian, and the choice."""

import numpy as np
import pandas as pd
import pytest

from ltm_sklearn import GaussianLatentTree, KernelLatentTree
from ltm_sklearn.datasets import (
    GaussianLatentTreeModel,
    GaussianLeafTreeModel,
    balanced_binary_tree,
)


def _numerical_moments(est, row, j, lo, hi, n=8001):
    """Conditional mean and variance of column ``j`` given the rest of ``row``, by the
    trapezoid rule on ``score_samples`` over a grid (and the mass of the grid)."""
    grid = np.linspace(lo, hi, n)
    rows = np.repeat(row[None, :], n, axis=0)
    rows[:, j] = grid
    dens = np.exp(est.score_samples(rows))
    mass = np.trapezoid(dens, grid)
    mean = np.trapezoid(grid * dens, grid) / mass
    return mean, np.trapezoid((grid - mean) ** 2 * dens, grid) / mass


@pytest.fixture(scope="module")
def gaussian_truth():
    return GaussianLatentTreeModel.random(balanced_binary_tree(6), random_state=0)


@pytest.fixture(scope="module")
def leaf_truth():
    return GaussianLeafTreeModel.random(balanced_binary_tree(6), 2, random_state=0)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("truth", "form"), [("gaussian_truth", "gaussian"), ("leaf_truth", "discrete")]
)
def test_auto_picks_the_form_of_the_truth(truth, form, request):
    truth = request.getfixturevalue(truth)
    X = truth.sample(3000, random_state=1)
    X_test = truth.sample(2000, random_state=2)
    est = KernelLatentTree(hidden="auto", random_state=0).fit(X)
    assert est.hidden_ == form
    assert set(est.hidden_scores_) == {"discrete", "gaussian"}
    other = {"gaussian": "discrete", "discrete": "gaussian"}[form]
    assert est.hidden_scores_[form] > est.hidden_scores_[other]
    # the chosen form is re-fitted on all rows: the same model as fitting it directly
    direct = KernelLatentTree(hidden=form, random_state=0).fit(X)
    np.testing.assert_allclose(est.score_samples(X_test), direct.score_samples(X_test))
    gap = truth.log_likelihood(X_test).mean() - est.score(X_test)
    assert 0 <= gap < 0.05


@pytest.mark.slow
def test_gaussian_form_is_the_gaussian_latent_tree(gaussian_truth):
    X = gaussian_truth.sample(1500, random_state=3)
    X[::7, 2] = np.nan
    est = KernelLatentTree(hidden="gaussian", random_state=0).fit(X)
    ref = GaussianLatentTree(random_state=0).fit(X)
    Q = gaussian_truth.sample(50, random_state=4)
    Q[::3, 1] = np.nan
    np.testing.assert_allclose(est.score_samples(Q), ref.score_samples(Q))
    np.testing.assert_allclose(est.conditional_mean(Q, 0), ref.conditional_mean(Q, 0))
    np.testing.assert_allclose(est.conditional_variance(Q, 0), ref.conditional_variance(Q, 0))
    np.testing.assert_allclose(est.predict_proba(Q), ref.predict_proba(Q))
    np.testing.assert_array_equal(est.sample(5, random_state=0), ref.sample(5, random_state=0))
    assert est.hidden_ == "gaussian" and est.hidden_scores_ == {}
    assert est.tree_.edges == ref.tree_.edges
    assert est.raw_log_abs(Q) is None
    # its hidden variables are continuous, with no states: no predict_hidden_proba, as
    # hasattr tells (scikit-learn's available_if)
    assert not hasattr(est, "predict_hidden_proba")
    with pytest.raises(AttributeError, match="predict_hidden_proba"):
        est.predict_hidden_proba(Q)
    assert hasattr(KernelLatentTree(), "predict_hidden_proba")  # unfitted: not fitted yet
    # a re-fit in the discrete form forgets the Gaussian one
    est.set_params(hidden="discrete").fit(X)
    assert not hasattr(est, "gaussian_model_") and est.hidden_ == "discrete"
    assert est.predict_hidden_proba(Q).shape[0] == len(Q)


def test_gaussian_form_uses_a_given_tree_and_feature_names(gaussian_truth):
    X = pd.DataFrame(gaussian_truth.sample(800, random_state=5), columns=list("abcdef"))
    tree = balanced_binary_tree(6)
    est = KernelLatentTree(hidden="gaussian", tree=tree, random_state=0).fit(X)
    assert est.structure_ == "given"
    assert est.tree_.feature_names == list("abcdef")
    np.testing.assert_allclose(
        est.conditional_mean(X.iloc[:4], "c"), est.conditional_mean(X.iloc[:4], 2)
    )
    with pytest.raises(ValueError, match="feature names"):
        est.score_samples(X.rename(columns={"a": "z"}))


@pytest.mark.slow
@pytest.mark.parametrize("hidden", ["discrete", "gaussian"])
def test_conditional_moments_match_numerical_integration(hidden, leaf_truth):
    X = leaf_truth.sample(1500, random_state=6)
    est = KernelLatentTree(hidden=hidden, random_state=0).fit(X)
    Q = leaf_truth.sample(4, random_state=7)
    Q[1, 4] = np.nan  # a missing entry among the conditioning columns
    # the wide bump of every column has 3 standard deviations: its tails reach far
    lo, hi = X[:, 3].mean() - 30 * X[:, 3].std(), X[:, 3].mean() + 30 * X[:, 3].std()
    mean, var = est.conditional_mean(Q, 3), est.conditional_variance(Q, 3)
    for i, row in enumerate(Q):
        m, v = _numerical_moments(est, row, 3, lo, hi)
        assert mean[i] == pytest.approx(m, rel=1e-7, abs=1e-9)
        assert var[i] == pytest.approx(v, rel=1e-7)
    assert np.all(var > 0)


def test_mixed_tables_keep_the_discrete_form():
    rng = np.random.default_rng(0)
    X = pd.DataFrame(
        {
            "x": rng.normal(size=300),
            "y": rng.normal(size=300),
            "colour": pd.Categorical(rng.choice(["red", "blue"], 300)),
        }
    )
    est = KernelLatentTree(hidden="auto", random_state=0).fit(X)
    assert est.hidden_ == "discrete" and est.hidden_scores_ == {}
    assert np.isfinite(est.score(X))
    with pytest.raises(ValueError, match=r"hidden='gaussian'.*\['colour'\] are categorical"):
        KernelLatentTree(hidden="gaussian").fit(X)


def test_auto_keeps_the_discrete_form_on_too_few_rows():
    # the default: under 10 rows there are none to hold out, and the discrete form fits
    X = np.random.default_rng(0).normal(size=(6, 3))
    est = KernelLatentTree(random_state=0).fit(X)
    assert est.hidden_ == "discrete" and est.hidden_scores_ == {}
    assert np.isfinite(est.score(X))
    # the explicit forms still fit
    assert np.isfinite(KernelLatentTree(hidden="gaussian", random_state=0).fit(X).score(X))


@pytest.mark.parametrize(
    "case",
    [
        "constant",
        "duplicated",
        pytest.param("collinear", marks=pytest.mark.slow),
        "huge",
        "all-NaN",
        "inf",
    ],
)
def test_bad_columns_get_finite_fits_or_clear_errors(case):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    X[:, 1] += X[:, 0]
    if case == "constant":
        X[:, 2] = 5.0
    elif case == "duplicated":
        X[:, 2] = X[:, 0]
    elif case == "collinear":
        X[:, 2] = 2 * X[:, 0] - X[:, 1]
    elif case == "huge":
        X[:, 2] *= 1e9
    elif case == "all-NaN":
        X[:, 2] = np.nan
    else:
        X[5, 2] = np.inf
    est = KernelLatentTree(hidden="auto", random_state=0)
    if case == "all-NaN":
        with pytest.raises(ValueError, match="no observed value"):
            est.fit(X)
    elif case == "inf":
        with pytest.raises(ValueError, match="infinity"):
            est.fit(X)
    else:
        scores = est.fit(X).score_samples(X)
        assert np.all(np.isfinite(scores))
        assert all(np.isfinite(v) for v in est.hidden_scores_.values())


@pytest.mark.slow
def test_grid_search_over_the_form(gaussian_truth):
    from sklearn.model_selection import GridSearchCV

    X = gaussian_truth.sample(1500, random_state=9)
    grid = GridSearchCV(KernelLatentTree(random_state=0), {"hidden": ["discrete", "gaussian"]})
    grid.fit(X)
    assert grid.best_params_ == {"hidden": "gaussian"}
    assert grid.best_estimator_.hidden_ == "gaussian"


def test_auto_keeps_the_moment_estimate_of_the_discrete_form():
    # max_iter=0 is the discrete form's moment estimate: no Gaussian form to compare
    X = np.random.default_rng(0).normal(size=(200, 4))
    est = KernelLatentTree(max_iter=0, random_state=0).fit(X)
    assert est.hidden_ == "discrete" and est.n_iter_ == 0
    # and given bandwidths ask for the kernel model
    assert KernelLatentTree(bandwidth_scale=0.5, random_state=0).fit(X).hidden_ == "discrete"
