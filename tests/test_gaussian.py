"""Gaussian latent trees (continuous hidden variables): pure functions and the estimator,
against ground-truth models with exact densities."""

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.integrate import quad
from sklearn.metrics import adjusted_rand_score

from ltm_sklearn import GaussianLatentTree, LatentTree
from ltm_sklearn._algorithms.gaussian import (
    GaussianTreeParameters,
    component_statistics,
    fit_gaussian_tree,
    group_noise,
    joint_moments,
    leaf_groups,
    m_step,
    missing_patterns,
    mixture_log_density,
    moment_start,
    n_free_parameters,
    standardise_hidden,
)
from ltm_sklearn.datasets import (
    GaussianLatentTreeModel,
    balanced_binary_tree,
    random_binary_tree,
)
from ltm_sklearn.metrics import robinson_foulds
from ltm_sklearn.structure import pairwise_correlation


def _sem_covariance(tree, weight, noise):
    """Covariance of x = B x + e by the matrix formula (I - B)^-1 diag(s) (I - B)^-T."""
    n = tree.n_nodes
    B = np.zeros((n, n))
    for v in range(n):
        if tree.parent[v] >= 0:
            B[v, tree.parent[v]] = weight[v]
    A = np.linalg.inv(np.eye(n) - B)
    return A @ np.diag(noise) @ A.T


def test_joint_moments_match_the_matrix_formula():
    truth = GaussianLatentTreeModel.random(random_binary_tree(7, random_state=0), random_state=1)
    w, b, s, _ = truth.params.component(0)
    mean, cov = joint_moments(truth.tree, w, b, s)
    np.testing.assert_allclose(cov, _sem_covariance(truth.tree, w, s), atol=1e-12)
    X, hidden, _ = truth.sample(200_000, random_state=0, return_hidden=True)
    np.testing.assert_allclose(hidden.mean(0), mean, atol=0.03)


def test_standardise_hidden_keeps_the_columns_law():
    tree = balanced_binary_tree(6)
    rng = np.random.default_rng(0)
    w, b, s = (
        rng.normal(size=tree.n_nodes),
        rng.normal(size=tree.n_nodes),
        rng.uniform(0.2, 2, tree.n_nodes),
    )
    w[tree.root] = 0.0
    mean, cov = joint_moments(tree, w, b, s)
    w2, b2, s2 = standardise_hidden(tree, w, b, s)
    mean2, cov2 = joint_moments(tree, w2, b2, s2)
    d = tree.n_observed
    np.testing.assert_allclose(mean2[:d], mean[:d], atol=1e-12)
    np.testing.assert_allclose(cov2[:d, :d], cov[:d, :d], atol=1e-12)
    np.testing.assert_allclose(np.diag(cov2)[d:], 1.0, atol=1e-12)
    np.testing.assert_allclose(mean2[d:], 0.0, atol=1e-12)


def test_component_statistics_match_row_by_row_posteriors():
    """The expected statistics from the observed block's weighted scatter equal the sums
    of every row's Gaussian posterior (mean and covariance of the other nodes), with and
    without missing entries (one row entirely missing)."""
    tree = random_binary_tree(8, random_state=0)
    rng = np.random.default_rng(0)
    n, d = tree.n_nodes, tree.n_observed
    w, b, s = rng.uniform(0.3, 0.9, n), rng.normal(size=n), rng.uniform(0.2, 1.0, n)
    w[tree.root] = 0.0
    mean, cov = joint_moments(tree, w, b, s)
    for share in (0.0, 0.3):
        X = rng.normal(size=(60, d))
        X[rng.random(X.shape) < share] = np.nan
        if share:
            X[0] = np.nan
        resp = rng.random(len(X))
        total, s1, s2 = component_statistics(X, missing_patterns(X), mean, cov, d, resp)
        e1, e2 = np.zeros(n), np.zeros((n, n))
        for x, r in zip(X, resp):
            o = np.flatnonzero(~np.isnan(x))
            m = np.setdiff1d(np.arange(n), o)
            z, post = np.empty(n), np.zeros((n, n))
            z[o] = x[o]
            gain = np.linalg.solve(cov[np.ix_(o, o)], cov[np.ix_(o, m)]) if o.size else None
            z[m] = mean[m] + ((x[o] - mean[o]) @ gain if o.size else 0.0)
            post[np.ix_(m, m)] = cov[np.ix_(m, m)] - (cov[np.ix_(m, o)] @ gain if o.size else 0.0)
            e1 += r * z
            e2 += r * (np.outer(z, z) + post)
        assert total == pytest.approx(resp.sum())
        np.testing.assert_allclose(s1, e1, atol=1e-10)
        np.testing.assert_allclose(s2, e2, atol=1e-10)


