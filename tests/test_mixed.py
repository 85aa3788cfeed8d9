"""Mixed numeric + categorical tables: one KernelLatentTree over both kinds of column."""

import numpy as np
import pandas as pd
import pytest
from scipy.special import logsumexp
from sklearn.datasets import load_breast_cancer

from ltm_sklearn import KernelLatentTree, LatentTreeEM
from ltm_sklearn._algorithms.kernel_leaves import code_evidence
from ltm_sklearn._engine.evidence import DenseEvidence
from ltm_sklearn._engine.inference import log_likelihood
from ltm_sklearn.datasets import LatentTreeModel, balanced_binary_tree, load_table


class MixedTruth:
    """A latent tree with categorical leaves; the leaves in ``numeric`` emit
    ``N(means[j, s], sigma^2)`` given their own state ``s`` instead of ``s`` itself."""

    def __init__(self, n_leaves=6, numeric=(0, 2, 4), n_states=3, sigma=0.4, seed=0):
        rng = np.random.default_rng(seed)
        self.model = LatentTreeModel.random(
            balanced_binary_tree(n_leaves), 2, n_states, noise=0.3, random_state=seed
        )
        self.numeric = list(numeric)
        self.means = {j: np.sort(rng.uniform(-3, 3, n_states)) for j in self.numeric}
        self.sigma = sigma

    def sample(self, n, seed):
        rng = np.random.default_rng(seed)
        S = self.model.sample(n, random_state=seed)
        X = pd.DataFrame({f"c{j}": S[:, j] for j in range(S.shape[1])})
        for j in range(S.shape[1]):
            if j in self.numeric:
                X[f"c{j}"] = self.means[j][S[:, j]] + self.sigma * rng.standard_normal(n)
            else:
                X[f"c{j}"] = pd.Categorical(np.array(list("abcdef"))[S[:, j]])
        return X

    def log_likelihood(self, X):
        vectors = {}
        for j in range(X.shape[1]):
            col = X.iloc[:, j]
            if j in self.numeric:
                x = col.to_numpy(float)[:, None]
                z = (x - self.means[j][None, :]) / self.sigma
                vectors[j] = np.exp(-0.5 * z * z) / (self.sigma * np.sqrt(2 * np.pi))
            else:
                codes = col.map(dict(zip("abcdef", range(6)))).to_numpy(float)
                vectors[j] = code_evidence(codes, self.model.n_states[j])
        m = self.model
        return log_likelihood(m.tree, m.root_marginal, m.cpts, DenseEvidence(vectors))


def _grid_mass(est, X_cat, numeric_cols, grid):
    """Sum over the categories of ``X_cat`` (a frame of the categorical columns, one row
    per configuration) of the integral of the density over ``grid`` per numeric column."""
    mesh = np.meshgrid(*([grid] * len(numeric_cols)), indexing="ij")
    points = np.column_stack([m.ravel() for m in mesh])
    cell = (grid[1] - grid[0]) ** len(numeric_cols)
    total = 0.0
    for _, row in X_cat.iterrows():
        rows = pd.DataFrame({c: np.repeat(row[c], len(points)) for c in X_cat.columns})
        for t, c in enumerate(numeric_cols):
            rows[c] = points[:, t]
        rows = rows[est.feature_names_in_]
        for c in X_cat.columns:
            rows[c] = pd.Categorical(rows[c], categories=est.categories_[list(rows).index(c)])
        total += np.exp(est.score_samples(rows)).sum() * cell
    return total


