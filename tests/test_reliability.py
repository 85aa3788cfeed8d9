"""Regression tests of the reliability catalogue: no silent wrong numbers, no crash on
valid input, clear errors naming the problem."""

import numpy as np
import pandas as pd
import pytest

from ltm_sklearn import (
    HierarchicalTensorLTM,
    KernelLatentTree,
    LatentTree,
    LatentTreeEM,
    QuartetTreeLearner,
    SpectralLatentTree,
)
from ltm_sklearn.datasets import (
    GaussianLeafTreeModel,
    LatentTreeModel,
    balanced_binary_tree,
    hmm_chain,
)
from ltm_sklearn.metrics import robinson_foulds

DISCRETE = [SpectralLatentTree, HierarchicalTensorLTM, QuartetTreeLearner, LatentTreeEM]


def sample(n=2000, seed=0, d=6, k=2, n_states=3):
    model = LatentTreeModel.random(balanced_binary_tree(d), k, n_states, random_state=seed)
    return model, model.sample(n, random_state=seed)


@pytest.mark.parametrize("cls", DISCRETE)
def test_all_missing_column_contributes_a_factor_of_one(cls):
    model, X = sample()
    X_test = sample(500, seed=1)[1]
    add_nan = lambda A: np.column_stack([A.astype(float), np.full(len(A), np.nan)])  # noqa: E731
    est = cls(2, random_state=0).fit(add_nan(X))
    ll = est.score_samples(add_nan(X_test))
    # the model of the other columns is intact: close to the truth (measured gaps 0.001-0.02)
    assert np.all(np.isfinite(ll))
    assert ll.mean() > model.log_likelihood(X_test).mean() - 0.05
    # the empty column is a leaf with one (phantom) state: a factor of one when missing
    assert est.tree_.degree(6) == 1 and est.categories_[6] == []
    # it has no category to draw (its draws are missing) or to give the probability of
    drawn = est.sample(50, random_state=0)
    assert np.isnan(drawn[:, 6]).all() and not np.isnan(drawn[:, :6]).any()
    with pytest.raises(ValueError, match="Column 6 had no observed value"):
        est.conditional_proba(add_nan(X_test[:5]), target=6)
    proba = est.conditional_proba(add_nan(X_test[:5]), target=0)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


def test_kernel_refuses_an_all_missing_column():
    X = GaussianLeafTreeModel.random(balanced_binary_tree(4), 2, random_state=0).sample(300)
    X = np.column_stack([X, np.full(300, np.nan)])
    with pytest.raises(ValueError, match=r"Columns \[4\] have no observed value"):
        KernelLatentTree().fit(X)


def test_draw_places_leaves_in_depth_first_order():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    tree = LatentTree.from_newick("((0,(1,2)),(3,4));")
    ax = tree.draw()
    x = {}
    for coll in ax.collections:  # one scatter per node, in node order
        x[len(x)] = coll.get_offsets()[0][0]
    leaves = [u for u in tree.depth_first_order() if not tree.children[u]]
    assert [x[u] for u in leaves] == sorted(x[u] for u in leaves)
    # every subtree holds a contiguous run of leaves: no two edges cross
    for u in range(tree.n_nodes):
        below = sorted(x[v] for v in tree.subtree_leaves(u))
        if below:
            assert below == list(np.arange(below[0], below[0] + len(below)))


@pytest.mark.slow
def test_deep_given_tree_fits_without_recursion():
    model = LatentTreeModel.random(hmm_chain(1000), 2, 2, random_state=0)
    X = model.sample(300, random_state=0)
    est = SpectralLatentTree(2, tree=model.tree, max_iter=2).fit(X)
    assert np.all(np.isfinite(est.score_samples(X[:5])))
    back = LatentTree.from_newick(model.tree.to_newick())
    assert robinson_foulds(back, model.tree) == 0 and back.n_nodes == model.tree.n_nodes


def test_datetime_column_is_named():
    df = pd.DataFrame(
        {
            "a": [1, 2, 1, 2] * 10,
            "when": pd.date_range("2020-01-01", periods=40),
            "c": [0, 1] * 20,
        }
    )
    for est in (SpectralLatentTree(), KernelLatentTree()):
        with pytest.raises(TypeError, match="'when'.*datetime64"):
            est.fit(df)


@pytest.mark.parametrize("Est", [SpectralLatentTree, LatentTreeEM])
def test_row_weights_beyond_single_precision_are_refused(Est):
    # 1e38 a row overflowed the float32 posteriors: a uniform model, warnings only
    X = np.random.RandomState(0).randint(0, 3, (60, 4))
    with pytest.raises(ValueError, match="sample_weight holds values up to 1e.38"):
        Est(2, structure="hclt", random_state=0).fit(X, sample_weight=np.full(60, 1e38))
    est = Est(2, structure="hclt", random_state=0).fit(X, sample_weight=np.full(60, 1e29))
    assert np.ptp(est.score_samples(X)) > 0.5  # not the uniform model