def test_stacked_components_match_one_at_a_time(monkeypatch):
    """A mixture's components in one stacked pass give each component's own moments,
    densities, statistics, M-step and rescaling, with the row products kept or
    recomputed block by block, with and without missing entries."""
    from ltm_sklearn._algorithms import gaussian as gaussian_module
    from ltm_sklearn._algorithms.gaussian import _designs, component_log_density

    tree = random_binary_tree(7, random_state=1)
    rng = np.random.default_rng(1)
    K, n, d = 3, tree.n_nodes, tree.n_observed
    w, b = rng.uniform(-0.9, 0.9, (K, n)), rng.normal(size=(K, n))
    s = rng.uniform(0.2, 1.0, (K, n))
    w[:, tree.root] = 0.0
    mean, cov = joint_moments(tree, w, b, s)
    for k in range(K):
        mk, ck = joint_moments(tree, w[k], b[k], s[k])
        np.testing.assert_allclose(mean[k], mk, atol=1e-12)
        np.testing.assert_allclose(cov[k], ck, atol=1e-12)
    # blocks of 64 rows when the rows are read with matrix products: several a pattern
    monkeypatch.setattr(gaussian_module, "_BLOCK_ELEMENTS", 64)
    for share in (0.0, 0.2):
        X = rng.normal(size=(300, d))
        X[rng.random(X.shape) < share] = np.nan
        resp = rng.random((K, len(X)))
        patterns = missing_patterns(X)
        for designs in (_designs(X, patterns, cache=True), _designs(X, patterns)):
            dens = component_log_density(X, designs, mean, cov, d)
            stats = component_statistics(X, designs, mean, cov, d, resp)
            for k in range(K):
                one = component_log_density(X, patterns, mean[k], cov[k], d)
                np.testing.assert_allclose(dens[k], one, rtol=1e-10)
                # the residuals of the row itself, as a direct check of the expansion
                if share == 0.0:
                    resid = X - mean[k][:d]
                    prec = np.linalg.inv(cov[k][:d, :d])
                    quad = np.einsum("ij,jk,ik->i", resid, prec, resid)
                    logdet = np.linalg.slogdet(cov[k][:d, :d])[1]
                    direct = -0.5 * (quad + logdet + d * np.log(2 * np.pi))
                    np.testing.assert_allclose(one, direct, rtol=1e-10)
                single = component_statistics(X, patterns, mean[k], cov[k], d, resp[k])
                for a, e in zip(stats, single):
                    np.testing.assert_allclose(a[k], e, rtol=1e-10, atol=1e-10)
    total, s1, s2 = stats
    floor = np.full(n, 1e-6)
    stacked = m_step(tree, total, s1, s2, floor)
    rescaled = standardise_hidden(tree, *stacked)
    # a list of trees, one per component (here the same one), gives the same M-step
    for a, e in zip(m_step([tree] * K, total, s1, s2, floor), stacked):
        np.testing.assert_allclose(a, e, atol=1e-12)
    for a, e in zip(joint_moments([tree] * K, w, b, s), (mean, cov)):
        np.testing.assert_allclose(a, e, atol=1e-12)
    for k in range(K):
        one = m_step(tree, total[k], s1[k], s2[k], floor)
        for a, e in zip(stacked, one):
            np.testing.assert_allclose(a[k], e, atol=1e-12)
        for a, e in zip(rescaled, standardise_hidden(tree, *one)):
            np.testing.assert_allclose(a[k], e, atol=1e-12)


def test_moment_start_reproduces_exact_correlations():
    truth = GaussianLatentTreeModel.random(random_binary_tree(10, random_state=2), random_state=3)
    _, cov = truth.moments()
    d = truth.n_features
    sd = np.sqrt(np.diag(cov))
    corr = cov / np.outer(sd, sd)
    _, cov0 = joint_moments(truth.tree, *moment_start(truth.tree, corr[:d, :d]))
    np.testing.assert_allclose(cov0[:d, :d], corr[:d, :d], atol=1e-6)


def _standardised(X):
    return (X - X.mean(0)) / X.std(0), X.mean(0), X.std(0)


def test_em_gap_to_the_truth_shrinks_with_n():
    truth = GaussianLatentTreeModel.random(random_binary_tree(12, random_state=4), random_state=5)
    test = truth.sample(20_000, random_state=99)
    exact = truth.log_likelihood(test).mean()
    gaps = []
    for n in (500, 20_000):
        Z, mu, sd = _standardised(truth.sample(n, random_state=n))
        params, trace, converged = fit_gaussian_tree(Z, truth.tree)
        assert converged and np.all(np.diff(trace) > -1e-9)  # EM never decreases
        ll = mixture_log_density((test - mu) / sd, truth.tree, params)[0].mean() - np.log(sd).sum()
        gaps.append(exact - ll)
    assert 0 <= gaps[1] < gaps[0] / 5
    assert gaps[1] < 0.005


def test_em_continues_from_a_loose_fit():
    """``init``: EM stopped at a loose tolerance continues where it stopped and reaches
    the tight fit's likelihood."""
    truth = GaussianLatentTreeModel.random(
        random_binary_tree(10, random_state=2), n_components=2, random_state=3
    )
    Z, _, _ = _standardised(truth.sample(3_000, random_state=0))
    labels = (Z[:, 0] > 0).astype(int)
    loose, t1, _ = fit_gaussian_tree(Z, truth.tree, 2, labels=labels, tol=1e-2)
    tight, t2, _ = fit_gaussian_tree(Z, truth.tree, 2, labels=labels, tol=1e-7)
    more, t3, converged = fit_gaussian_tree(Z, truth.tree, 2, tol=1e-7, init=loose)
    assert converged and t3[0] == pytest.approx(t1[-1], abs=1e-10)
    assert np.all(np.diff(t3) > -1e-9) and t3[-1] > t1[-1] + 1e-4
    assert t3[-1] == pytest.approx(t2[-1], abs=1e-4)
    with pytest.raises(ValueError, match="init has 2 components of 18 nodes, not 3 of 18"):
        fit_gaussian_tree(Z, truth.tree, 3, init=loose)
    # a start on one shared tree continued with trees re-learned per component
    chain = LatentTree([(i, i + 1) for i in range(9)], n_observed=10)
    shared, _, _ = fit_gaussian_tree(Z, chain, 2, labels=labels, tol=1e-2)
    assert shared.trees is None
    mixed, trace, _ = fit_gaussian_tree(Z, chain, 2, init=shared, relearn_trees=True)
    assert len(mixed.trees) == 2 and np.all(np.diff(trace) > -1e-9)


