"""Ground-truth tests of SpectralLatentTree (Parikh, Song & Xing (ICML 2011))."""

import numpy as np
import pandas as pd
import pytest

from ltm_sklearn import (
    HierarchicalTensorLTM,
    LatentTreeEM,
    SpectralLatentTree,
)
from ltm_sklearn._algorithms.spectral import _internal_message, computation_tree
from ltm_sklearn.datasets import (
    LatentTreeModel,
    balanced_binary_tree,
    broad_tree,
    deep_tree,
    hmm_chain,
    random_binary_tree,
    star_tree,
)

TINY_TREES = {
    "balanced8": (balanced_binary_tree(8), 2, 3),
    "hmm6": (hmm_chain(6), 2, 3),
    "star5": (star_tree(5), 3, 3),
    "random7": (random_binary_tree(7, random_state=3), 2, 2),
    "broad4": (broad_tree(2), 2, 3),
    "deep3": (deep_tree(3), 3, 4),
}


def population_fit(model, k, **kw):
    """Fit on every configuration weighted by its exact probability: exact moments. The
    model is the moment estimate (``max_iter=0``: EM's pseudo-counts would weigh against
    weights that sum to one)."""
    conf = model.all_configurations()
    p = np.exp(model.log_likelihood(conf))
    est = SpectralLatentTree(k, tree=model.tree, max_iter=0, random_state=0, **kw)
    return est.fit(conf, sample_weight=p), conf, p


@pytest.mark.parametrize("name", sorted(TINY_TREES))
def test_exact_moments_recover_the_joint(name):
    tree, k, n = TINY_TREES[name]
    model = LatentTreeModel.random(tree, k, n, random_state=0)
    est, conf, p = population_fit(model, k)
    # brute-force enumeration of the true joint vs. the raw observable representation ...
    sign, logabs = est.raw_log_abs(conf)
    np.testing.assert_allclose(sign * np.exp(logabs), p, rtol=1e-9, atol=1e-15)
    # ... and vs. the explicit model recovered from it (tensor power iterations: 1e-7)
    np.testing.assert_allclose(np.exp(est.score_samples(conf)), p, rtol=1e-7, atol=1e-15)


@pytest.mark.parametrize("name", ["balanced8", "hmm6", "star5"])
def test_raw_estimate_sums_to_one_from_samples(name):
    tree, k, n = TINY_TREES[name]
    model = LatentTreeModel.random(tree, k, n, random_state=1)
    est = SpectralLatentTree(k, tree=tree).fit(model.sample(3000, random_state=0))
    sign, logabs = est.raw_log_abs(model.all_configurations())
    assert np.sum(sign * np.exp(logabs)) == pytest.approx(1.0, abs=1e-10)
    assert np.exp(est.score_samples(model.all_configurations())).sum() == pytest.approx(
        1.0, abs=1e-10
    )


def test_error_shrinks_with_n():
    # Median relative joint error |P_hat - P| / P on test rows, true tree, k' = k.
    # The error of moment estimates scales as N^-1/2, a factor 1/sqrt(10) = 0.32 per decade.
    # Measured over 5 random models (seeds 0-4): per-decade ratios 0.23-0.60, error at
    # N = 1e5 of 0.014-0.032. The bounds below (ratio < 0.75, error < 0.06) leave room for
    # the test-set noise of the median while still failing for an estimator that does not
    # converge.
    tree = balanced_binary_tree(8)
    model = LatentTreeModel.random(tree, 2, 3, random_state=0)
    X_test = model.sample(2000, random_state=100)
    truth = model.log_likelihood(X_test)
    errors = []
    for n in (1_000, 10_000, 100_000):
        est = SpectralLatentTree(2, tree=tree).fit(model.sample(n, random_state=1))
        errors.append(np.median(np.abs(np.exp(est.score_samples(X_test) - truth) - 1)))
    assert errors[1] < 0.75 * errors[0]
    assert errors[2] < 0.75 * errors[1]
    assert errors[2] < 0.06


def test_nan_entries_are_marginalised():
    model = LatentTreeModel.random(balanced_binary_tree(6), 2, 3, random_state=2)
    est, _, _ = population_fit(model, 2)
    x = np.array([[0, 2, np.nan, 1, np.nan, 0]])
    total = 0.0
    for a in range(3):
        for b in range(3):
            xv = x.copy()
            xv[0, 2], xv[0, 4] = a, b
            total += np.exp(est.score_samples(xv)[0])
    assert np.exp(est.score_samples(x)[0]) == pytest.approx(total, rel=1e-9)
    np.testing.assert_allclose(est.score_samples(x), model.log_likelihood(x), rtol=1e-9)


