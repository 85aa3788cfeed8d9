"""HierarchicalTensorLTM (Song, Ishteva, Parikh, Xing & Park (ICML 2013)): the optimal linker,
Theorem 3/4, ground truth."""

import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV

from ltm_sklearn import HierarchicalTensorLTM, LatentTreeClassifier, SpectralLatentTree
from ltm_sklearn._algorithms.hierarchical import (
    UnfoldingMoments,
    fit_hierarchical,
    optimal_linker,
    rank_constrained_linker,
)
from ltm_sklearn._algorithms.spectral import fit_spectral, spectral_log_abs
from ltm_sklearn._engine.moments import MomentEstimator
from ltm_sklearn._engine.tree import LatentTree
from ltm_sklearn.datasets import (
    LatentTreeModel,
    balanced_binary_tree,
    hmm_chain,
    random_binary_tree,
    star_tree,
)


def _objective(P, PB, AP, M):
    return np.linalg.norm(P - PB @ M @ AP) ** 2


@pytest.mark.parametrize("seed", range(4))
def test_optimal_linker_is_eq6_and_beats_other_rank_k_linkers(seed):
    rng = np.random.default_rng(seed)
    l, m, a, b, k = 30, 25, 5, 4, 2
    P = rng.random((l, 3)) @ rng.random((3, m)) + 0.05 * rng.random((l, m))
    PB = P @ rng.random((m, a))
    AP = rng.random((b, l)) @ P
    head, tail = optimal_linker(PB.T @ PB, AP @ AP.T, PB.T @ P @ AP.T, k)
    M = head @ tail.T
    assert head.shape == (a, k) and tail.shape == (b, k)
    np.testing.assert_allclose(M, rank_constrained_linker(P, PB, AP, k), rtol=1e-6, atol=1e-9)
    best = _objective(P, PB, AP, M)
    # no rank-k perturbation and no truncated least-squares linker does better
    U, s, Vt = np.linalg.svd(np.linalg.pinv(PB) @ P @ np.linalg.pinv(AP))
    assert best <= _objective(P, PB, AP, (U[:, :k] * s[:k]) @ Vt[:k]) + 1e-12
    for _ in range(20):
        dh = head + 1e-3 * rng.standard_normal(head.shape)
        dt = tail + 1e-3 * rng.standard_normal(tail.shape)
        assert best <= _objective(P, PB, AP, dh @ dt.T) + 1e-12


def test_unfolding_moments_equal_dense_tables():
    model = LatentTreeModel.random(balanced_binary_tree(5), 2, 3, random_state=0)
    X = model.sample(500, random_state=0)
    codes = X.T.astype(np.int16)
    w = np.random.default_rng(0).random(500)
    mom = MomentEstimator(codes, np.full(5, 3), w)
    inside, outside, rep, ref = (0, 1), (2, 4), 1, 4
    joint = np.zeros((3,) * 4)
    np.add.at(joint, tuple(codes[list(inside + outside)]), w)
    joint /= w.sum()
    P = joint.reshape(9, 9)
    PB = joint.sum(axis=2).reshape(9, 3)  # P[x_0, x_1, x_4]
    AP = joint.sum(axis=0).reshape(3, 9)  # P[x_1, x_2, x_4]
    gram_b, gram_a, cross = UnfoldingMoments(mom).edge(inside, outside, rep, ref)
    np.testing.assert_allclose(gram_b, PB.T @ PB, atol=1e-15)
    np.testing.assert_allclose(gram_a, AP @ AP.T, atol=1e-15)
    np.testing.assert_allclose(cross, PB.T @ P @ AP.T, atol=1e-15)


TINY = {
    "balanced6": (balanced_binary_tree(6), 2, 3),
    "hmm5": (hmm_chain(5), 2, 3),
    "random7": (random_binary_tree(7, random_state=3), 2, 2),
    "star4": (star_tree(4), 3, 3),
}


def population(model):
    conf = model.all_configurations()
    return conf, np.exp(model.log_likelihood(conf))


