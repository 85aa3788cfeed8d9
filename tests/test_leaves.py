"""The leaf models of :mod:`ltm_sklearn._algorithms.leaves`, tested directly: what they
encode, that a model scored through them is normalised (enumeration over categories,
quadrature over continuous values), and that the rows of their moments score as the
same rows encoded anew."""

import itertools

import numpy as np
import pytest

from ltm_sklearn import LatentTree
from ltm_sklearn._algorithms.em import node_states, random_cpts
from ltm_sklearn._algorithms.leaves import BumpLeaves, CategoricalLeaves
from ltm_sklearn._estimators.fits import FittedModel


def _random_model(leaf_sizes, k=2, seed=0):
    tree = LatentTree.star(len(leaf_sizes))
    root, cpts = random_cpts(tree, node_states(tree, leaf_sizes, k), seed)
    return FittedModel(tree, root, cpts)


def test_categorical_leaves_learn_categories_from_rows_of_positive_weight():
    X = np.array([["a", "x"], ["b", "y"], ["c", "x"]], dtype=object)
    leaves = CategoricalLeaves()
    leaves.inspect(X)
    codes = leaves.fit_transform(X, sample_weight=np.array([1.0, 1.0, 0.0]))
    assert [list(c) for c in leaves.fitted_attributes()["categories_"]] == [["a", "b"], ["x", "y"]]
    assert codes[0, 2] == -2  # "c" came from a row of weight zero: not a category
    moments = leaves.moments(codes, np.array([1.0, 1.0, 0.0]))
    # the add-one probability of a new category: 1 / (categories + weight + 1)
    np.testing.assert_allclose(leaves.unseen_proba(moments), [1 / 5, 1 / 5])


def test_categorical_leaves_score_a_normalised_model():
    rng = np.random.default_rng(0)
    X = rng.integers(0, 3, size=(50, 3))
    leaves = CategoricalLeaves()
    leaves.inspect(X)
    leaves.fit_transform(X)
    fitted = _random_model([3, 3, 3])
    every_row = np.array(list(itertools.product(range(3), repeat=3)))
    logp = leaves.log_likelihood(fitted, leaves.transform(every_row), np.zeros(3))
    assert np.exp(logp).sum() == pytest.approx(1.0, abs=1e-12)


def test_categorical_leaves_rows_of_moments_score_as_the_rows_encoded_anew():
    rng = np.random.default_rng(1)
    X = rng.integers(0, 4, size=(80, 3))
    leaves = CategoricalLeaves()
    leaves.inspect(X)
    codes = leaves.fit_transform(X)
    moments = leaves.moments(codes, np.ones(len(X)))
    fitted = _random_model([4, 4, 4], seed=1)
    rows = np.array([3, 7, 11, 50])
    unseen = leaves.unseen_proba(moments)
    np.testing.assert_array_equal(
        leaves.log_likelihood(fitted, leaves.rows(moments, rows), unseen),
        leaves.log_likelihood(fitted, leaves.transform(X[rows]), unseen),
    )
    np.testing.assert_array_equal(leaves.row_values(moments), codes)


def _mixed_table(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = np.empty((n, 2), dtype=object)
    X[:, 0] = rng.normal(5.0, 2.0, n)  # continuous, not standardised
    X[:, 1] = rng.choice(["u", "v", "w"], n)
    return X


def test_bump_leaves_density_integrates_to_one_in_the_units_of_x():
    X = _mixed_table()
    leaves = BumpLeaves(categorical_features=[1], n_landmarks=10)
    leaves.inspect(X)
    leaves.fit_transform(X, random_state=0)
    fitted = _random_model(leaves.leaf_sizes(), k=3, seed=2)
    grid = np.linspace(-25.0, 35.0, 6001)  # +- 10 standard deviations around the mean
    step = grid[1] - grid[0]
    total = 0.0
    for category in ["u", "v", "w"]:
        rows = np.empty((grid.size, 2), dtype=object)
        rows[:, 0], rows[:, 1] = grid, category
        logp = leaves.log_likelihood(fitted, leaves.transform(rows), np.zeros(2))
        total += np.exp(logp).sum() * step
    assert total == pytest.approx(1.0, abs=1e-6)


def test_bump_leaves_missing_entry_is_marginalised():
    X = _mixed_table(seed=3)
    leaves = BumpLeaves(categorical_features=[1], n_landmarks=8)
    leaves.inspect(X)
    leaves.fit_transform(X, random_state=0)
    fitted = _random_model(leaves.leaf_sizes(), k=2, seed=4)
    rows = np.array([[np.nan, "u"], [np.nan, "v"], [np.nan, "w"]], dtype=object)
    logp = leaves.log_likelihood(fitted, leaves.transform(rows), np.zeros(2))
    assert np.exp(logp).sum() == pytest.approx(1.0, abs=1e-12)


def test_bump_leaves_rows_of_moments_score_as_the_rows_encoded_anew():
    X = _mixed_table(seed=5)
    leaves = BumpLeaves(categorical_features=[1], n_landmarks=8)
    leaves.inspect(X)
    data = leaves.fit_transform(X, random_state=0)
    moments = leaves.moments(data, np.ones(len(X)))
    fitted = _random_model(leaves.leaf_sizes(), k=2, seed=6)
    rows = np.array([0, 5, 9])
    unseen = leaves.unseen_proba(moments)
    np.testing.assert_allclose(
        leaves.log_likelihood(fitted, leaves.rows(moments, rows), unseen),
        leaves.log_likelihood(fitted, leaves.transform(X[rows]), unseen),
        rtol=0,
        atol=1e-12,
    )


def test_bump_leaves_decode_draws_values_in_the_units_of_x():
    X = _mixed_table(n=2000, seed=7)
    leaves = BumpLeaves(categorical_features=[1], n_landmarks=20)
    leaves.inspect(X)
    leaves.fit_transform(X, random_state=0)
    # codes drawn in proportion to the bumps' weight in a one-state model of the data
    sizes = leaves.leaf_sizes()
    codes = np.column_stack(
        [
            np.random.default_rng(8).integers(0, sizes[0] - 1, 5000),  # the landmarks
            np.random.default_rng(9).integers(0, sizes[1], 5000),
        ]
    )
    drawn = leaves.decode(codes, random_state=0)
    assert drawn.dtype == object and set(drawn[:, 1]) <= {"u", "v", "w"}
    values = drawn[:, 0].astype(float)
    # the landmarks are quantiles of the column: uniform draws over them have its spread
    assert abs(values.mean() - 5.0) < 0.3 and 1.5 < values.std() < 2.6


def test_bump_leaves_refuse_a_bandwidth_of_the_wrong_length():
    X = _mixed_table()
    leaves = BumpLeaves(categorical_features=[1], bandwidth=[0.5])
    leaves.inspect(X)
    with pytest.raises(ValueError, match="bandwidth must hold 2 values"):
        leaves.fit_transform(X)