@pytest.mark.parametrize(
    "n_numeric, structure",
    [(1, "me"), pytest.param(2, "me", marks=pytest.mark.slow), (2, "chow_liu")],
)
def test_mixed_density_integrates_to_one(n_numeric, structure):
    truth = MixedTruth(n_leaves=4, numeric=range(n_numeric), n_states=3)
    X = truth.sample(800, seed=1)
    est = KernelLatentTree(2, structure=structure, random_state=0).fit(X)
    assert bool(est.tree_.hidden_nodes) == (structure != "chow_liu")
    numeric = [f"c{j}" for j in range(n_numeric)]
    categorical = [c for c in X.columns if c not in numeric]
    configs = pd.MultiIndex.from_product(
        [est.categories_[list(X.columns).index(c)] for c in categorical], names=categorical
    ).to_frame(index=False)
    grid = np.linspace(X[numeric].min().min() - 4, X[numeric].max().max() + 4, 700 // n_numeric)
    mass = _grid_mass(est, configs, numeric, grid)
    assert abs(mass - 1) < 0.01


def test_missing_entries_are_marginalised_exactly():
    truth = MixedTruth(n_leaves=4, numeric=[0], n_states=3)
    X = truth.sample(600, seed=2)
    est = KernelLatentTree(2, structure="me", random_state=0).fit(X)
    row = X.iloc[:1].copy()
    # a missing categorical entry: the sum over its categories
    filled = pd.concat([row] * 3, ignore_index=True)
    filled["c1"] = pd.Categorical(est.categories_[1], categories=est.categories_[1])
    row_nan = row.copy()
    row_nan["c1"] = np.nan
    np.testing.assert_allclose(
        est.score_samples(row_nan)[0], logsumexp(est.score_samples(filled)), atol=1e-10
    )
    # a missing numeric entry: the integral over its values
    grid = np.linspace(-40, 40, 16001)
    rows = pd.concat([row] * grid.size, ignore_index=True)
    rows["c0"] = grid
    integral = np.exp(est.score_samples(rows)).sum() * (grid[1] - grid[0])
    row_nan = row.copy()
    row_nan["c0"] = np.nan
    np.testing.assert_allclose(np.exp(est.score_samples(row_nan)[0]), integral, rtol=1e-6)


def test_mixed_truth_is_recovered_and_error_shrinks():
    truth = MixedTruth(n_leaves=6, numeric=[0, 2, 4], n_states=3, seed=3)
    X_test = truth.sample(4000, seed=99)
    exact = truth.log_likelihood(X_test).mean()
    gaps = []
    for n in (1000, 10000):
        est = KernelLatentTree(2, structure="me", random_state=0).fit(truth.sample(n, seed=n))
        gaps.append(exact - est.score(X_test))
    assert gaps[1] < gaps[0]
    assert 0 <= gaps[1] < 0.1


def test_conditional_queries_are_consistent_with_the_density():
    truth = MixedTruth(n_leaves=6, numeric=[0, 2, 4], n_states=3, seed=4)
    X = truth.sample(3000, seed=5)
    est = KernelLatentTree(2, structure="me", random_state=0).fit(X)
    rows = X.iloc[:4].copy()
    rows.iloc[1, 2] = np.nan  # a missing numeric entry among the evidence
    proba = est.conditional_proba(rows, target="c1")
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    joint = []
    for v in est.categories_[1]:
        filled = rows.copy()
        filled["c1"] = pd.Categorical([v] * len(rows), categories=est.categories_[1])
        joint.append(est.score_samples(filled))
    joint = np.column_stack(joint)
    np.testing.assert_allclose(proba, np.exp(joint - logsumexp(joint, axis=1, keepdims=True)))
    # the conditional mean of a numeric column is the mean of its conditional density
    grid = np.linspace(-10, 10, 4001)
    mean = est.conditional_mean(rows, target="c0")
    for r in range(len(rows)):
        many = pd.concat([rows.iloc[[r]]] * grid.size, ignore_index=True)
        many["c0"] = grid
        dens = np.exp(est.score_samples(many))
        assert abs(grid @ dens / dens.sum() - mean[r]) < 1e-3
    with pytest.raises(TypeError, match="categorical: use conditional_proba"):
        est.conditional_mean(rows, target="c1")
    with pytest.raises(TypeError, match="continuous and has no categories"):
        est.conditional_proba(rows, target="c0")


def test_indicator_leaves_make_the_kernel_model_the_discrete_one():
    """All columns categorical: the same explicit model family as LatentTreeEM (Song, Parikh & Xing
    (NIPS 2011)
    section 4), so on the true tree both reach the same held-out likelihood."""
    tree = balanced_binary_tree(8)
    truth = LatentTreeModel.random(tree, 2, 3, noise=0.4, random_state=0)
    X = truth.sample(5000, random_state=1).astype(str)
    X_test = truth.sample(3000, random_state=2).astype(str)
    exact = truth.log_likelihood(X_test.astype(int)).mean()
    kern = KernelLatentTree(2, tree=tree, alpha=0.5, random_state=0).fit(X)
    em = LatentTreeEM(2, tree=tree, alpha=0.5, random_state=0).fit(X)
    assert kern.is_categorical_.all()
    assert abs(kern.score(X_test) - em.score(X_test)) < 0.01
    assert 0 <= exact - kern.score(X_test) < 0.02


def test_unseen_category_and_sampling():
    truth = MixedTruth(n_leaves=4, numeric=[0], n_states=3)
    X = truth.sample(500, seed=6)
    est = KernelLatentTree(2, structure="me", random_state=0).fit(X)
    row = X.iloc[:1].astype({"c1": object})
    row.iloc[0, 1] = "zzz"
    value = est.score_samples(row)[0]
    assert np.isfinite(value) and value < est.score_samples(X.iloc[:1])[0]
    S = est.sample(200, random_state=0)  # fitted on a DataFrame: a DataFrame
    assert list(S.columns) == list(X.columns)
    assert set(S.iloc[:, 1]) <= set(est.categories_[1])
    assert np.isfinite(S.iloc[:, 0].astype(float)).all()


def test_auto_structure_picks_the_best_held_out_candidate():
    X, _ = load_table("contraceptive")
    est = KernelLatentTree(2, structure="auto", max_iter=50, random_state=0).fit(X)
    scores = est.structure_scores_
    assert set(scores) == {"chow_liu", "me", "star"}
    assert est.structure_ == max(scores, key=scores.get)
    assert np.isfinite(est.score(X))


@pytest.mark.slow  # about 4 s
def test_auto_structure_of_a_model_whose_fits_do_not_resume():
    # the race runs its one rung at full effort; its winner is refitted on every row
    # (before, a winner still running after the rung was resumed as a discrete fit)
    X = load_breast_cancer().data[:150]
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    est = KernelLatentTree(structure="auto", hidden="discrete", random_state=0).fit(X)
    assert est.structure_ in est.structure_scores_ and np.isfinite(est.score(X))


def test_categories_are_checked_on_a_table_without_categorical_columns():
    X = np.random.RandomState(0).randn(60, 4)
    with pytest.raises(ValueError, match="categories has 9 entries but X has 4 columns"):
        KernelLatentTree(categories=[[0, 1]] * 9, hidden="discrete").fit(X)
    with pytest.raises(ValueError, match="categories for a continuous column"):
        KernelLatentTree(categories=[[0, 1]] * 4, hidden="discrete").fit(X)
    KernelLatentTree(2, categories=[None] * 4, hidden="discrete", max_iter=5).fit(X)