@pytest.mark.slow
def test_structure_recovered_at_large_n():
    truth = GaussianLatentTreeModel.random(random_binary_tree(16, random_state=1), random_state=0)
    X = truth.sample(20_000, random_state=1)
    est = GaussianLatentTree(n_components=1, structure="me", random_state=0).fit(X)
    assert robinson_foulds(est.tree_, truth.tree) == 0
    assert abs(est.score(X) - truth.log_likelihood(X).mean()) < 0.01
    # the default compares it by BIC with the Chow-Liu trees, and keeps the latent tree
    auto = GaussianLatentTree(random_state=0).fit(X)
    assert auto.structure_ == "me" and auto.n_components_ == 1
    assert robinson_foulds(auto.tree_, truth.tree) == 0


@pytest.mark.slow
def test_mixture_of_trees_recovered():
    truth = GaussianLatentTreeModel.random(balanced_binary_tree(8), 3, random_state=0)
    X, _, comp = truth.sample(6000, random_state=1, return_hidden=True)
    test = truth.sample(10_000, random_state=2)
    est = GaussianLatentTree(structure="me", random_state=0).fit(X)  # components by BIC
    assert est.n_components_ == 3
    assert robinson_foulds(est.tree_, truth.tree) == 0
    assert adjusted_rand_score(comp, est.predict(X)) > 0.9
    assert truth.log_likelihood(test).mean() - est.score(test) < 0.05
    single = GaussianLatentTree(n_components=1, random_state=0).fit(X)
    assert est.score(test) > single.score(test) + 0.5


@pytest.mark.parametrize("n_components", [1, 2])
def test_density_integrates_to_one(n_components):
    tree = LatentTree([(0, 2), (1, 2)], n_observed=2)
    truth = GaussianLatentTreeModel.random(tree, n_components, random_state=3)
    est = GaussianLatentTree(n_components=n_components, tree=tree, random_state=0)
    est.fit(truth.sample(3000, random_state=0))
    lo, hi = est.center_ - 12 * est.scale_, est.center_ + 12 * est.scale_
    g0, g1 = np.linspace(lo[0], hi[0], 801), np.linspace(lo[1], hi[1], 801)
    grid = np.column_stack([np.repeat(g0, 801), np.tile(g1, 801)])
    dens = np.exp(est.score_samples(grid)).reshape(801, 801)
    mass = np.trapezoid(np.trapezoid(dens, g1, axis=1), g0)
    assert abs(mass - 1.0) < 1e-6


def test_missing_entries_marginalised_exactly():
    truth = GaussianLatentTreeModel.random(balanced_binary_tree(4), 2, random_state=7)
    est = GaussianLatentTree(n_components=2, random_state=0).fit(truth.sample(3000, random_state=0))
    row = truth.sample(1, random_state=5)[0]
    partial = row.copy()
    partial[1] = np.nan
    lo, hi = est.center_[1] - 15 * est.scale_[1], est.center_[1] + 15 * est.scale_[1]

    def full(v):
        r = row.copy()
        r[1] = v
        return np.exp(est.score_samples(r[None])[0])

    integral = quad(full, lo, hi, epsabs=0, epsrel=1e-11, limit=200)[0]
    np.testing.assert_allclose(np.exp(est.score_samples(partial[None])[0]), integral, rtol=1e-8)
    # conditional mean and variance of the missing entry, by the same integrals
    m1 = quad(lambda v: v * full(v), lo, hi, epsrel=1e-11, limit=200)[0] / integral
    m2 = quad(lambda v: v * v * full(v), lo, hi, epsrel=1e-11, limit=200)[0] / integral
    np.testing.assert_allclose(est.conditional_mean(partial[None], 1)[0], m1, rtol=1e-7)
    np.testing.assert_allclose(est.conditional_variance(partial[None], 1)[0], m2 - m1**2, rtol=1e-6)
    # a row with every entry missing has density 1 (log 0)
    assert abs(est.score_samples(np.full((1, 4), np.nan))[0]) < 1e-12


def test_sample_matches_the_fitted_moments():
    truth = GaussianLatentTreeModel.random(balanced_binary_tree(6), random_state=2)
    X = truth.sample(5000, random_state=0)
    est = GaussianLatentTree(n_components=1, random_state=0).fit(X)
    S = est.sample(200_000, random_state=1)
    np.testing.assert_allclose(S.mean(0), X.mean(0), atol=0.03 * X.std(0).max())
    np.testing.assert_allclose(
        np.corrcoef(S, rowvar=False), np.corrcoef(X, rowvar=False), atol=0.02
    )


def test_pairwise_correlation_with_missing_entries():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 4))
    X[:, 1] += X[:, 0]
    np.testing.assert_allclose(pairwise_correlation(X), np.corrcoef(X, rowvar=False), atol=1e-12)
    Xm = X.copy()
    Xm[rng.random(X.shape) < 0.2] = np.nan
    both = ~np.isnan(Xm[:, 0]) & ~np.isnan(Xm[:, 1])
    expected = np.corrcoef(Xm[both][:, :2], rowvar=False)[0, 1]
    np.testing.assert_allclose(pairwise_correlation(Xm)[0, 1], expected, atol=1e-12)


def test_fit_with_missing_entries_and_feature_names():
    truth = GaussianLatentTreeModel.random(balanced_binary_tree(8), random_state=0)
    X = truth.sample(4000, random_state=0)
    Xm = X.copy()
    Xm[np.random.default_rng(0).random(X.shape) < 0.1] = np.nan
    df = pd.DataFrame(Xm, columns=[f"c{i}" for i in range(8)])
    est = GaussianLatentTree(n_components=1, structure="me", random_state=0).fit(df)
    assert robinson_foulds(est.tree_, truth.tree) == 0
    assert truth.log_likelihood(X).mean() - est.score(pd.DataFrame(X, columns=df.columns)) < 0.02
    np.testing.assert_allclose(est.conditional_mean(df, "c3"), est.conditional_mean(df, 3))
    assert est.tree_.to_newick().count("c") == 8