def test_score_sample_weight_is_validated():
    _, X = sample(300)
    est = SpectralLatentTree(random_state=0).fit(X)
    with pytest.raises(ValueError, match="sample_weight"):
        est.score(X, sample_weight=np.ones(5))
    with pytest.raises(ValueError, match="[Nn]egative"):
        est.score(X, sample_weight=-np.ones(len(X)))
    w = np.r_[np.ones(100), np.zeros(200)]
    assert est.score(X, sample_weight=w) == pytest.approx(est.score(X[:100]))


def test_tree_labels_follow_column_names():
    model, X = sample(3000, d=4)
    names = ["w", "x", "y", "z"]
    df = pd.DataFrame(X, columns=names)
    a = SpectralLatentTree(2, tree="((w,x),y,z);", random_state=0).fit(df)
    # the same tree built with its own names, in another order
    tree = LatentTree.from_newick("((x,w),z,y);", feature_names=["x", "w", "z", "y"])
    b = SpectralLatentTree(2, tree=tree, random_state=0).fit(df)
    assert a.tree_ == b.tree_
    np.testing.assert_allclose(a.score_samples(df), b.score_samples(df))
    with pytest.raises(ValueError, match="not column indices"):
        SpectralLatentTree(2, tree="((w,x),y,z);").fit(X)


@pytest.mark.parametrize("scale", [1e200, 1e-200])
def test_kernel_works_at_any_scale(scale):
    X = GaussianLeafTreeModel.random(balanced_binary_tree(4), 2, random_state=0).sample(
        800, random_state=0
    )
    # the kernel form (GaussianLatentTree's own scale test is in test_gaussian)
    ref = KernelLatentTree(hidden="discrete", random_state=0).fit(X)
    est = KernelLatentTree(hidden="discrete", random_state=0).fit(X * scale)
    ll = est.score_samples(X[:20] * scale)
    assert np.all(np.isfinite(ll))
    # a change of units shifts the log-density by the Jacobian
    np.testing.assert_allclose(ll + 4 * np.log(scale), ref.score_samples(X[:20]), atol=1e-6)
    np.testing.assert_allclose(
        est.conditional_mean(X[:5] * scale, 0) / scale, ref.conditional_mean(X[:5], 0), rtol=1e-6
    )


def test_kernel_density_is_valid_for_any_bandwidth():
    # the case: bandwidth_scale=1e-3 used to floor every training row; the explicit
    # model has no floor, and tiny bumps give a valid (if spiky) density, worse on new rows
    truth = GaussianLeafTreeModel.random(balanced_binary_tree(4), 2, random_state=0)
    X, X_test = truth.sample(500, random_state=0), truth.sample(500, random_state=1)
    tiny = KernelLatentTree(hidden="discrete", bandwidth_scale=1e-3, random_state=0).fit(X)
    chosen = KernelLatentTree(hidden="discrete", random_state=0).fit(X)
    assert np.all(np.isfinite(tiny.score_samples(X_test)))
    assert chosen.score(X_test) > tiny.score(X_test)
    assert not hasattr(chosen, "n_floored_")


def test_em_verbose_prints_progress(capsys):
    model, X = sample(500)
    LatentTreeEM(2, tree=model.tree, verbose=2, random_state=0).fit(X)
    out = capsys.readouterr().out
    assert "EM iteration" in out and "restart 1/1" in out


@pytest.mark.parametrize("cls", [SpectralLatentTree, HierarchicalTensorLTM])
def test_one_hidden_state_keeps_the_columns_frequencies(cls):
    # k' = 1 is the independence model: its moment estimate is every column's frequencies
    model, X = sample()
    est = cls(1, tree=model.tree, max_iter=0, n_members=1, min_state_rows=0).fit(X)
    for j in range(X.shape[1]):
        freq = np.bincount(X[:, j], minlength=len(est.categories_[j])) / len(X)
        np.testing.assert_allclose(est.cpts_[j][0], freq, atol=1e-12)


@pytest.mark.parametrize("cls", [SpectralLatentTree, HierarchicalTensorLTM])
def test_more_states_than_the_moments_identify_copy_the_moment_estimate(cls):
    # binary columns identify two states: max_iter=0 at k' = 4 keeps the 2-state moment
    # estimate (states copied, the same distribution), whatever random_state, and says so
    model = LatentTreeModel.random(balanced_binary_tree(6), 2, 2, random_state=0)
    X, T = model.sample(3000, random_state=1), model.sample(500, random_state=2)
    kw = dict(tree=model.tree, max_iter=0, n_members=1, min_state_rows=0)
    two = cls(2, random_state=0, **kw).fit(X).score(T)
    for seed in (0, 1):
        with pytest.warns(UserWarning, match="more than the moments identify"):
            four = cls(4, random_state=seed, **kw).fit(X)
        # random tables kept scored 1.2-1.4 nats per row below, moving with the seed
        assert abs(four.score(T) - two) < 0.01
        # every hidden state is one of two, copied: the root's probabilities pair up
        assert np.unique(np.round(four.root_marginal_, 12)).size <= 2
