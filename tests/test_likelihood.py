"""Every estimator is a normalised model: exact mass, independence at k' = 1, EM
polishing, k' beyond the categories, and the shared ``structure="auto"`` choice."""

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.exceptions import FitFailedWarning
from sklearn.model_selection import GridSearchCV

from ltm_sklearn import (
    HierarchicalTensorLTM,
    LatentTree,
    LatentTreeEM,
    QuartetTreeLearner,
    SpectralLatentTree,
)
from ltm_sklearn._algorithms.em import log_prior
from ltm_sklearn.datasets import (
    LatentTreeModel,
    balanced_binary_tree,
    load_table,
    random_binary_tree,
)

ESTIMATORS = [SpectralLatentTree, HierarchicalTensorLTM, QuartetTreeLearner, LatentTreeEM]


def total_mass(est, sizes):
    grid = np.array(np.meshgrid(*[np.arange(s) for s in sizes], indexing="ij"))
    grid = grid.reshape(len(sizes), -1).T
    return np.exp(est.score_samples(grid)).sum()


@pytest.mark.parametrize("cls", ESTIMATORS)
@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_exact_mass_on_small_random_trees(cls, k):
    tree = random_binary_tree(6, random_state=k)
    model = LatentTreeModel.random(tree, 2, [2, 3, 2, 3, 2, 3], random_state=k)
    X = model.sample(800, random_state=0)
    est = cls(k, random_state=0).fit(X)
    assert total_mass(est, [2, 3, 2, 3, 2, 3]) == pytest.approx(1.0, abs=1e-9)


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_exact_mass_on_a_real_table(cls):
    # breast: 9 categorical columns, 166,320 configurations (declared categories)
    X, _ = load_table("breast")
    est = cls(2, random_state=0).fit(X)
    sizes = [len(X[c].cat.categories) for c in X.columns]
    grid = np.array(np.meshgrid(*[np.arange(s) for s in sizes], indexing="ij"))
    grid = grid.reshape(len(sizes), -1).T
    rows = pd.DataFrame(
        {
            c: pd.Categorical.from_codes(grid[:, j], categories=X[c].cat.categories)
            for j, c in enumerate(X.columns)
        }
    )
    assert np.exp(est.score_samples(rows)).sum() == pytest.approx(1.0, abs=1e-9)


@pytest.mark.parametrize("cls", ESTIMATORS[:2] + [LatentTreeEM])
def test_one_hidden_state_is_the_independence_model(cls):
    model = LatentTreeModel.random(balanced_binary_tree(8), 2, 4, random_state=0)
    X = model.sample(3000, random_state=0)
    X_test = model.sample(500, random_state=1)
    est = cls(1, tree=model.tree, random_state=0).fit(X)
    # product of the columns' marginals with the same pseudo-count alpha = 0.5
    expect = np.zeros(len(X_test))
    for j in range(8):
        counts = np.bincount(X[:, j], minlength=4) + est.alpha_
        expect += np.log(counts / counts.sum())[X_test[:, j]]
    np.testing.assert_allclose(est.score_samples(X_test), expect, rtol=1e-9, atol=1e-9)


def test_em_polishing_never_lowers_the_training_objective():
    for seed in range(3):
        model = LatentTreeModel.random(
            random_binary_tree(10, random_state=seed), 3, 4, random_state=seed
        )
        X = model.sample(3000, random_state=seed)
        start = SpectralLatentTree(3, tree=model.tree, max_iter=0, random_state=0).fit(X)
        polished = SpectralLatentTree(3, tree=model.tree, random_state=0).fit(X)

        def objective(est, X):
            prior = log_prior(est.root_marginal_, est.cpts_, est.alpha_)
            return est.score(X) + prior / len(X)

        assert objective(polished, X) >= objective(start, X) - 1e-9
        assert polished.score(X) > start.score(X)