def test_missing_values_in_training_data():
    model = LatentTreeModel.random(balanced_binary_tree(8), 2, 3, random_state=3)
    X = model.sample(50_000, random_state=0).astype(float)
    X[np.random.RandomState(0).random_sample(X.shape) < 0.1] = np.nan
    est = SpectralLatentTree(2, tree=model.tree).fit(X)
    X_test = model.sample(2000, random_state=1)
    gap = model.log_likelihood(X_test).mean() - est.score(X_test)
    assert abs(gap) < 0.02


@pytest.mark.slow
def test_200_leaf_chain_scores_without_underflow():
    model = LatentTreeModel.random(hmm_chain(200), 2, 4, random_state=0)
    est = SpectralLatentTree(2, tree=model.tree).fit(model.sample(20_000, random_state=0))
    X_test = model.sample(200, random_state=1)
    ll = est.score_samples(X_test)
    truth = model.log_likelihood(X_test)
    assert np.all(np.isfinite(ll)) and truth.max() < -200  # far below float underflow of P
    # held-out gap per row, measured 0.03 nats (200 variables): a loose sanity bound
    assert abs(truth.mean() - ll.mean()) < 0.1 * 200


def test_conditional_proba_matches_truth():
    model = LatentTreeModel.random(hmm_chain(5), 2, 3, random_state=4)
    est, _, _ = population_fit(model, 2)
    X = np.array([[0, np.nan, 2, 1, np.nan], [np.nan, 1, np.nan, np.nan, 0]])
    for target in (1, 4, 0):
        cp = est.conditional_proba(X, target=target)
        np.testing.assert_allclose(cp.sum(axis=1), 1.0)
        for row in range(2):
            joint = []
            for v in range(3):
                xv = X[row : row + 1].copy()
                xv[0, target] = v
                joint.append(np.exp(model.log_likelihood(xv)[0]))
            np.testing.assert_allclose(cp[row], np.array(joint) / sum(joint), rtol=1e-8)


def test_unseen_category_gets_small_finite_probability():
    model = LatentTreeModel.random(star_tree(4), 2, 3, random_state=0)
    est = SpectralLatentTree(2, tree=model.tree).fit(model.sample(5000, random_state=0))
    seen = est.score_samples([[0, 1, 2, 1]])[0]
    unseen = est.score_samples([[0, 1, 7, 1]])[0]
    assert np.isfinite(unseen) and unseen < seen - 5
    # the unseen entry contributes the constant unseen_proba_: the other columns as if missing
    rest = est.score_samples([[0, 1, np.nan, 1]])[0]
    assert unseen == pytest.approx(rest + np.log(est.unseen_proba_[2]))


def test_high_degree_nodes_are_binarised_with_low_order_moments():
    tree = star_tree(9)
    nodes = computation_tree(tree)
    assert all(len(n.children) <= 2 for n in nodes[:-1])
    assert len(nodes[-1].children) <= 3
    assert nodes[-1].leaves == tuple(range(9))


def test_k_larger_than_states_uses_available_rank():
    # binary columns with k' = 2 on one column of 2 states and others of 3: still exact
    tree = balanced_binary_tree(6)
    model = LatentTreeModel.random(tree, 2, [2, 3, 3, 2, 3, 3], random_state=5)
    est, conf, p = population_fit(model, 2)
    np.testing.assert_allclose(np.exp(est.score_samples(conf)), p, rtol=1e-9)


def test_learned_structure_by_default():
    model = LatentTreeModel.random(balanced_binary_tree(8), 2, 4, noise=0.3, random_state=0)
    est = SpectralLatentTree(2, random_state=0).fit(model.sample(20_000, random_state=0))
    assert est.tree_.n_observed == 8
    X_test = model.sample(2000, random_state=1)
    assert abs(model.log_likelihood(X_test).mean() - est.score(X_test)) < 0.05


