"""Hidden nodes with their own numbers of states: ``prune_states`` and ``min_state_rows``."""

import itertools
import re

import numpy as np
import pytest
from sklearn.utils._param_validation import InvalidParameterError

from ltm_sklearn import LatentTree, SpectralLatentTree
from ltm_sklearn._algorithms.em import average_members, node_marginals
from ltm_sklearn._algorithms.hidden_states import hidden_state_counts, prune_states
from ltm_sklearn._engine.moments import MomentEstimator
from ltm_sklearn._estimators.fits import TABLE_MEMORY
from ltm_sklearn.datasets import LatentTreeModel, balanced_binary_tree


def _model(tree, root, cpts, n_observed_states):
    counts = hidden_state_counts(tree, root, cpts)
    n_states = np.concatenate([n_observed_states, counts])
    return LatentTreeModel(tree, n_states, root, cpts)


def _brute_force(tree, root, cpts, x, n_states):
    """``p(x)`` by summing over every configuration of the hidden nodes."""
    hidden = tree.hidden_nodes
    total = 0.0
    for hs in itertools.product(*[range(n_states[h]) for h in hidden]):
        state = dict(zip(hidden, hs))
        state.update(enumerate(x))
        p = root[state[tree.root]]
        for u in range(tree.n_nodes):
            if u != tree.root:
                p *= cpts[u][state[tree.parent[u]], state[u]]
        total += p
    return total


def _with_rare_states(random_state=0):
    """A 4-leaf truth with 2 states per hidden node, averaged with a second member
    of weight 0.002: 4 states per hidden node, two of them rare."""
    tree = balanced_binary_tree(4)
    a = LatentTreeModel.random(tree, 2, 3, random_state=random_state)
    b = LatentTreeModel.random(tree, 2, 3, random_state=random_state + 1)
    members = [(a.root_marginal, a.cpts), (b.root_marginal, b.cpts)]
    root, cpts = average_members(tree, members, weights=[0.998, 0.002])
    return tree, root, cpts


def test_zero_threshold_keeps_every_state():
    tree, root, cpts = _with_rare_states()
    pruned_root, pruned = prune_states(tree, root, cpts, 0.0)
    np.testing.assert_array_equal(pruned_root, root)
    for u in cpts:
        np.testing.assert_array_equal(pruned[u], cpts[u])


def test_states_without_probability_go_and_the_density_stays():
    tree = balanced_binary_tree(4)
    truth = LatentTreeModel.random(tree, 2, 3, random_state=0)
    # a third state at every hidden node that the model never enters
    root = np.append(truth.root_marginal, 0.0)
    cpts = {}
    for u, table in truth.cpts.items():
        if tree.is_hidden(u):
            table = np.hstack([table, np.zeros((len(table), 1))])
        if tree.is_hidden(tree.parent[u]):
            table = np.vstack([table, np.full(table.shape[1], 1.0 / table.shape[1])])
        cpts[u] = table
    pruned_root, pruned = prune_states(tree, root, cpts, 1e-9)
    assert list(hidden_state_counts(tree, pruned_root, pruned)) == [2, 2]
    X = truth.all_configurations()
    model = _model(tree, pruned_root, pruned, truth.n_states[:4])
    np.testing.assert_allclose(model.log_likelihood(X), truth.log_likelihood(X), rtol=1e-12)


def test_pruned_model_is_normalised_by_brute_force():
    tree, root, cpts = _with_rare_states()
    marginals = node_marginals(tree, root, cpts)
    assert min(marginals[h].min() for h in tree.hidden_nodes) < 0.002
    pruned_root, pruned = prune_states(tree, root, cpts, 0.002)
    counts = hidden_state_counts(tree, pruned_root, pruned)
    assert counts.max() < 4 and counts.min() >= 2
    n_states = np.concatenate([np.full(4, 3), counts])
    X = list(itertools.product(range(3), repeat=4))
    brute = np.array([_brute_force(tree, pruned_root, pruned, x, n_states) for x in X])
    assert brute.sum() == pytest.approx(1.0, abs=1e-12)
    # the message passes agree with the brute-force sum
    model = _model(tree, pruned_root, pruned, np.full(4, 3))
    np.testing.assert_allclose(np.exp(model.log_likelihood(np.array(X, float))), brute)
    for table in pruned.values():
        np.testing.assert_allclose(table.sum(axis=1), 1.0)


