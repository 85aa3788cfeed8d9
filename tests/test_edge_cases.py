"""Regression tests of issue 27: edge cases that must end in a clear error naming the
problem or in a documented valid result."""

import re

import numpy as np
import pandas as pd
import pytest

from ltm_sklearn import (
    HierarchicalTensorLTM,
    KernelLatentTree,
    LatentTreeClassifier,
    LatentTreeEM,
    QuartetTreeLearner,
    SpectralLatentTree,
)

ESTIMATORS = [
    SpectralLatentTree,
    HierarchicalTensorLTM,
    QuartetTreeLearner,
    LatentTreeEM,
    KernelLatentTree,
]


# ---------------------------------------------------------------- duplicated names
@pytest.mark.parametrize("Est", ESTIMATORS)
def test_duplicated_column_names_refused(Est):
    X = pd.DataFrame(np.random.default_rng(0).integers(0, 2, (50, 3)), columns=list("aab"))
    with pytest.raises(ValueError, match=re.escape("duplicated column names ['a']")):
        Est().fit(X)


def test_duplicated_column_names_refused_in_partial_fit_and_classifier():
    X = pd.DataFrame(np.random.default_rng(0).integers(0, 2, (50, 4)), columns=list("abcb"))
    with pytest.raises(ValueError, match=re.escape("duplicated column names ['b']")):
        SpectralLatentTree().partial_fit(X)
    with pytest.raises(ValueError, match=re.escape("duplicated column names ['b']")):
        LatentTreeClassifier().fit(X, np.arange(50) % 2)


# ---------------------------------------------------------------- Newick labels
@pytest.mark.parametrize("newick", ["((a,b),(c,zz));", "((w,x),(y,zz));"])
def test_newick_labels_not_columns_named(newick):
    X = pd.DataFrame(np.random.default_rng(0).integers(0, 2, (200, 4)), columns=list("abcd"))
    with pytest.raises(ValueError) as info:
        SpectralLatentTree(tree=newick).fit(X)
    message = str(info.value)
    assert "'zz'" in message and "'a'" not in message.split(";")[0]
    assert "the columns are ['a', 'b', 'c', 'd']" in message
    assert "no column names are given" not in message


def test_newick_column_indices_still_accepted_with_names():
    X = pd.DataFrame(np.random.default_rng(0).integers(0, 2, (200, 4)), columns=list("abcd"))
    est = SpectralLatentTree(tree="((0,1),(2,3));").fit(X)
    assert est.tree_.n_observed == 4


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
    assert abs(other.score(lettered) - score) < 1e-8
    assert abs(refit.score(lettered) - score) < 1e-8


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
def test_representation_marginals_on_paths_equal_a_full_pass(lettered, Est, newick):
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
    for columns in [(0, 3, 7), (2, 5), (1, 4, 6)]:
        projections = tuple(rng.normal(size=(2, n_states[j])) for j in columns)
        (value,) = rep.projected([(columns, projections)])
        dense = _brute_force_table(raw, n_states, columns)
        for B in projections:  # contract the leading original mode, append the projected
            dense = np.tensordot(dense, B, axes=([0], [1]))
        np.testing.assert_allclose(value, dense, atol=1e-13)


# ---------------------------------------------------------------- quartets on a deep chain
def test_quartet_insertion_searches_near_the_nearest_column():
    from ltm_sklearn._algorithms.structure import learn_tree_quartets
    from ltm_sklearn.datasets import LatentTreeModel, hmm_chain
    from ltm_sklearn.metrics import robinson_foulds
    from ltm_sklearn.moments import MomentEstimator

    model = LatentTreeModel.random(hmm_chain(100), 2, 3, noise=0.3, random_state=0)
    X = model.sample(5000, random_state=10)
    moments = MomentEstimator(np.asarray(X.T, dtype=np.int16), np.full(100, 3))
    tree, _ = learn_tree_quartets(moments, 2)
    # searching the whole tree from its centroid got every split wrong here (RF 190)
    assert robinson_foulds(tree, model.tree) == 0