@pytest.mark.parametrize("name", sorted(TINY))
@pytest.mark.parametrize("linker", ["optimal", "inverse"])
def test_correctly_specified_equals_spectral_and_truth(name, linker):
    """Theorem 3: with k' = k the decomposition is exact, as the spectral algorithm; so are
    the explicit models recovered from both (the moment estimates, ``max_iter=0``)."""
    tree, k, n = TINY[name]
    model = LatentTreeModel.random(tree, k, n, random_state=1)
    conf, p = population(model)
    kw = dict(tree=tree, max_iter=0, random_state=0)
    hier = HierarchicalTensorLTM(k, linker=linker, **kw).fit(conf, sample_weight=p)
    spec = SpectralLatentTree(k, **kw).fit(conf, sample_weight=p)
    sign, logabs = hier.raw_log_abs(conf)
    np.testing.assert_allclose(sign * np.exp(logabs), p, rtol=1e-8, atol=1e-15)
    np.testing.assert_allclose(hier.score_samples(conf), np.log(p), atol=1e-7)
    np.testing.assert_allclose(hier.score_samples(conf), spec.score_samples(conf), atol=1e-7)


def test_correctly_specified_close_to_spectral_on_samples():
    """From samples the raw decompositions of both linkers are within a few thousandths
    of a nat of the truth, as the spectral algorithm (the optimal linker fits sampling
    noise of the large sparse unfoldings too: its per-row deviation is larger), and so
    are the normalised models polished by EM."""
    model = LatentTreeModel.random(balanced_binary_tree(8), 2, 3, random_state=0)
    X, X_test = model.sample(20_000, random_state=1), model.sample(2000, random_state=2)
    truth = model.log_likelihood(X_test)
    spec = SpectralLatentTree(2, tree=model.tree, random_state=0).fit(X)
    raw_spec = spec.raw_log_abs(X_test)[1]
    for linker in ("optimal", "inverse"):
        hier = HierarchicalTensorLTM(2, linker=linker, tree=model.tree, random_state=0).fit(X)
        raw = hier.raw_log_abs(X_test)[1]
        assert abs(np.mean(truth - raw) - np.mean(truth - raw_spec)) < 0.005
        assert np.mean(np.abs(truth - raw)) < 0.08
        assert abs(hier.score(X_test) - spec.score(X_test)) < 0.005


def _raw_joint(params, codes):
    """Unnormalised ``Q(x)`` of a fitted decomposition (Theorem 4 is about ``Q``)."""
    saved, params.log_normaliser = params.log_normaliser, 0.0
    sign, logabs = spectral_log_abs(params, codes)
    params.log_normaliser = saved
    return sign * np.exp(logabs)


def _max_tail(P, tree, k):
    """``eps = max_i min_{rank R <= k} ||P_i - R||_F^2`` over the edge unfoldings."""
    d = tree.n_observed
    eps, n_edges = 0.0, 0
    for u in range(tree.n_nodes):
        if u == tree.root:
            continue
        inside = sorted(v for v in tree.subtree_leaves(u) if v < d)
        outside = [v for v in range(d) if v not in inside]
        n_edges += 1
        if not outside:
            continue
        M = np.transpose(P, inside + outside).reshape(P.shape[0] ** len(inside), -1)
        s = np.linalg.svd(M, compute_uv=False)
        eps = max(eps, float(np.sum(s[k:] ** 2)))
    return eps, n_edges


def test_misspecified_frobenius_error_and_theorem4_bound():
    """O = 6, n = 4, k = 4, k' = 2 on exact joint tables of 12 random models.

    Theorem 4's bound ||P - Q||_F^2 <= d eps holds for every model; the optimal linker's
    error is no larger than the spectral algorithm's on 10 of the 12 (the two others,
    balanced trees, are within 5%) and smaller in total.
    """
    trees = [random_binary_tree(6, random_state=s) for s in range(4)]
    trees += [hmm_chain(6)] * 4 + [balanced_binary_tree(6)] * 4
    k, kp, wins, tot_h, tot_s = 4, 2, 0, 0.0, 0.0
    unseen = np.full(6, 1e-6)
    for seed, tree in enumerate(trees):
        model = LatentTreeModel.random(tree, k, 4, noise=0.8, random_state=seed % 4)
        conf, p = population(model)
        codes = conf.T.astype(np.int16)
        mom = MomentEstimator(codes, np.full(6, 4), p)
        rooted = LatentTree(tree.edges, 6)
        err_h = np.sum((_raw_joint(fit_hierarchical(rooted, mom, kp, unseen), codes) - p) ** 2)
        err_s = np.sum((_raw_joint(fit_spectral(rooted, mom, kp, unseen), codes) - p) ** 2)
        eps, d = _max_tail(p.reshape((4,) * 6), rooted, kp)
        assert err_h <= d * eps
        assert err_h <= 1.05 * err_s
        wins += err_h <= err_s
        tot_h, tot_s = tot_h + err_h, tot_s + err_s
    assert wins >= 10
    assert tot_h < tot_s


