"""LatentTreeEM: exact E-step, monotone likelihood, ground-truth recovery, API extras."""

import itertools
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from ltm_sklearn import LatentTree, LatentTreeEM
from ltm_sklearn._em import em_step, fit_em, m_step, node_posteriors, random_cpts
from ltm_sklearn._inference import cpt_log_likelihood
from ltm_sklearn.datasets import LatentTreeModel, balanced_binary_tree, hmm_chain


def population(model):
    """All configurations with their true probabilities as weights (exact moments)."""
    X = model.all_configurations()
    return X.astype(np.int64).T, np.exp(model.log_likelihood(X))


def test_e_step_likelihood_matches_exact_inference():
    model = LatentTreeModel.random(balanced_binary_tree(6), 2, 3, random_state=0)
    X = model.sample(500, random_state=1).astype(float)
    X[np.random.RandomState(2).rand(*X.shape) < 0.2] = np.nan
    codes = model._codes(X)
    ll, _, _ = em_step(model.tree, model.root_marginal, model.cpts, codes, np.ones(500))
    np.testing.assert_allclose(ll, model.log_likelihood(X), rtol=1e-12)


@pytest.mark.parametrize(
    "tree",
    [balanced_binary_tree(4), hmm_chain(4), LatentTree([(0, 1), (0, 2), (0, 4), (4, 3)], 4)],
    ids=["balanced", "hmm", "observed-internal"],
)
def test_truth_is_a_fixed_point_of_em_on_exact_moments(tree):
    # with population weights the expected counts are the true pair marginals, so one
    # M-step returns the true CPTs (checks the E-step's edge posteriors exactly)
    n_obs = [3 if u > 0 else 2 for u in range(tree.n_observed)]
    model = LatentTreeModel.random(tree, 2, n_obs, random_state=1)
    codes, w = population(model)
    _, rc, ec = em_step(model.tree, model.root_marginal, model.cpts, codes, w)
    np.testing.assert_allclose(rc.sum(), 1.0, rtol=1e-12)
    root, cpts = m_step(rc, ec)
    np.testing.assert_allclose(root, model.root_marginal, atol=1e-7)
    for u, cpt in model.cpts.items():
        np.testing.assert_allclose(cpts[u], cpt, atol=1e-7)


def test_hidden_posteriors_match_brute_force():
    tree = balanced_binary_tree(4)  # hidden nodes 4 (root), 5
    model = LatentTreeModel.random(tree, 2, 3, random_state=3)
    X = model.sample(20, random_state=0)
    codes = X.T
    post = node_posteriors(tree, model.root_marginal, model.cpts, codes)
    hidden = tree.hidden_nodes
    for r in range(20):
        joint = {}
        for hs in itertools.product(range(2), repeat=len(hidden)):
            state = dict(zip(hidden, hs))
            state.update({j: X[r, j] for j in range(4)})
            p = model.root_marginal[state[tree.root]]
            for u in range(tree.n_nodes):
                if u != tree.root:
                    p *= model.cpts[u][state[tree.parent[u]], state[u]]
            joint[hs] = p
        z = sum(joint.values())
        for t, h in enumerate(hidden):
            brute = [sum(p for hs, p in joint.items() if hs[t] == s) / z for s in range(2)]
            np.testing.assert_allclose(post[h][r], brute, rtol=1e-10)


def test_em_never_decreases_the_likelihood():
    tree = LatentTree([(0, 1), (0, 2), (0, 6), (6, 3), (6, 7), (7, 4), (7, 5)], 6)
    model = LatentTreeModel.random(tree, 2, 3, noise=0.7, random_state=0)
    X = model.sample(3000, random_state=0).astype(float)
    X[np.random.RandomState(1).rand(*X.shape) < 0.1] = np.nan
    codes = model._codes(X)
    n_states = np.array([3] * 6 + [2, 2])
    for seed in range(3):
        start = random_cpts(model.tree, n_states, seed)
        *_, history = fit_em(model.tree, *start, codes, np.ones(3000), None, 200, 0.0)
        assert np.all(np.diff(history) >= -1e-10)
        assert len(history) == 200


def test_held_out_gap_shrinks_with_n():
    # measured (8-leaf balanced, k = 2, n = 4, 2 restarts): gap 0.036, 0.0038, 0.0013 nats
    model = LatentTreeModel.random(balanced_binary_tree(8), 2, 4, random_state=0)
    Xt = model.sample(20_000, random_state=9)
    truth = model.log_likelihood(Xt).mean()
    gaps = []
    for n in (1_000, 10_000, 50_000):
        est = LatentTreeEM(2, tree=model.tree, n_init=2, random_state=0)
        est.fit(model.sample(n, random_state=1))
        gaps.append(truth - est.score(Xt))
    assert gaps[0] > gaps[1] > gaps[2] >= -0.005
    assert gaps[2] < 0.005