def test_observed_internal_nodes_are_exact_with_hidden_copies():
    # observed X0 sits inside the tree (neighbours X1, X2 and hidden 5); hidden 5 holds X3, X4
    from ltm_sklearn import LatentTree

    tree = LatentTree([(0, 1), (0, 2), (0, 5), (5, 3), (5, 4)], n_observed=5, root=5)
    model = LatentTreeModel.random(tree, 3, 3, random_state=0)
    conf = model.all_configurations()
    p = np.exp(model.log_likelihood(conf))
    assert p.sum() == pytest.approx(1.0)
    est = SpectralLatentTree(3, tree=tree, max_iter=0, random_state=0)
    est.fit(conf, sample_weight=p)
    assert est.tree_.degree(0) == 3  # the user's tree is kept as given, and modelled as is
    assert set(est.cpts_[1].shape) == {3}  # P(X_1 | X_0): an observed-observed table
    np.testing.assert_allclose(np.exp(est.score_samples(conf)), p, rtol=1e-7)


# ---------------------------------------------------------------- writing of a tree
@pytest.fixture(scope="module")
def lettered():
    from ltm_sklearn.datasets import LatentTreeModel, balanced_binary_tree

    model = LatentTreeModel.random(balanced_binary_tree(8), 2, 3, noise=0.3, random_state=0)
    return pd.DataFrame(model.sample(3000, random_state=1), columns=list("abcdefgh"))


WRITINGS = [
    ("((a,b),(c,d),((e,f),(g,h)));", "(((g,h),(e,f)),(c,d),(a,b));"),
    ("((a,b),(c,d),(e,f),(g,h));", "((g,h),(e,f),(c,d),(a,b));"),  # grouped root children
    ("(((a,b),c,d,e),(f,g,h));", "((h,g,f),(e,d,c,(b,a)));"),  # grouped inner children
]


@pytest.mark.parametrize("Est", [HierarchicalTensorLTM, SpectralLatentTree, LatentTreeEM])
@pytest.mark.parametrize("max_iter", [0, 300])
@pytest.mark.parametrize("writings", WRITINGS)
def test_moment_start_does_not_depend_on_how_the_tree_is_written(lettered, Est, max_iter, writings):
    first, second = writings
    est = Est(tree=first, max_iter=max_iter, random_state=0).fit(lettered)
    other = Est(tree=second, max_iter=max_iter, random_state=0).fit(lettered)
    refit = Est(tree=est.tree_.to_newick(), max_iter=max_iter, random_state=0).fit(lettered)
    score = est.score(lettered)
    # the starts agree to double precision; EM's messages are float32 (from k' = 2), whose
    # rounding follows the order of the nodes: after 300 iterations the scores of the
    # writings differed by 3.6e-8 nats per row
    tol = 1e-8 if max_iter == 0 else 1e-6
    assert abs(other.score(lettered) - score) < tol
    assert abs(refit.score(lettered) - score) < tol


# ---------------------------------------------------------------- representation marginals
def _brute_force_table(raw, n_states, columns):
    """The joint table of ``columns`` under a raw representation: one full message pass
    over every configuration (the other columns missing)."""
    from ltm_sklearn._algorithms.spectral import spectral_log_abs

    shape = [int(n_states[j]) for j in columns]
    grid = np.indices(shape).reshape(len(shape), -1)
    codes = np.full((len(n_states), grid.shape[1]), -1, dtype=np.int16)
    for j, g in zip(columns, grid):
        codes[j] = g
    sign, logabs = spectral_log_abs(raw, codes)
    return (sign * np.exp(logabs)).reshape(shape)


