import numpy as np
import pytest

from ltm_sklearn.datasets import (
    LatentTreeModel,
    balanced_binary_tree,
    broad_tree,
    deep_tree,
    hmm_chain,
    load_debd,
    random_binary_tree,
    star_tree,
)


@pytest.mark.parametrize(
    "tree, n_leaves, n_hidden",
    [
        (balanced_binary_tree(16), 16, 14),
        (random_binary_tree(16, random_state=0), 16, 14),
        (star_tree(5), 5, 1),
        (hmm_chain(20), 20, 20),
        (broad_tree(3), 9, 4),
        (deep_tree(5), 7, 5),
    ],
)
def test_topologies(tree, n_leaves, n_hidden):
    assert tree.n_observed == n_leaves
    assert len(tree.hidden_nodes) == n_hidden
    assert sorted(tree.leaves) == list(range(n_leaves))


def test_binary_trees_have_degree_three_hidden_nodes():
    for t in (balanced_binary_tree(16), random_binary_tree(30, random_state=1), deep_tree(4)):
        assert all(t.degree(h) == 3 for h in t.hidden_nodes)


@pytest.mark.parametrize("tree", [balanced_binary_tree(6), hmm_chain(5), broad_tree(2)])
def test_exact_likelihood_sums_to_one(tree):
    m = LatentTreeModel.random(tree, 2, 3, random_state=0)
    p = np.exp(m.log_likelihood(m.all_configurations()))
    assert p.sum() == pytest.approx(1.0, abs=1e-12)


def test_nan_is_marginalised():
    m = LatentTreeModel.random(balanced_binary_tree(6), 2, 3, random_state=1)
    x = np.array([[0, 1, 2, np.nan, 1, 0]], dtype=float)
    total = 0.0
    for v in range(3):
        xv = x.copy()
        xv[0, 3] = v
        total += np.exp(m.log_likelihood(xv)[0])
    assert np.exp(m.log_likelihood(x)[0]) == pytest.approx(total, rel=1e-12)
    assert m.log_likelihood(np.full((1, 6), np.nan))[0] == pytest.approx(0.0, abs=1e-12)


def test_sampling_matches_exact_marginals():
    m = LatentTreeModel.random(hmm_chain(6), 2, 4, random_state=2)
    X = m.sample(200_000, random_state=0)
    for i, j in [(0, 1), (2, 5)]:
        emp = np.zeros((4, 4))
        np.add.at(emp, (X[:, i], X[:, j]), 1.0)
        # 200k draws: the standard error of a cell is below 0.0012
        assert np.abs(emp / len(X) - m.marginal((i, j))).max() < 0.006


def test_long_chain_likelihood_is_finite():
    m = LatentTreeModel.random(hmm_chain(300), 2, 4, random_state=0)
    ll = m.log_likelihood(m.sample(50, random_state=0))
    assert np.all(np.isfinite(ll)) and ll.max() < -100


def test_noise_controls_conditioning():
    t = balanced_binary_tree(4)
    strong = LatentTreeModel.random(t, 2, 4, noise=0.1, random_state=0)
    weak = LatentTreeModel.random(t, 2, 4, noise=1.0, random_state=0)
    s_strong = np.linalg.svd(strong.marginal((0, 1)), compute_uv=False)[1]
    s_weak = np.linalg.svd(weak.marginal((0, 1)), compute_uv=False)[1]
    assert s_strong > s_weak


def test_bad_states_rejected():
    m = LatentTreeModel.random(star_tree(3), 2, 3, random_state=0)
    with pytest.raises(ValueError, match="whole-number"):
        m.log_likelihood([[0.5, 1, 1]])
    with pytest.raises(ValueError, match="outside"):
        m.log_likelihood([[3, 1, 1]])


def test_density_benchmark_sets_are_bundled():
    train, valid, test = load_debd("nltcs")
    assert train.shape == (16181, 16) and valid.shape == (2157, 16) and test.shape == (3236, 16)
    assert set(np.unique(train)) == {0, 1}
    with pytest.raises(ValueError, match="Unknown set"):
        load_debd("mnist")


def test_random_model_refuses_a_tree_rooted_at_a_column():
    tree = balanced_binary_tree(4).rooted_at(0)
    with pytest.raises(ValueError, match="rooted at observed node 0 of 3 categories"):
        LatentTreeModel.random(tree, 2, 3, random_state=0)
    # a root column with as many categories as the hidden states is consistent
    LatentTreeModel.random(tree, 3, 3, random_state=0).sample(5, random_state=0)
