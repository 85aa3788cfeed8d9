"""Kernel embeddings for continuous data (Song, Parikh & Xing (NIPS 2011)): feature maps, covariance
operators,
the kernel tree metric and KernelLatentTree against exact continuous ground truth."""

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.kernel_approximation import Nystroem
from sklearn.model_selection import GridSearchCV

from ltm_sklearn import KernelLatentTree, SpectralLatentTree
from ltm_sklearn._algorithms.spectral import spectral_log_abs
from ltm_sklearn._algorithms.structure import (
    gaussian_distance,
    kernel_distance,
    neighbor_joining,
    nonparanormal_distance,
)
from ltm_sklearn._engine.kernel_features import KernelMoments, RBFFeatureMap, rbf_features
from ltm_sklearn.datasets import (
    GaussianLeafTreeModel,
    LatentTreeModel,
    balanced_binary_tree,
    random_binary_tree,
    sample_sign_flip_tree,
)
from ltm_sklearn.metrics import robinson_foulds


def skewed_data(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    return np.column_stack([rng.standard_normal(n), np.exp(rng.standard_normal(n))])


# ---------------------------------------------------------------------- feature maps
def test_features_reproduce_the_normalised_kernel_and_sklearn_nystroem():
    X = skewed_data()
    fmap = RBFFeatureMap(n_components=40).fit(X)
    for j in range(2):
        h, L = fmap.bandwidths_[j], fmap.landmarks_[j]
        x = np.linspace(L.min(), L.max(), 200)  # within the landmarks (spaced <= h)
        F = fmap.transform_column(j, x)
        exact = np.exp(-((x[:, None] - x[None, :]) ** 2) / (2 * h * h)) / np.sqrt(2 * np.pi * h * h)
        assert np.abs(F @ F.T - exact).max() < 0.01 * exact.max()
        # Nystroem: exact on the landmarks; elsewhere scikit-learn's map on the same
        # landmarks gives the same kernel up to the dropped eigen-directions (< 1e-9)
        c = np.sqrt(2 * np.pi * h * h)
        FL = fmap.transform_column(j, L)
        K = np.exp(-((L[:, None] - L[None, :]) ** 2) / (2 * h * h))
        np.testing.assert_allclose(FL @ FL.T * c, K, atol=1e-8)
        ny = Nystroem(gamma=1 / (2 * h * h), n_components=L.size).fit(L[:, None])
        G = ny.transform(x[:, None])
        np.testing.assert_allclose(F @ F.T * c, G @ G.T, atol=1e-3)


def test_feature_integrals_are_exact():
    X = skewed_data()
    fmap = RBFFeatureMap(n_components=30, bandwidth_scale=0.5).fit(X)
    for j in range(2):
        h = fmap.bandwidths_[j]
        g = np.linspace(X[:, j].min() - 10 * h, X[:, j].max() + 10 * h, 20001)
        F = fmap.transform_column(j, g)
        np.testing.assert_allclose(np.trapezoid(F, g, axis=0), fmap.integrals_[j], atol=1e-8)
        np.testing.assert_allclose(
            np.trapezoid(g[:, None] * F, g, axis=0), fmap.first_moments_[j], atol=1e-7
        )


def test_weights_equal_repeated_rows():
    X = skewed_data(500)
    w = np.random.default_rng(1).integers(0, 3, size=500).astype(float)
    rep = np.repeat(X, w.astype(int), axis=0)
    a, b = RBFFeatureMap(20).fit(X, w), RBFFeatureMap(20).fit(rep)
    assert a.bandwidths_ == b.bandwidths_
    for la, lb in zip(a.landmarks_, b.landmarks_):
        np.testing.assert_array_equal(la, lb)
    ma, mb = KernelMoments(a, X, w), KernelMoments(b, rep)
    np.testing.assert_allclose(ma.pair(0, 1), mb.pair(0, 1), atol=1e-12)
    np.testing.assert_allclose(ma.covariance()[0], mb.covariance()[0], atol=1e-12)


def test_the_chosen_bandwidths_and_model_are_those_of_repeated_rows():
    # the held-out split of the bandwidth choice is keyed on the values: an integer
    # weight and as many copies of a row, in any order, give the same model
    rng = np.random.default_rng(2)
    X = np.column_stack([skewed_data(300, seed=3), rng.standard_normal(300)])
    X[:, 1] += X[:, 0]
    w = rng.integers(0, 4, size=300)
    rep = np.repeat(X, w, axis=0)
    order = rng.permutation(len(rep))
    kw = dict(hidden="discrete", structure="chow_liu", random_state=0)
    a = KernelLatentTree(2, **kw).fit(X, sample_weight=w.astype(float))
    b = KernelLatentTree(2, **kw).fit(rep)
    c = KernelLatentTree(2, **kw).fit(rep[order])
    # the same choices: the column scales are the same bits (summed over the distinct
    # values), so are the bump centres
    np.testing.assert_array_equal(a.bandwidths_, b.bandwidths_)
    np.testing.assert_array_equal(a.bandwidths_, c.bandwidths_)
    for ca, cb in zip(a.centers_, c.centers_):
        np.testing.assert_array_equal(ca, cb)
    T = np.column_stack([skewed_data(50, seed=4), rng.standard_normal(50)])
    np.testing.assert_allclose(a.score_samples(T), b.score_samples(T), atol=1e-8)
    np.testing.assert_allclose(a.score_samples(T), c.score_samples(T), atol=1e-8)


def test_the_moment_estimate_does_not_depend_on_the_row_order():
    # wine's values have two decimals: a value midway between two bump centres took the
    # nearer one by the last bit of the column's scale, which moved with the row order
    # (a test row by 0.6 nats)
    from sklearn.datasets import load_wine

    X = load_wine().data[::2]
    order = np.random.default_rng(7).permutation(len(X))
    kw = dict(hidden="discrete", structure="me", n_hidden_states=2, max_iter=0, random_state=0)
    a = KernelLatentTree(**kw).fit(X)
    b = KernelLatentTree(**kw).fit(X[order])
    np.testing.assert_allclose(a.score_samples(X), b.score_samples(X), atol=1e-10)


def test_kernel_moments_match_direct_formulas_with_missing_entries():
    rng = np.random.default_rng(0)
    X = np.column_stack([skewed_data(2000), rng.standard_normal(2000)])
    X[rng.random(X.shape) < 0.1] = np.nan
    w = rng.uniform(0.5, 2.0, size=2000)
    fmap = RBFFeatureMap(15).fit(X, w)
    mom = KernelMoments(fmap, X, w)
    feats = [fmap.transform_column(j, X[:, j]) for j in range(3)]
    obs = ~np.isnan(X)
    both = w * obs[:, 0] * obs[:, 1]
    direct = np.einsum("n,na,nb->ab", both, feats[0], feats[1]) / both.sum()
    np.testing.assert_allclose(mom.pair(0, 1), direct, atol=1e-12)
    np.testing.assert_allclose(mom.pair(1, 0), direct.T, atol=1e-12)
    B = [rng.standard_normal((2, f.shape[1])) for f in feats]
    all3 = w * obs.all(axis=1)
    direct3 = (
        np.einsum("n,na,nb,nc->abc", all3, feats[0] @ B[0].T, feats[1] @ B[1].T, feats[2] @ B[2].T)
        / all3.sum()
    )
    (got,) = mom.projected([((0, 1, 2), tuple(B))])
    np.testing.assert_allclose(got, direct3, atol=1e-12)
    mom.gram()  # pairs read from the cached Gram give the same operators
    np.testing.assert_allclose(mom.pair(0, 1), direct, atol=1e-12)


def test_rbf_features_are_centred_and_reject_bad_input():
    X = np.random.default_rng(0).standard_normal((3000, 3))
    feats = rbf_features(X, n_components=40)
    assert len(feats) == 3 and feats[0].shape[0] == 3000
    np.testing.assert_allclose(feats[1].mean(axis=0), 0.0, atol=1e-12)
    with pytest.raises(TypeError, match="numeric"):
        rbf_features(np.array([["a", "b"], ["c", "d"]]))
    with pytest.raises(ValueError, match="finite"):
        rbf_features(np.array([[0.0, np.nan], [1.0, 2.0]]))


# ---------------------------------------------------------------------- structure
def test_kernel_metric_recovers_uncorrelated_tree_where_gaussian_fails():
    """Song, Parikh & Xing (NIPS 2011)'s process (zero correlations): 16-leaf balanced tree, N =
    2,000."""
    tree = balanced_binary_tree(16)
    exact = {"kernel": 0, "gaussian": 0, "nonparanormal": 0}
    for seed in range(5):
        X = sample_sign_flip_tree(tree, 2000, sigma=0.3, random_state=seed)
        feats = rbf_features(X, n_components=50)
        exact["kernel"] += robinson_foulds(neighbor_joining(kernel_distance(feats, 1)), tree) == 0
        for name, metric in (
            ("gaussian", gaussian_distance),
            ("nonparanormal", nonparanormal_distance),
        ):
            exact[name] += robinson_foulds(neighbor_joining(metric(X)), tree) == 0
    assert exact["kernel"] >= 4
    assert exact["gaussian"] == 0 and exact["nonparanormal"] == 0


@pytest.mark.slow
def test_defaults_recover_the_sign_flip_tree():
    """The default metric rank (n_hidden_states - 1 for centred operators) and the
    minimum-evolution search (the structure to read the tree) recover Song, Parikh & Xing
    (NIPS 2011)'s 16-leaf tree at N = 2,000."""
    tree = balanced_binary_tree(16)
    exact = 0
    for seed in range(5):
        X = sample_sign_flip_tree(tree, 2000, sigma=0.3, random_state=seed)
        exact += (
            robinson_foulds(KernelLatentTree(structure="me", hidden="discrete").fit(X).tree_, tree)
            == 0
        )
    assert exact >= 4


@pytest.mark.slow
def test_estimator_structure_options():
    tree = balanced_binary_tree(8)
    X = sample_sign_flip_tree(tree, 2000, sigma=0.3, random_state=0)
    assert (
        robinson_foulds(KernelLatentTree(1, structure="me", hidden="discrete").fit(X).tree_, tree)
        == 0
    )
    for structure in ("clnj", "gaussian", "nonparanormal", "star"):
        est = KernelLatentTree(1, structure=structure, hidden="discrete").fit(X)
        assert est.tree_.n_observed == 8 and np.all(np.isfinite(est.score_samples(X[:50])))


# ---------------------------------------------------------------------- density
@pytest.mark.parametrize("tree", [balanced_binary_tree(8), random_binary_tree(9, random_state=1)])
def test_one_hot_limit_equals_the_discrete_spectral_algorithm(tree):
    """Song, Parikh & Xing (NIPS 2011): with one-hot features the kernel algorithm is the discrete
    one. Binary
    columns and a bandwidth of 0.05 make the features c * one-hot, so the log-density at
    a configuration is log P_spectral(x) - sum_j log(2 pi h_j^2) / 2."""
    model = LatentTreeModel.random(tree, 2, 2, random_state=0)
    X = model.sample(5000, random_state=0).astype(float)
    kern = KernelLatentTree(2, tree=tree, hidden="discrete", bandwidth_scale=0.05).fit(X)
    spec = SpectralLatentTree(2, tree=tree, max_iter=0).fit(X)
    configs = model.all_configurations()
    _, a = spectral_log_abs(kern.raw_estimate_, kern._encode(configs))
    _, b = spec.raw_log_abs(configs)
    h = np.asarray(kern.feature_map_.bandwidths_)
    np.testing.assert_allclose(a + 0.5 * np.log(2 * np.pi * h**2).sum(), b, atol=1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("scale", [1.0, 0.3])
def test_density_integrates_to_one_and_nan_marginalises(scale):
    truth = GaussianLeafTreeModel.random(balanced_binary_tree(3), 2, random_state=0)
    X = truth.sample(3000, random_state=1)
    est = KernelLatentTree(2, bandwidth_scale=scale, hidden="discrete").fit(X)
    h = est.bandwidths_
    grids = [np.linspace(lo, hi, 80) for lo, hi in zip(X.min(0) - 5 * h, X.max(0) + 5 * h)]
    G = np.stack(np.meshgrid(*grids, indexing="ij"), axis=-1).reshape(-1, 3)
    cell = np.prod([g[1] - g[0] for g in grids])
    assert abs(np.exp(est.score_samples(G)).sum() * cell - 1.0) < 0.01
    # NaN marginalises the estimate exactly: the integral over the column (computed on the
    # signed estimate, before the floor, in the standardised units the model works in)
    rows = X[:5].copy()
    g = grids[1]
    filled = np.repeat(rows, g.size, axis=0)
    filled[:, 1] = np.tile(g, 5)
    sign, logabs = spectral_log_abs(est.raw_estimate_, est._encode(filled))
    dz = (g[1] - g[0]) / est.scale_[1]
    numeric = (sign * np.exp(logabs)).reshape(5, -1).sum(axis=1) * dz
    rows[:, 1] = np.nan
    sign, logabs = spectral_log_abs(est.raw_estimate_, est._encode(rows))
    np.testing.assert_allclose(sign * np.exp(logabs), numeric, rtol=1e-3)


def test_explicit_density_integrates_to_one_and_marginalises_nan_exactly():
    truth = GaussianLeafTreeModel.random(balanced_binary_tree(3), 2, random_state=0)
    X = truth.sample(3000, random_state=1)
    est = KernelLatentTree(2, structure="me", hidden="discrete", random_state=0).fit(X)
    assert est.bandwidth_scores_ is not None and len(est.bandwidth_scores_) == 3
    # the joint of two columns (the third NaN) on a grid wide enough for the wide tail
    # bumps (3 sd), and every column's marginal (the others NaN) on a fine line
    lo, hi = X.mean(0) - 16 * est.scale_, X.mean(0) + 16 * est.scale_
    grids = [np.linspace(a, b, 800) for a, b in zip(lo[:2], hi[:2])]
    G = np.stack(np.meshgrid(*grids, indexing="ij"), axis=-1).reshape(-1, 2)
    G = np.column_stack([G, np.full(len(G), np.nan)])
    cell = np.prod([g[1] - g[0] for g in grids])
    assert abs(np.exp(est.score_samples(G)).sum() * cell - 1.0) < 1e-6
    for j in range(3):
        line = np.full((40000, 3), np.nan)
        line[:, j] = np.linspace(lo[j], hi[j], 40000)
        mass = np.exp(est.score_samples(line)).sum() * (line[1, j] - line[0, j])
        assert abs(mass - 1.0) < 1e-6
    rows = X[:5].copy()
    g = np.linspace(lo[1], hi[1], 40000)
    filled = np.repeat(rows, g.size, axis=0)
    filled[:, 1] = np.tile(g, 5)
    numeric = np.exp(est.score_samples(filled)).reshape(5, -1).sum(axis=1) * (g[1] - g[0])
    rows[:, 1] = np.nan
    np.testing.assert_allclose(np.exp(est.score_samples(rows)), numeric, rtol=1e-6)
    # sampling follows the model: the sample's mean log-density is the model's entropy
    S = est.sample(20000, random_state=0)
    T = truth.sample(20000, random_state=5)
    assert abs(est.score(S) - est.score(T)) < 0.1


@pytest.mark.slow
def test_raw_estimate_converges_to_the_smoothed_truth_and_the_model_to_the_truth():
    """The raw kernel estimate targets the truth convolved with the kernels (a KDE's
    limit, exact for Gaussian-mixture leaves); the explicit model, whose leaves are
    mixtures of bumps with fitted weights, targets the truth itself: both held-out gaps
    shrink with N (measured: raw 0.039 / 0.002 / 0.0002, explicit 0.36 / 0.042 / 0.027)."""
    truth = GaussianLeafTreeModel.random(balanced_binary_tree(8), 3, random_state=0)
    X_test = truth.sample(3000, random_state=99)
    raw_gaps, gaps = [], []
    for n in (500, 5_000, 50_000):
        X = truth.sample(n, random_state=n)
        est = KernelLatentTree(3, structure="me", bandwidth_scale=0.5, hidden="discrete").fit(X)
        smooth = truth.smoothed(est.bandwidths_)
        sign, log_abs = est.raw_log_abs(X_test)
        ok = sign > 0
        raw_gaps.append(smooth.log_likelihood(X_test)[ok].mean() - log_abs[ok].mean())
        model = KernelLatentTree(3, structure="me", random_state=0, hidden="discrete").fit(X)
        gaps.append(truth.log_likelihood(X_test).mean() - model.score(X_test))
    assert raw_gaps[0] > raw_gaps[2] and abs(raw_gaps[2]) < 0.005, raw_gaps
    assert gaps[0] > gaps[1] > gaps[2] > 0 and gaps[2] < 0.04, gaps


@pytest.mark.slow
@pytest.mark.parametrize("d", [2, 3])
def test_grid_search_picks_the_number_of_hidden_states(d):
    """Song, Parikh & Xing (NIPS 2011) section 6 model selection: discrete hidden nodes with d
    states,
    Gaussian-mixture leaves; held-out likelihood over n_hidden_states = 1..6."""
    truth = GaussianLeafTreeModel.random(balanced_binary_tree(8), d, random_state=0)
    X = truth.sample(4000, random_state=10)
    grid = {"n_hidden_states": [1, 2, 3, 4, 5, 6]}
    search = GridSearchCV(
        KernelLatentTree(structure="me", random_state=0, hidden="discrete"), grid, cv=3
    ).fit(X)
    assert search.best_params_["n_hidden_states"] == d


@pytest.mark.slow
@pytest.mark.parametrize("d", [2, 3])
def test_auto_hidden_states_picks_the_number_of_hidden_states(d):
    # the same truths as the grid search above, chosen inside fit on held-out rows
    truth = GaussianLeafTreeModel.random(balanced_binary_tree(8), d, random_state=0)
    X = truth.sample(4000, random_state=10)
    est = KernelLatentTree("auto", structure="me", random_state=0, hidden="discrete").fit(X)
    assert est.n_hidden_states_ == d
    # the held-out curve: fewer states than the truth lose clearly, more gain nothing
    # beyond noise (the held-out rows are keyed on the standardised values; with the
    # column scales summed over distinct values the split moved, and k' = 8 scored
    # 0.005 nats per row above the truth's 3, k' = 2 1.55 below it)
    scores = est.n_hidden_states_scores_
    assert all(scores[k] < scores[d] - 0.5 for k in scores if k < d)
    assert all(scores[k] < scores[d] + 0.01 for k in scores if k > d)


@pytest.mark.slow  # about 3 s
def test_auto_hidden_states_with_the_auto_structure():
    truth = GaussianLeafTreeModel.random(balanced_binary_tree(4), 2, random_state=0)
    X = truth.sample(600, random_state=1)
    est = KernelLatentTree("auto", hidden="discrete", random_state=0).fit(X)
    assert est.n_hidden_states_ in est.n_hidden_states_scores_
    assert est.structure_ in est.structure_scores_
    assert np.isfinite(est.score(X))


@pytest.mark.slow
def test_conditional_mean_matches_the_truth():
    # the explicit model's conditional means against the exact ones of the true density
    # (measured mean absolute difference 0.012, with 3 columns missing too)
    truth = GaussianLeafTreeModel.random(balanced_binary_tree(8), 3, random_state=0)
    X = truth.sample(20000, random_state=1)
    Q = truth.sample(300, random_state=2)
    est = KernelLatentTree(3, random_state=0, hidden="discrete").fit(X)
    g = np.linspace(X[:, 0].min() - 3, X[:, 0].max() + 3, 600)

    def exact_mean(rows):  # int x p(x, rest) dx / int p(x, rest) dx on a fine grid
        filled = np.repeat(rows, g.size, axis=0)
        filled[:, 0] = np.tile(g, len(rows))
        lp = truth.log_likelihood(filled).reshape(len(rows), -1)
        w = np.exp(lp - lp.max(axis=1, keepdims=True))
        return (w * g).sum(axis=1) / w.sum(axis=1)

    marginal_error = np.abs(Q[:, 0] - X[:, 0].mean()).mean()
    for hide in (False, True):
        rows = Q.copy()
        if hide:
            rows[:, 3:6] = np.nan
        pred = est.conditional_mean(rows, target=0)
        assert np.abs(pred - exact_mean(rows)).mean() < 0.03
        assert np.abs(pred - Q[:, 0]).mean() < 0.5 * marginal_error


def test_pandas_names_and_clear_errors():
    truth = GaussianLeafTreeModel.random(balanced_binary_tree(4), 2, random_state=0)
    X = pd.DataFrame(truth.sample(500, random_state=0), columns=list("abcd"))
    est = KernelLatentTree(2, hidden="discrete").fit(X)
    assert list(est.feature_names_in_) == list("abcd")
    assert est.conditional_mean(X.iloc[:5], target="c").shape == (5,)
    labels = np.array([["a", "1.0"], ["b", "2.0"]] * 5, dtype=object)
    with pytest.raises(TypeError, match="column 0 is modelled as continuous.*'a'"):
        KernelLatentTree(categorical_features=None).fit(labels)
    with pytest.raises(ValueError, match="infinity"):
        KernelLatentTree().fit(np.where(np.eye(4, dtype=bool), np.inf, 1.0))
    with pytest.raises(TypeError, match="conditional_mean"):
        est.conditional_proba(X.iloc[:5], target="c")
    with pytest.raises(ValueError, match="target"):
        est.conditional_mean(X.iloc[:5], target=7)


def test_convergence_warning_points_at_the_caller():
    X = GaussianLeafTreeModel.random(balanced_binary_tree(4), 2, random_state=0).sample(500)
    with pytest.warns(ConvergenceWarning) as record:
        KernelLatentTree(2, hidden="discrete", max_iter=2, random_state=0).fit(X)
    assert len(record) == 1 and record[0].filename == __file__


def test_values_far_beyond_the_data_score_finite():
    # from about 1e154 bandwidths the bumps' squared distances overflow, all of a row's
    rng = np.random.RandomState(0)
    X = rng.randn(200, 1) @ rng.randn(1, 4) + 0.5 * rng.randn(200, 4)
    far = X[:2].copy()
    far[0, 0], far[1, 2] = 1e200, -1e300
    est = KernelLatentTree(hidden="discrete", structure="star", random_state=0).fit(X)
    scores = est.score_samples(far)
    assert np.all(np.isfinite(scores)) and np.all(scores < -1e6)


def test_columns_never_observed_together_fit_every_structure():
    # a table merged from two sources: rows 0-149 lack column 2, rows 150-299 column 3,
    # so no row observes both (their triple moments have no rows)
    rng = np.random.default_rng(0)
    z = rng.normal(size=300)
    X = np.column_stack([z + 0.3 * rng.normal(size=300) for _ in range(4)])
    X[:150, 2] = np.nan
    X[150:, 3] = np.nan
    for structure in ("me", "star", "chow_liu"):
        est = KernelLatentTree(hidden="discrete", structure=structure, random_state=0)
        scores = est.fit(X).score_samples(X)
        assert np.all(np.isfinite(scores)), structure


def test_bandwidths_out_of_range_and_the_gaussian_moment_estimate_are_refused():
    X = np.random.default_rng(0).normal(size=(100, 3))
    for bad in (np.inf, 1e-300):
        with pytest.raises(ValueError, match="bandwidth of column 2 is"):
            KernelLatentTree(bandwidth=[1.0, 1.0, bad]).fit(X)
    with pytest.raises(ValueError, match="max_iter=0 keeps the moment estimate"):
        KernelLatentTree(hidden="gaussian", max_iter=0).fit(X)


def test_hidden_states_are_checked_on_weights_as_on_repeated_rows():
    # 600 rows of 27 distinct ones: k' = 20 is estimable from the rows, and from the
    # distinct rows weighted by their counts
    rng = np.random.default_rng(0)
    z = rng.integers(0, 3, 600)
    X = np.column_stack([np.clip(z + rng.integers(-1, 2, 600), 0, 2) for _ in range(3)])
    U, counts = np.unique(X, axis=0, return_counts=True)
    est = SpectralLatentTree(20, structure="star", random_state=0)
    repeated = est.fit(X).score(X)
    weighted = est.fit(U, sample_weight=counts).score(X)
    assert weighted == pytest.approx(repeated, abs=1e-9)


def test_rows_all_identical_fit_the_discrete_form_without_an_error():
    # one distinct row: nothing to hold out for the choice of the form (the Gaussian
    # form was fitted on the split's one row and raised about "1 sample(s)")
    X = np.tile(np.array([[0.5, 1.0, 2.0, 1.5]]), (2000, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the columns of one value each warn
        est = KernelLatentTree(random_state=0, n_jobs=1).fit(X)
    assert est.hidden_ == "discrete" and np.isfinite(est.score(X))