@pytest.mark.parametrize("Est", [SpectralLatentTree, HierarchicalTensorLTM])
@pytest.mark.parametrize("newick", [WRITINGS[0][0], WRITINGS[1][0], WRITINGS[2][1]])
def test_representation_marginals_on_paths_equal_a_full_pass(lettered, Est, newick, monkeypatch):
    from ltm_sklearn._algorithms import spectral as spectral_module
    from ltm_sklearn._algorithms.spectral import RepresentationMoments

    est = Est(tree=newick, max_iter=0).fit(lettered)
    raw = est.raw_estimate_
    n_states = np.array([len(c) for c in est.categories_])
    rep = RepresentationMoments(raw, n_states)
    d = len(n_states)
    pairs = [(i, j) for i in range(d) for j in range(i + 1, d)]
    got = rep.pairs(pairs)
    for i, j in pairs:
        np.testing.assert_allclose(
            got[(i, j)], _brute_force_table(raw, n_states, (i, j)), atol=1e-14
        )
    for j, single in enumerate(rep.singletons()):
        np.testing.assert_allclose(single, _brute_force_table(raw, n_states, (j,)), atol=1e-14)
    rng = np.random.default_rng(0)
    requests = [
        (columns, tuple(rng.normal(size=(2, n_states[j])) for j in columns))
        for columns in [(0, 3, 7), (2, 5), (1, 4, 6), (3, 3, 0)]
    ]
    # requests evaluated together (one chunk) and one at a time (a chunk each) agree
    together = rep.projected(requests)
    monkeypatch.setattr(spectral_module, "_CHUNK_ELEMENTS", 1)
    alone = RepresentationMoments(raw, n_states).projected(requests)
    for (columns, projections), value, value_alone in zip(requests, together, alone):
        if len(set(columns)) < len(columns):  # (j, j, i): P(x_j, x_i) on the diagonal
            j, _, i = columns
            pair = _brute_force_table(raw, n_states, (j, i))
            dense = np.einsum("ab,ac->abc", np.eye(n_states[j]), pair)
        else:
            dense = _brute_force_table(raw, n_states, columns)
        for B in projections:  # contract the leading original mode, append the projected
            dense = np.tensordot(dense, B, axes=([0], [1]))
        np.testing.assert_allclose(value, dense, atol=1e-13)
        np.testing.assert_allclose(value_alone, value, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("Est", [SpectralLatentTree, HierarchicalTensorLTM])
def test_a_given_k_polishes_the_tensor_start_and_max_iter_0_keeps_the_estimators_own(
    Est, monkeypatch
):
    """Within the k' the moments identify, EM starts from the tensor decomposition of the
    empirical moments, and the estimator's raw estimate is kept all the same; with
    ``max_iter=0`` the model is the estimator's own explicit recovery."""
    model = LatentTreeModel.random(balanced_binary_tree(8), 3, 4, random_state=0)
    X, X_test = model.sample(5000, random_state=0), model.sample(1000, random_state=1)
    own = Est._initial_parameters
    calls = []

    def counted(self, *args):
        calls.append(args[2])
        return own(self, *args)

    monkeypatch.setattr(Est, "_initial_parameters", counted)
    polished = Est(3, tree=model.tree, random_state=0).fit(X)
    assert calls == []
    raw = Est(3, tree=model.tree, max_iter=0, random_state=0).fit(X)
    assert calls == [3]
    # the same raw estimate whichever start EM took
    np.testing.assert_allclose(polished.raw_log_abs(X_test)[1], raw.raw_log_abs(X_test)[1])
    gap = model.log_likelihood(X_test).mean() - polished.score(X_test)
    assert gap < model.log_likelihood(X_test).mean() - raw.score(X_test)
    assert gap < 0.01


def test_a_given_k_on_a_given_tree_is_one_model_for_the_moment_estimators():
    """EM starts from the shared tensor start there, so the spectral, hierarchical and
    tensor-initialised EM estimators return the same model (docs/api.rst)."""
    model = LatentTreeModel.random(balanced_binary_tree(8), 3, 4, random_state=0)
    X, X_test = model.sample(3000, random_state=0), model.sample(500, random_state=1)
    scores = [
        Est(3, tree=model.tree, random_state=0).fit(X).score_samples(X_test)
        for Est in (SpectralLatentTree, HierarchicalTensorLTM, LatentTreeEM)
    ]
    np.testing.assert_array_equal(scores[0], scores[1])
    np.testing.assert_array_equal(scores[0], scores[2])


def test_a_constant_child_message_is_folded_into_the_core():
    # a child without evidence below sends one vector to every row: folding it into the
    # core gives the message of its broadcast outer product
    rng = np.random.default_rng(0)
    core, a, b = rng.random((3, 4, 5)), rng.random((4, 7)), rng.random((5, 7))
    va, vb = rng.random(4), rng.random(5)
    full = lambda x, y: _internal_message(core, [x, y])  # noqa: E731
    np.testing.assert_allclose(
        _internal_message(core, [a, vb]), full(a, np.broadcast_to(vb[:, None], (5, 7)))
    )
    np.testing.assert_allclose(
        _internal_message(core, [va, b]), full(np.broadcast_to(va[:, None], (4, 7)), b)
    )