@pytest.mark.slow
@pytest.mark.parametrize("cls", ESTIMATORS)
def test_hidden_states_beyond_the_categories_on_binary_data(cls):
    model = LatentTreeModel.random(balanced_binary_tree(8), 2, 2, random_state=0)
    X = model.sample(1500, random_state=0)
    grid = GridSearchCV(cls(random_state=0), {"n_hidden_states": [1, 2, 3, 4]}, cv=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FitFailedWarning)
        warnings.simplefilter("error", UserWarning)  # includes non-finite score warnings
        grid.fit(X)
    assert np.all(np.isfinite(grid.cv_results_["mean_test_score"]))
    est = cls(4, random_state=0).fit(X)
    hidden = est.tree_.hidden_nodes
    assert all(est.cpts_[h].shape[1] == 4 for h in hidden if h != est.tree_.root)
    assert total_mass(est, [2] * 8) == pytest.approx(1.0, abs=1e-9)


def test_structure_auto_reports_its_choice_and_contains_chow_liu():
    # a fully observed Markov chain: the Chow-Liu tree is the truth and auto should find
    # a model at least as good on held-out rows
    chain = LatentTree([(i, i + 1) for i in range(7)], 8)
    model = LatentTreeModel.random(chain, 3, 3, noise=0.4, random_state=0)
    model = LatentTreeModel(chain, np.full(8, 3), model.root_marginal, model.cpts)
    X, X_test = model.sample(4000, random_state=0), model.sample(2000, random_state=1)
    auto = SpectralLatentTree(2, random_state=0).fit(X)
    cl = SpectralLatentTree(2, structure="chow_liu", random_state=0).fit(X)
    assert set(auto.structure_scores_) == {"chow_liu", "clnj", "me", "star", "hclt", "grouped_hclt"}
    assert auto.structure_ == max(auto.structure_scores_, key=auto.structure_scores_.get)
    assert cl.tree_.hidden_nodes == [] and cl.tree_.edges == chain.edges
    assert auto.score(X_test) > cl.score(X_test) - 0.01


@pytest.mark.parametrize("stage_rows", [None, 100])
def test_polish_keeps_the_best_of_several_starts_compared_on_the_subsample(stage_rows, monkeypatch):
    """Beyond 2 x STAGE_ROWS distinct rows the starts are compared after EM on one
    common subsample and only the best goes on to all rows; below, each start runs to the
    end. Either way a start near the truth wins over a uniform-ish one that EM cannot
    leave (a symmetric point), whatever its position in the list; and the rows merged or
    repeated, in any order, give the same fit."""
    from ltm_sklearn._algorithms import em
    from ltm_sklearn._algorithms.em import node_states, polish, unique_rows

    if stage_rows is not None:  # 5,000 rows of 6 leaves of 3 categories: ~600 distinct
        monkeypatch.setattr(em, "STAGE_ROWS", stage_rows)

    model = LatentTreeModel.random(balanced_binary_tree(6), 2, 3, noise=0.3, random_state=0)
    n_states = node_states(model.tree, np.full(6, 3), 2)
    flat = (
        np.full(2, 0.5),
        {
            u: np.full((n_states[model.tree.parent[u]], n_states[u]), 1.0 / n_states[u])
            for u in model.cpts
        },
    )
    truth = (model.root_marginal, model.cpts)
    codes = model.sample(5_000, random_state=1).T
    w = np.ones(codes.shape[1])
    merged = unique_rows(codes, w)
    assert (merged[1].size > 2 * em.STAGE_ROWS) == (stage_rows is not None)
    shuffled = codes[:, np.random.RandomState(0).permutation(codes.shape[1])]
    for starts, winner in (([flat, truth], 1), ([truth, flat], 0)):
        fits = [
            polish(model.tree, *starts[0], c, v, np.full(6, 3), others=starts[1:], alpha=0.5)
            for c, v in [(codes, w), merged, (shuffled, w)]
        ]
        assert fits[0][-1] == winner
        alone = polish(model.tree, *truth, codes, w, np.full(6, 3), alpha=0.5)
        assert fits[0][2] == pytest.approx(alone[2], abs=1e-12)
        for other in fits[1:]:  # merged or shuffled: the same fit
            assert other[3] == fits[0][3] and other[2] == pytest.approx(fits[0][2], abs=1e-12)
            for u in fits[0][1]:
                np.testing.assert_allclose(other[1][u], fits[0][1][u], atol=1e-12)