def test_restarts_keep_the_best_and_convergence_attributes():
    model = LatentTreeModel.random(balanced_binary_tree(8), 2, 3, noise=0.7, random_state=2)
    X = model.sample(2000, random_state=0)
    single = [
        LatentTreeEM(2, tree=model.tree, random_state=s, tol=1e-5).fit(X).lower_bound_
        for s in range(3)
    ]
    best = LatentTreeEM(2, tree=model.tree, n_init=3, random_state=0, tol=1e-5).fit(X)
    assert best.lower_bound_ >= max(single[:1]) - 1e-12
    assert best.converged_ and 1 < best.n_iter_ < 500
    np.testing.assert_allclose(best.lower_bound_, best.score(X), rtol=1e-9)
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        est = LatentTreeEM(2, tree=model.tree, max_iter=2, random_state=0).fit(X)
    assert est.n_iter_ == 2 and not est.converged_


def test_fitted_tables_hidden_posteriors_and_sampling():
    model = LatentTreeModel.random(balanced_binary_tree(6), 2, 3, random_state=4)
    X = model.sample(20_000, random_state=0)
    labels = np.array(["lo", "mid", "hi"])
    Xs = labels[X]
    est = LatentTreeEM(2, tree=model.tree, random_state=0).fit(Xs)
    assert est.root_marginal_.shape == (2,)
    for cpt in est.cpts_.values():
        np.testing.assert_allclose(cpt.sum(axis=1), 1.0)
    post = est.predict_hidden_proba(Xs[:100])
    assert post.shape == (100, len(est.tree_.hidden_nodes), 2)
    np.testing.assert_allclose(post.sum(axis=2), 1.0)
    S, y = est.sample(30_000, random_state=1)
    assert y is None and S.shape == (30_000, 6) and set(np.unique(S)) <= set(labels)
    for j in range(6):  # marginals of the samples match the data's
        for v in labels:
            assert abs(np.mean(S[:, j] == v) - np.mean(Xs[:, j] == v)) < 0.02


def test_supervised_mode_and_missing_values():
    tree = balanced_binary_tree(6)
    a = LatentTreeModel.random(tree, 2, 3, noise=0.6, random_state=0)
    b = LatentTreeModel.random(tree, 2, 3, noise=0.6, random_state=1)
    X = np.vstack([a.sample(3000, random_state=1), b.sample(3000, random_state=2)]).astype(float)
    y = np.repeat([0, 1], 3000)
    X[np.random.RandomState(0).rand(*X.shape) < 0.15] = np.nan
    clf = LatentTreeEM(2, tree=tree, random_state=0).fit(X, y)
    assert isinstance(clf.cpts_, list) and len(clf.cpts_) == 2
    proba = clf.predict_proba(X[:20])
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    bayes = np.mean((b.log_likelihood(X) > a.log_likelihood(X)) == y)  # true models
    assert np.mean(clf.predict(X) == y) > bayes - 0.02
    S, ys = clf.sample(100, random_state=0)
    assert set(np.unique(ys)) <= {0, 1}
    post = clf.predict_hidden_proba(X[:10])
    np.testing.assert_allclose(post.sum(axis=2), 1.0)
    with pytest.raises(ValueError, match="n_samples must be a positive integer"):
        clf.sample(2.5)


def test_em_on_learned_tree_with_observed_internal_nodes():
    tree = LatentTree([(0, 1), (0, 2), (0, 6), (6, 3), (6, 7), (7, 4), (7, 5)], 6)
    model = LatentTreeModel.random(tree, 2, 2, noise=0.3, random_state=0)
    X = model.sample(20_000, random_state=0)
    est = LatentTreeEM(2, structure="clnj", n_init=2, random_state=0).fit(X)
    Xt = model.sample(5000, random_state=1)
    assert est.tree_.degree(0) == 3  # the observed internal node stays observed
    assert abs(model.log_likelihood(Xt).mean() - est.score(Xt)) < 0.01
    ll = cpt_log_likelihood(est.tree_, est.root_marginal_, est.cpts_, est._encode(Xt))
    np.testing.assert_allclose(ll, est.score_samples(Xt))


def test_em_warning_free_on_clean_fit():
    model = LatentTreeModel.random(balanced_binary_tree(4), 2, 2, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        LatentTreeEM(2, tree=model.tree, random_state=0).fit(model.sample(500, random_state=0))