@pytest.mark.slow
def test_bad_input_gets_clear_errors_or_finite_fits():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    X[:, 1] = X[:, 0] * 2 + 0.01 * rng.normal(size=300)
    all_nan = X.copy()
    all_nan[:, 2] = np.nan
    with pytest.raises(ValueError, match="only NaN"):
        GaussianLatentTree().fit(all_nan)
    with pytest.raises(ValueError, match="infinity|inf"):
        GaussianLatentTree().fit(np.where(X > 2, np.inf, X))
    with pytest.raises(ValueError, match="minimum of 2"):
        GaussianLatentTree().fit(X[:1])
    cases = {
        "constant": np.column_stack([X, np.full(300, 3.0)]),
        "duplicated": np.column_stack([X, X[:, 0]]),
        "collinear": np.column_stack([X, X[:, 0] - X[:, 3]]),
        "huge scale": X * np.array([1e12, 1.0, 1e-9, 1.0]),
    }
    for name, data in cases.items():
        est = GaussianLatentTree(random_state=0).fit(data)
        assert np.all(np.isfinite(est.score_samples(data))), name
        assert np.all(np.isfinite(est.conditional_mean(data, 0))), name
    # scale changes only shift the log-density by the log-Jacobian
    a = GaussianLatentTree(n_components=1, random_state=0).fit(X)
    b = GaussianLatentTree(n_components=1, random_state=0).fit(cases["huge scale"])
    shift = np.log([1e12, 1.0, 1e-9, 1.0]).sum()
    np.testing.assert_allclose(b.score(cases["huge scale"]), a.score(X) - shift, atol=1e-6)


def _skewed_rows(n, seed):
    """Columns exp(Gaussian latent tree): skewed margins, linear dependence on the log."""
    truth = GaussianLatentTreeModel.random(balanced_binary_tree(4), random_state=seed)
    return np.exp(0.5 * truth.sample(n, random_state=seed))


@pytest.mark.slow
def test_transform_kept_on_skewed_columns_and_normalised():
    X, test = _skewed_rows(4000, 0), _skewed_rows(4000, 0)[::-1]
    est = GaussianLatentTree(n_components=1, random_state=0).fit(X)
    plain = GaussianLatentTree(n_components=1, margins="none", random_state=0).fit(X)
    assert est.margins_ == "yeo-johnson" and np.all(est.lambdas_ < 1.0)
    assert est.score(test) > plain.score(test) + 0.5
    assert est.bic(X) < plain.bic(X)
    # two columns: the density on the original units integrates to one, checked as
    # int p(x0) dx0 = 1 (x1 marginalised as NaN) and int p(x0, x1) dx1 = p(x0)
    pair = GaussianLatentTree(n_components=2, margins="yeo-johnson", random_state=0)
    pair.fit(X[:, :2])
    assert np.all(pair.lambdas_ < 1.0)

    def dens(a, b):
        return np.exp(pair.score_samples(np.array([[a, b]]))[0])

    def integral(f, column):
        sd, mid = X[:, column].std(), np.median(X[:, column])
        cuts = [X[:, column].min() - 50 * sd, 0.0, mid, X[:, column].max(), 1e4 * sd + mid]
        return sum(
            quad(f, a, b, epsabs=1e-13, epsrel=1e-10, limit=500)[0] for a, b in zip(cuts, cuts[1:])
        )

    mass = integral(lambda a: dens(a, np.nan), 0)
    assert abs(mass - 1.0) < 1e-6
    for x0 in np.quantile(X[:, 0], [0.1, 0.5, 0.95]):
        inner = integral(lambda b, x0=x0: dens(x0, b), 1)
        np.testing.assert_allclose(inner, dens(x0, np.nan), rtol=1e-6)


def test_transformed_conditional_moments_and_sampling():
    X = _skewed_rows(3000, 1)
    est = GaussianLatentTree(n_components=2, margins="yeo-johnson", random_state=0).fit(X)
    row = X[7].copy()
    partial = row.copy()
    partial[2] = np.nan

    def density(v):
        r = row.copy()
        r[2] = v
        return np.exp(est.score_samples(r[None])[0])

    lo, hi = X[:, 2].min() - 30 * X[:, 2].std(), X[:, 2].max() + 200 * X[:, 2].std()
    breaks = [lo, 0.0, np.median(X[:, 2]), hi]
    total = sum(quad(density, a, b, epsrel=1e-10, limit=400)[0] for a, b in zip(breaks, breaks[1:]))
    first = sum(
        quad(lambda v: v * density(v), a, b, epsrel=1e-10, limit=400)[0]
        for a, b in zip(breaks, breaks[1:])
    )
    np.testing.assert_allclose(np.exp(est.score_samples(partial[None])[0]), total, rtol=1e-6)
    np.testing.assert_allclose(est.conditional_mean(partial[None], 2)[0], first / total, rtol=1e-5)
    S = est.sample(100_000, random_state=0)
    np.testing.assert_allclose(np.median(S, axis=0), np.median(X, axis=0), rtol=0.05)