def test_a_row_left_without_probability_takes_the_node_marginal():
    tree = LatentTree([(0, 3), (1, 4), (2, 4), (4, 3)], 3)  # 3 root; 4 hidden
    root = np.array([0.5, 0.5])
    cpts = {
        0: np.array([[0.9, 0.1], [0.1, 0.9]]),
        # state 1 of the root only leads to the rare states 1 and 2 of node 4
        4: np.array([[0.998, 0.001, 0.001], [0.0, 0.5, 0.5]]),
        1: np.array([[0.8, 0.2], [0.3, 0.7], [0.5, 0.5]]),
        2: np.array([[0.6, 0.4], [0.2, 0.8], [0.5, 0.5]]),
    }
    # node 4: P = (0.499, 0.2505, 0.2505): with min_mass 0.3 only state 0 stays
    pruned_root, pruned = prune_states(tree, root, cpts, 0.3)
    np.testing.assert_allclose(pruned[4], [[1.0], [1.0]])
    assert pruned[1].shape == (1, 2)
    np.testing.assert_allclose(pruned_root, root)


def test_the_most_probable_state_always_stays():
    tree, root, cpts = _with_rare_states()
    pruned_root, pruned = prune_states(tree, root, cpts, 2.0)
    assert list(hidden_state_counts(tree, pruned_root, pruned)) == [1, 1]
    assert pruned_root.tolist() == [1.0]


def _rows(random_state=0, n=600):
    tree = balanced_binary_tree(6)
    truth = LatentTreeModel.random(tree, 2, 3, random_state=random_state)
    return truth, truth.sample(n, random_state=random_state + 1)


def test_auto_chooses_on_held_out_rows_and_the_model_stays_normalised():
    truth, X = _rows()
    est = SpectralLatentTree(
        n_hidden_states="auto", tree=truth.tree, n_members=2, random_state=0
    ).fit(X)
    assert 0.0 in est.min_state_rows_scores_
    assert est.min_state_rows_ in est.min_state_rows_scores_
    best = max(est.min_state_rows_scores_.values())
    assert est.min_state_rows_scores_[est.min_state_rows_] >= best - 1e-4
    counts = est.hidden_state_counts_
    assert counts.shape == (len(est.tree_.hidden_nodes),)
    assert counts.max() <= est.n_members_ * est.n_hidden_states_
    # every configuration's probability sums to one
    all_rows = truth.all_configurations()
    assert np.exp(est.score_samples(all_rows)).sum() == pytest.approx(1.0, abs=1e-9)
    post = est.predict_hidden_proba(X[:5])
    np.testing.assert_allclose(post.sum(axis=2), 1.0)
    assert est.predict_proba(X[:5]).shape == (
        5,
        counts[est.tree_.hidden_nodes.index(est.tree_.root)],
    )


def test_a_given_threshold_prunes_without_a_selection_and_zero_keeps_all():
    truth, X = _rows()
    kept = SpectralLatentTree(6, tree=truth.tree, n_members=1, random_state=0).fit(X)
    assert kept.min_state_rows_ == 0.0  # "auto" without a selection
    assert list(kept.hidden_state_counts_) == [6] * len(truth.tree.hidden_nodes)
    pruned = SpectralLatentTree(
        6, tree=truth.tree, n_members=1, min_state_rows=60.0, random_state=0
    ).fit(X)
    assert not hasattr(pruned, "min_state_rows_scores_")
    assert pruned.min_state_rows_ == 60.0
    assert pruned.hidden_state_counts_.sum() < kept.hidden_state_counts_.sum()
    marginals = node_marginals(pruned.tree_, pruned.root_marginal_, pruned.cpts_)
    # the kept states held 60 rows or more before the others' share was spread
    assert min(marginals[h].min() for h in pruned.tree_.hidden_nodes) * len(X) > 30
    assert np.isfinite(pruned.score(X))
    assert pruned.sample(3, random_state=0).shape == (3, X.shape[1])


def test_negative_threshold_is_refused():
    truth, X = _rows()
    with pytest.raises(InvalidParameterError, match="min_state_rows"):
        SpectralLatentTree(2, min_state_rows=-1.0).fit(X)


def test_too_many_states_for_the_memory_budget_name_the_most_that_fit():
    X = np.random.default_rng(0).integers(0, 4, (300, 200))
    est = SpectralLatentTree(1000, structure="hclt")
    with pytest.raises(ValueError, match=r"at most n_hidden_states=(\d+) fits") as info:
        est.fit(X)
    most = int(re.search(r"at most n_hidden_states=(\d+)", str(info.value)).group(1))
    moments = MomentEstimator(X.T.astype(np.int64), np.full(200, 4))
    assert est._table_bytes(moments, most) <= TABLE_MEMORY < est._table_bytes(moments, most + 1)