def test_ground_truth_error_shrinks_with_n():
    # The exact KL divergence from the truth, summed over all 3^8 configurations: a held-out
    # mean at these sizes is dominated by the noise of the test rows, not by the fit.
    # Measured (random_state 0-3): KL 0.0196, 0.0014, 0.00021-0.00025 nats.
    model = LatentTreeModel.random(random_binary_tree(8, random_state=0), 2, 3, random_state=0)
    X_all = model.all_configurations()
    log_p = model.log_likelihood(X_all)
    kl = []
    for n in (1000, 10_000, 100_000):
        est = HierarchicalTensorLTM(2, tree=model.tree, random_state=0)
        est.fit(model.sample(n, random_state=n))
        kl.append(np.sum(np.exp(log_p) * (log_p - est.score_samples(X_all))))
    assert kl[1] < 0.5 * kl[0] and kl[2] < 0.5 * kl[1]
    assert 0 <= kl[2] < 0.001


@pytest.mark.slow
def test_shared_api_classifier_conditional_missing_and_grid_search():
    tree = balanced_binary_tree(8)
    a = LatentTreeModel.random(tree, 3, 4, noise=0.6, random_state=0)
    b = LatentTreeModel.random(tree, 3, 4, noise=0.6, random_state=1)
    X = np.vstack([a.sample(4000, random_state=1), b.sample(4000, random_state=2)])
    y = np.repeat([0, 1], 4000)
    clf = LatentTreeClassifier(HierarchicalTensorLTM(3, tree=tree, random_state=0)).fit(X, y)
    bayes = np.mean((b.log_likelihood(X) > a.log_likelihood(X)) == y)
    assert np.mean(clf.predict(X) == y) > bayes - 0.02
    np.testing.assert_allclose(clf.predict_proba(X[:20]).sum(axis=1), 1.0)
    X_nan = X[:200].astype(float)
    X_nan[::3, 2] = np.nan
    X_nan[::5, 6] = np.nan
    est = HierarchicalTensorLTM(3, tree=tree, random_state=0).fit(a.sample(20_000, random_state=3))
    s = est.score_samples(X_nan)
    # NaN entries are marginalised exactly: the sum over every fill of row 0 (column 2)
    fills = np.repeat(X_nan[:1], 4, axis=0)
    fills[:, 2] = np.arange(4)
    assert s[0] == pytest.approx(np.log(np.exp(est.score_samples(fills)).sum()), rel=1e-10)
    # and close to the exact marginal likelihood of the truth (measured: 0.105 nats/row)
    assert np.mean(np.abs(s - a.log_likelihood(X_nan))) < 0.15
    cond = est.conditional_proba(X_nan, target=2)
    np.testing.assert_allclose(cond.sum(axis=1), 1.0)
    gs = GridSearchCV(HierarchicalTensorLTM(tree=tree), {"n_hidden_states": [1, 2, 3]}, cv=3)
    assert gs.fit(a.sample(20_000, random_state=4)).best_params_ == {"n_hidden_states": 3}


def test_missing_values_in_training_and_learned_structure():
    model = LatentTreeModel.random(balanced_binary_tree(8), 2, 3, random_state=0)
    X = model.sample(20_000, random_state=0).astype(float)
    X_test = model.sample(2000, random_state=1)
    rng = np.random.default_rng(0)
    X[rng.random(X.shape) < 0.05] = np.nan
    est = HierarchicalTensorLTM(2, structure="nj", random_state=0).fit(X)
    gap = np.mean(model.log_likelihood(X_test) - est.score_samples(X_test))
    assert est.tree_.n_observed == 8
    assert abs(gap) < 0.03