def test_tree_mixture_recovers_each_components_tree():
    d = 7
    chain = LatentTree([(i, i + 1) for i in range(d - 1)], n_observed=d)
    star = LatentTree([(0, i) for i in range(1, d)], n_observed=d)
    parts = [
        GaussianLatentTreeModel.random(chain, min_correlation=0.7, random_state=1),
        GaussianLatentTreeModel.random(star, min_correlation=0.7, random_state=2),
    ]

    def draw(n, seed):
        a, b = parts[0].sample(n, random_state=seed), parts[1].sample(n, random_state=seed + 1)
        log_p = np.logaddexp(
            parts[0].log_likelihood(np.vstack([a, b])), parts[1].log_likelihood(np.vstack([a, b]))
        ) - np.log(2)
        return np.vstack([a, b]), np.repeat([0, 1], n), log_p

    X, labels, _ = draw(3000, 0)
    test, _, exact = draw(5000, 10)
    est = GaussianLatentTree(2, structure="tree_mixture", margins="none", random_state=0).fit(X)
    found = est.predict(X)
    assert adjusted_rand_score(labels, found) > 0.95
    for k, truth in enumerate((chain, star)):
        mine = est.trees_[np.bincount(found[labels == k]).argmax()]
        assert mine.edges == truth.edges
    assert exact.mean() - est.score(test) < 0.02
    shared = GaussianLatentTree(2, structure="chow_liu", margins="none", random_state=0).fit(X)
    assert est.score(test) > shared.score(test) + 0.1


def test_weights_count_as_repeated_rows():
    a = GaussianLatentTreeModel.random(balanced_binary_tree(6), random_state=0)
    b = GaussianLatentTreeModel.random(random_binary_tree(6, random_state=3), random_state=1)
    X = np.vstack([a.sample(200, random_state=0), b.sample(200, random_state=1)])
    w = np.r_[np.full(200, 10.0), np.ones(200)]
    repeated = np.vstack([np.repeat(X[:200], 10, axis=0), X[200:]])
    kw = dict(n_components=1, structure="chow_liu", margins="none", random_state=0)
    weighted = GaussianLatentTree(**kw).fit(X, sample_weight=w)
    copies = GaussianLatentTree(**kw).fit(repeated)
    assert weighted.tree_.edges == copies.tree_.edges
    np.testing.assert_allclose(weighted.score_samples(X), copies.score_samples(X), atol=1e-6)
    with pytest.raises(ValueError, match="[Nn]egative"):
        GaussianLatentTree(**kw).fit(X, sample_weight=-w)


def test_mixtures_do_not_depend_on_the_row_order_or_on_weights_against_copies():
    # the k-means start of the components runs on the distinct rows in a fixed order;
    # on the rows as read, a shuffle of wine's rows moved a test row by 3.9 nats
    from sklearn.datasets import load_wine

    X = load_wine().data[::2]
    w = np.random.default_rng(0).integers(1, 4, size=len(X))
    order = np.random.default_rng(1).permutation(len(X))
    kw = dict(n_components=3, structure="chow_liu", margins="none", random_state=0)
    a = GaussianLatentTree(**kw).fit(X, sample_weight=w.astype(float))
    b = GaussianLatentTree(**kw).fit(X[order], sample_weight=w[order].astype(float))
    c = GaussianLatentTree(**kw).fit(np.repeat(X, w, axis=0))
    for other in (b, c):
        assert [t.edges for t in other.trees_] == [t.edges for t in a.trees_]
        np.testing.assert_allclose(other.score_samples(X), a.score_samples(X), atol=1e-8)


def test_free_parameters_count_identifiable_ones():
    # hidden Chow-Liu tree over a chain of 4 columns: the two end hidden variables have
    # two neighbours, so only the product of their edge correlations counts
    chain = LatentTree([(0, 4), (1, 5), (2, 6), (3, 7), (4, 5), (5, 6), (6, 7)], n_observed=4)
    assert n_free_parameters(chain, 1) == 4 * 3 + 4 - 1 - 2
    assert n_free_parameters(balanced_binary_tree(8), 2) == 2 * (8 * 3 + 6 - 1) + 1


# ---------------------------------------------------------------------- multivariate leaves
def _full_covariance_truth(d=5, n_components=2, seed=0):
    """A mixture of full-covariance Gaussians written as a latent tree: one hidden
    variable over all columns, the columns one multivariate leaf (correlated noises)."""
    rng = np.random.default_rng(seed)
    tree, n, K = LatentTree.star(d), d + 1, n_components
    weight, offset, noise = np.zeros((K, n)), np.zeros((K, n)), np.ones((K, n))
    corr = np.tile(np.eye(n), (K, 1, 1))
    for k in range(K):
        weight[k, :d] = rng.normal(0.0, 0.7, d)
        offset[k, :d] = rng.normal(0.0, 2.0, d)
        A = rng.normal(size=(d, d))
        C = A @ A.T / d + 0.05 * np.eye(d)
        sd = np.sqrt(np.diag(C))
        noise[k, :d], corr[k, :d, :d] = sd**2, C / np.outer(sd, sd)
    params = GaussianTreeParameters(
        weight, offset, noise, np.log(np.full(K, 1.0 / K)), None, [np.arange(d)], corr
    )
    return GaussianLatentTreeModel(tree, params)


def test_multivariate_leaf_moments_and_sampling():
    truth = _full_covariance_truth(d=4, n_components=1)
    w, b, s, corr = truth.params.component(0)
    mean, cov = joint_moments(truth.tree, w, b, s, corr)
    sd = np.sqrt(s[:4])
    # x_G = a h + b + e with var(h) = 1 and cov(e) = sd R sd
    expected = np.outer(w[:4], w[:4]) + corr[:4, :4] * np.outer(sd, sd)
    np.testing.assert_allclose(cov[:4, :4], expected, atol=1e-12)
    np.testing.assert_allclose(cov[4, :4], w[:4], atol=1e-12)
    X = truth.sample(400_000, random_state=0)
    np.testing.assert_allclose(np.cov(X, rowvar=False), cov[:4, :4], atol=0.03 * cov.max())
    np.testing.assert_allclose(X.mean(0), mean[:4], atol=0.02 * np.sqrt(cov.max()))


def test_group_noise_recovers_the_noise_covariance_from_exact_statistics():
    # a tree with two multivariate leaves under linked hidden variables
    tree = LatentTree([(0, 5), (1, 5), (2, 6), (3, 6), (4, 6), (5, 6)], n_observed=5)
    groups = leaf_groups(tree)
    assert [g.tolist() for g in groups] == [[0, 1], [2, 3, 4]]
    rng = np.random.default_rng(1)
    w, b, s = rng.normal(size=7), rng.normal(size=7), rng.uniform(0.3, 1.5, 7)
    w[tree.root], b[5:], s[5:] = 0.0, 0.0, 1.0
    w, b, s = standardise_hidden(tree, w, b, s)
    corr = np.eye(7)
    corr[0, 1] = corr[1, 0] = 0.6
    corr[2:5, 2:5] = [[1.0, -0.4, 0.3], [-0.4, 1.0, 0.2], [0.3, 0.2, 1.0]]
    mean, cov = joint_moments(tree, w, b, s, corr)
    total, s1, s2 = 3.0, 3.0 * mean, 3.0 * (cov + np.outer(mean, mean))
    floor = np.zeros(7)
    w2, b2, s2_ = m_step(tree, total, s1, s2, floor)
    noise, corr2 = group_noise(tree, groups, total, s1, s2, w2, s2_, floor)
    np.testing.assert_allclose(w2, w, atol=1e-10)
    np.testing.assert_allclose(noise, s, atol=1e-10)
    np.testing.assert_allclose(corr2, corr, atol=1e-10)


def test_em_with_multivariate_leaves_is_monotone_and_approaches_the_truth():
    truth = _full_covariance_truth(d=5, n_components=2, seed=3)
    test = truth.sample(20_000, random_state=9)
    gaps = []
    for n in (1_000, 30_000):
        X = truth.sample(n, random_state=n)
        est = GaussianLatentTree(n_components=2, structure="full", random_state=0).fit(X)
        assert est.groups_ == [list(range(5))]
        gaps.append(truth.log_likelihood(test).mean() - est.score(test))
    assert gaps[1] < gaps[0] and gaps[1] < 0.01
    # the EM trace never goes down
    Z = (X - X.mean(0)) / X.std(0)
    labels = (Z[:, 0] > 0).astype(int)
    _, trace, _ = fit_gaussian_tree(
        Z, LatentTree.star(5), 2, labels=labels, groups=[np.arange(5)], tol=0.0, max_iter=60
    )
    assert np.all(np.diff(trace) > -1e-9)


@pytest.mark.slow
def test_auto_keeps_a_tree_for_a_tree_and_chooses_full_covariances_for_dense_ones():
    dense = _full_covariance_truth(d=5, n_components=2, seed=3)
    est = GaussianLatentTree(random_state=0).fit(dense.sample(5000, random_state=0))
    assert est.structure_ == "full" and est.n_components_ == 2
    tree_truth = GaussianLatentTreeModel.random(balanced_binary_tree(8), random_state=4)
    est = GaussianLatentTree(random_state=0).fit(tree_truth.sample(5000, random_state=0))
    assert est.structure_ != "full" and est.groups_ == []
    # the count of a full covariance per component
    assert n_free_parameters(LatentTree.star(5), 2, [np.arange(5)]) == 2 * (5 + 15) + 1
    assert n_free_parameters(LatentTree.star(2), 1, [np.arange(2)]) == 2 + 3


def test_multivariate_leaves_are_normalised_and_marginalised_exactly():
    truth = _full_covariance_truth(d=2, n_components=2, seed=5)
    est = GaussianLatentTree(n_components=2, structure="full", random_state=0)
    est.fit(truth.sample(3000, random_state=0))
    lo, hi = est.center_ - 12 * est.scale_, est.center_ + 12 * est.scale_
    g0, g1 = np.linspace(lo[0], hi[0], 801), np.linspace(lo[1], hi[1], 801)
    grid = np.column_stack([np.repeat(g0, 801), np.tile(g1, 801)])
    dens = np.exp(est.score_samples(grid)).reshape(801, 801)
    assert abs(np.trapezoid(np.trapezoid(dens, g1, axis=1), g0) - 1.0) < 1e-6
    row = truth.sample(1, random_state=5)[0]

    def joint(v):
        return np.exp(est.score_samples(np.array([[row[0], v]]))[0])

    integral = quad(joint, lo[1], hi[1], epsabs=0, epsrel=1e-11, limit=200)[0]
    partial = np.array([[row[0], np.nan]])
    np.testing.assert_allclose(np.exp(est.score_samples(partial)[0]), integral, rtol=1e-8)
    m1 = quad(lambda v: v * joint(v), lo[1], hi[1], epsrel=1e-11, limit=200)[0] / integral
    np.testing.assert_allclose(est.conditional_mean(partial, 1)[0], m1, rtol=1e-7)
    S = est.sample(200_000, random_state=1)
    X = truth.sample(200_000, random_state=2)
    np.testing.assert_allclose(
        np.corrcoef(S, rowvar=False), np.corrcoef(X, rowvar=False), atol=0.03
    )


def test_groups_must_share_a_parent_and_not_be_relearned():
    X = np.random.default_rng(0).normal(size=(200, 4))
    tree = balanced_binary_tree(4)
    with pytest.raises(ValueError, match="share a parent"):
        fit_gaussian_tree(X, tree, groups=[[0, 2]])
    with pytest.raises(ValueError, match="relearn_trees"):
        fit_gaussian_tree(X, _chain(4), relearn_trees=True, groups=[[0, 1]])


def _chain(d):
    return LatentTree([(i, i + 1) for i in range(d - 1)], n_observed=d)


def test_full_covariances_need_rows_per_column():
    # 12 rows of 5 columns: too few to fit a full noise covariance (3 rows per column per
    # component), so "auto" leaves it out; asked for by name it gets one component
    X = _full_covariance_truth(d=5, n_components=1, seed=2).sample(12, random_state=0)
    est = GaussianLatentTree(random_state=0).fit(X)
    assert not any(s == "full" for _, s, _ in est.bic_)
    est = GaussianLatentTree(structure="full", random_state=0).fit(X)
    assert est.n_components_ == 1 and est.groups_ == [list(range(5))]
    assert np.all(np.isfinite(est.score_samples(X)))


def test_auto_components_at_the_cap_say_so(monkeypatch):
    from ltm_sklearn._estimators import gaussian as gaussian_module

    # well-separated clusters: BIC falls past a cap of 2 components
    rng = np.random.RandomState(0)
    centers = rng.normal(scale=10.0, size=(4, 3))
    X = np.vstack([c + rng.normal(size=(150, 3)) for c in centers])
    monkeypatch.setattr(gaussian_module, "MAX_AUTO_COMPONENTS", 2)
    with pytest.warns(UserWarning, match="stopped at its cap of 2 components"):
        est = GaussianLatentTree(structure="chow_liu", random_state=0).fit(X)
    assert est.n_components_ == 2


def test_structures_walk_side_by_side_to_the_same_model(monkeypatch):
    from ltm_sklearn._estimators import gaussian as gaussian_module

    # every structure of "auto" and its walk over the components: in worker processes
    # (n_jobs=2, even for this small table) or one after another here
    truth = GaussianLatentTreeModel.random(balanced_binary_tree(6), random_state=0)
    X = truth.sample(400, random_state=1)
    monkeypatch.setattr(gaussian_module, "_SECONDS_PER_ENTRY", np.inf)
    here = GaussianLatentTree(n_jobs=1, random_state=0).fit(X)
    workers = GaussianLatentTree(n_jobs=2, random_state=0).fit(X)
    assert here.bic_ == workers.bic_
    assert len(here.bic_) > 5  # several structures and numbers of components
    assert (here.structure_, here.n_components_) == (workers.structure_, workers.n_components_)
    np.testing.assert_array_equal(here.score_samples(X), workers.score_samples(X))


def test_relearned_trees_stay_put_on_components_too_small_to_rank_edges():
    # a component of 2 rows among 5 columns has a singular covariance and correlations of
    # +-1 everywhere: its Chow-Liu tree would be a pick among ties, so it keeps its tree
    rng = np.random.default_rng(0)
    Z = rng.standard_normal((200, 5)) @ rng.standard_normal((5, 5))
    labels = np.zeros(200, dtype=int)
    labels[:2] = 1
    chain = _chain(5)
    params, _, _ = fit_gaussian_tree(Z, chain, 2, labels=labels, max_iter=1, relearn_trees=True)
    assert params.trees[1] is chain
    assert params.trees[0] is not chain  # the big component's own Chow-Liu tree


def _gaussian_chain(n=1500, d=8, seed=0):
    """Rows of a Gaussian Markov chain over the columns (no hidden variables)."""
    rng = np.random.default_rng(seed)
    X = np.empty((n, d))
    X[:, 0] = rng.normal(size=n)
    for j in range(1, d):
        X[:, j] = 0.8 * X[:, j - 1] + 0.6 * rng.normal(size=n)
    return X


def test_latent_walks_stop_where_the_chow_liu_tree_scores_better():
    # a Gaussian Markov chain over the columns: the Chow-Liu tree is the truth, and the
    # structures with hidden variables stop after two numbers of components behind it
    X = _gaussian_chain()
    est = GaussianLatentTree(margins="none", random_state=0).fit(X)
    walked = {}
    for (_, structure, k), bic in est.bic_.items():
        walked.setdefault(structure, {})[k] = bic
    assert est.structure_ in ("chow_liu", "tree_mixture")
    for latent in ("me", "hclt"):
        ks = sorted(walked[latent])
        assert ks == [1, 2]
        assert all(walked[latent][k] > walked["chow_liu"][k] for k in ks)
    assert len(walked["chow_liu"]) >= 2


def test_a_structure_asked_for_walks_to_its_own_stopping_point():
    # the margins' choice walks the Chow-Liu tree, but structure="me" alone is not
    # stopped by it
    X = _gaussian_chain()
    est = GaussianLatentTree(structure="me", random_state=0).fit(X)
    ks = sorted(k for (_, structure, k) in est.bic_ if structure == "me")
    assert len(ks) > 2


def test_a_tree_given_as_an_edge_array_is_the_tree_given_as_a_list():
    edges = [(0, 4), (1, 4), (2, 5), (3, 5), (4, 5)]
    X = GaussianLatentTreeModel.random(LatentTree(edges, 4), 1, random_state=0).sample(300)
    as_list = GaussianLatentTree(tree=edges, random_state=0).fit(X)
    as_array = GaussianLatentTree(tree=np.array(edges), random_state=0).fit(X)
    assert as_array.structure_ == "given" and as_array.tree_.edges == as_list.tree_.edges
    np.testing.assert_allclose(as_array.score_samples(X), as_list.score_samples(X))


def test_values_far_beyond_the_data_score_finite():
    # from about 1e154 standard units the quadratic form's products overflow (inf - inf)
    truth = GaussianLatentTreeModel.random(balanced_binary_tree(4), 2, random_state=7)
    X = truth.sample(500, random_state=0)
    far = X[:4].copy()
    far[0, 0], far[1, 0] = 1e200, -1e300
    for est in (
        GaussianLatentTree(n_components=2, margins="none", random_state=0).fit(X),
        GaussianLatentTree(margins="yeo-johnson", random_state=0).fit(np.exp(X)),
    ):
        scores = est.score_samples(far[:2])
        assert np.all(np.isfinite(scores)) and np.all(scores < -1e5)
        np.testing.assert_allclose(est.predict_proba(far[:2]).sum(axis=1), 1.0)
        # the conditional mean and variance: finite, or infinite where a far value
        # transformed back overflows, never NaN
        assert not np.isnan(est.conditional_mean(far[:2], target=2)).any()
        assert not np.isnan(est.conditional_variance(far[:2], target=2)).any()


def test_a_categorical_column_is_refused_with_the_estimator_to_use():
    X = pd.DataFrame({"a": np.arange(20.0), "c": pd.Categorical(["x", "y"] * 10)})
    with pytest.raises(TypeError, match="numbers only.*'c'.*KernelLatentTree"):
        GaussianLatentTree().fit(X)
    dates = pd.DataFrame({"a": np.arange(20.0), "d": pd.date_range("2020", periods=20)})
    with pytest.raises(TypeError, match="cannot read column 'd' of dtype datetime64"):
        GaussianLatentTree().fit(dates)


def test_a_constant_column_is_named_in_a_warning():
    X = np.random.default_rng(0).normal(size=(200, 3))
    X[:, 1] = 7.0
    X[::9, 1] = np.nan  # missing entries do not make it vary
    with pytest.warns(UserWarning, match=r"Column\(s\) \[1\] are constant.*6.0 nats") as record:
        GaussianLatentTree(structure="chow_liu", n_components=1).fit(X)
    assert sum("constant" in str(w.message) for w in record) == 1  # once a fit
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        GaussianLatentTree(structure="chow_liu", n_components=1).fit(X[:, [0, 2]])


def test_score_validates_sample_weight_as_the_discrete_estimators_do():
    X = np.random.default_rng(0).normal(size=(50, 3))
    est = GaussianLatentTree(structure="chow_liu", n_components=1).fit(X)
    w = np.arange(1.0, 51.0)
    assert est.score(X, sample_weight=w) == pytest.approx(
        np.average(est.score_samples(X), weights=w)
    )
    with pytest.raises(ValueError, match="Negative values"):
        est.score(X, sample_weight=-w)
    with pytest.raises(ValueError, match="non-zero"):
        est.score(X, sample_weight=np.zeros(50))
    with pytest.raises(ValueError, match="shape"):
        est.score(X, sample_weight=w[:3])


def test_weights_summing_to_fewer_rows_than_a_gaussian_needs_are_named():
    X = np.random.default_rng(0).normal(size=(200, 4))
    w = np.full(200, 1 / 200)  # normalised weights: BIC would read one row
    with pytest.warns(UserWarning, match="sample_weight sums to 1"):
        GaussianLatentTree(n_components=1, structure="chow_liu").fit(X, sample_weight=w)


def test_a_newick_tree_is_a_given_tree():
    X = np.random.default_rng(0).normal(size=(200, 4))
    newick = GaussianLatentTree(tree="((0,1),(2,3));", n_components=1).fit(X)
    edges = GaussianLatentTree(tree=newick.tree_, n_components=1).fit(X)
    assert newick.structure_ == edges.structure_ == "given"
    assert newick.score(X) == pytest.approx(edges.score(X), abs=1e-12)


def test_moment_start_lengths_through_the_normal_equations_equal_the_direct_ones(monkeypatch):
    from ltm_sklearn._algorithms import gaussian

    tree = random_binary_tree(40, random_state=0)
    X = GaussianLatentTreeModel.random(tree, random_state=0).sample(2000, random_state=1)
    corr = np.corrcoef(X.T)
    direct = gaussian.moment_start(tree, corr)  # 780 pairs x 77 edges: the design itself
    monkeypatch.setattr(gaussian, "_DENSE_LSQ_ENTRIES", 0)
    normal = gaussian.moment_start(tree, corr)
    for a, b in zip(direct, normal):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_box_least_squares_of_a_singular_design_reaches_the_direct_minimum(monkeypatch):
    # a hidden node of degree two: its two edges lie on the same paths, A^T A is singular
    import scipy.sparse as sp
    from scipy.optimize import lsq_linear

    from ltm_sklearn._algorithms import gaussian

    tree = random_binary_tree(30, random_state=0)
    (u, v), *rest = tree.edges
    split = LatentTree(rest + [(u, tree.n_nodes), (tree.n_nodes, v)], 30)
    assert any(split.degree(h) == 2 for h in split.hidden_nodes)
    X = GaussianLatentTreeModel.random(tree, random_state=0).sample(2000, random_state=1)
    designs = []
    monkeypatch.setattr(
        gaussian,
        "lsq_linear",
        lambda A, b, bounds, **kw: designs.append((A, b, bounds)) or lsq_linear(A, b, bounds, **kw),
    )
    gaussian.moment_start(split, np.corrcoef(X.T))
    A, b, bounds = designs[0]
    direct = lsq_linear(A, b, bounds, method="bvls").x
    monkeypatch.setattr(gaussian, "_DENSE_LSQ_ENTRIES", 0)
    normal = gaussian._box_least_squares(sp.csr_matrix(A), b, bounds)
    assert np.all((normal >= bounds[0]) & (normal <= bounds[1]))
    np.testing.assert_allclose(
        np.sum((A @ normal - b) ** 2), np.sum((A @ direct - b) ** 2), rtol=1e-8
    )
