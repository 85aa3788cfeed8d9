"""The public functions name malformed input: a clear error instead of a NumPy error from
deep inside, or a silent NaN or identity matrix."""

import warnings

import numpy as np
import pandas as pd
import pytest

import ltm_sklearn.metrics as metrics
import ltm_sklearn.moments as moments
import ltm_sklearn.structure as structure
import ltm_sklearn.tensor as tensor
from ltm_sklearn import GaussianLatentTree, LatentTreeEM, SpectralLatentTree
from ltm_sklearn.datasets import balanced_binary_tree

RNG = np.random.default_rng(0)
X2 = RNG.normal(size=(50, 2))
TREE8 = balanced_binary_tree(8)
D8 = TREE8.hop_distances()[:8, :8] * 0.3
NAN8 = np.full((8, 8), np.nan)
OK_CODES = np.array([[0, 1, 1, 0], [1, 0, 1, 1]])
P3, T3 = np.full((3, 3), 1 / 9), np.full((3, 3, 3), 1 / 27)

CASES = {
    "correlation, a NaN weight": (
        lambda: structure.pairwise_correlation(X2, sample_weight=np.r_[np.nan, np.ones(49)]),
        "NaN or infinite",
    ),
    "correlation, negative weights": (
        lambda: structure.pairwise_correlation(X2, sample_weight=-np.ones(50)),
        "negative",
    ),
    "correlation, weights of another length": (
        lambda: structure.pairwise_correlation(X2, sample_weight=np.ones(5)),
        r"expected \(50,\)",
    ),
    "gaussian distance, no rows": (
        lambda: structure.gaussian_distance(np.zeros((0, 3))),
        "no rows",
    ),
    "censored residual, NaN distances": (
        lambda: structure.censored_residual(TREE8, NAN8, 1000),
        "non-finite",
    ),
    "censored residual, no rows": (
        lambda: structure.censored_residual(TREE8, D8, 0),
        "n_samples must be positive",
    ),
    "censored residual, another size": (
        lambda: structure.censored_residual(TREE8, D8[:5, :5], 1000),
        "8 observed nodes",
    ),
    "neighbor joining, negative distances": (
        lambda: structure.neighbor_joining(-D8),
        "negative distances",
    ),
    "neighbor joining, a diagonal": (
        lambda: structure.neighbor_joining(D8 + np.eye(8)),
        "zero diagonal",
    ),
    "spectral variance, not square": (
        lambda: structure.spectral_variance(np.ones((3, 4))),
        "square",
    ),
    "chow-liu, no variable": (lambda: structure.chow_liu(np.zeros((0, 0))), "empty"),
    "kernel distance, no features": (lambda: structure.kernel_distance([]), "non-empty list"),
    "kernel distance, rows disagree": (
        lambda: structure.kernel_distance([np.ones((20, 3)), np.ones((10, 3))]),
        "different numbers of rows",
    ),
    "spectral distance, no hidden state": (
        lambda: structure.spectral_distance(moments.MomentEstimator(OK_CODES, [2, 2]), 0),
        "n_hidden_states must be a whole number >= 1",
    ),
    "binary leaf tree, an edge list": (
        lambda: structure.binary_leaf_tree([(0, 1)]),
        "takes a LatentTree",
    ),
    "robinson-foulds, an edge list": (
        lambda: metrics.robinson_foulds([(0, 1)], TREE8),
        "compares two LatentTree",
    ),
    "moments, a code below unseen": (
        lambda: moments.MomentEstimator(np.array([[0, 1], [-3, 0]]), [2, 2]),
        "codes must lie between -2",
    ),
    "moments, a code beyond its states": (
        lambda: moments.MomentEstimator(np.array([[0, 1], [2, 0]]), [2, 2]),
        "codes must lie between -2",
    ),
    "moments, states of another length": (
        lambda: moments.MomentEstimator(OK_CODES, [2]),
        "1 entries for 2 rows",
    ),
    "moments, negative weights": (
        lambda: moments.MomentEstimator(OK_CODES, [2, 2], sample_weight=-np.ones(4)),
        "negative",
    ),
    "quantiles, NaN values": (
        lambda: moments.weighted_quantiles(np.array([1, np.nan, 3.0]), np.ones(3), [0.5]),
        "NaN",
    ),
    "quantiles, probabilities beyond [0, 1]": (
        lambda: moments.weighted_quantiles(np.arange(5.0), np.ones(5), [1.5]),
        r"\[0, 1\]",
    ),
    "quantiles, zero weights": (
        lambda: moments.weighted_quantiles(np.arange(5.0), np.zeros(5), [0.5]),
        "sum to zero",
    ),
    "power method, more components than dimensions": (
        lambda: tensor.tensor_power_method(T3, 5, random_state=0),
        "at most 3",
    ),
    "power method, a NaN entry": (
        lambda: tensor.tensor_power_method(np.where(T3 > 0, np.nan, T3), 2),
        "NaN",
    ),
    "whiten, no component": (lambda: tensor.whiten(np.eye(3), 0), "n_components must be"),
    "whiten, NaN": (lambda: tensor.whiten(np.full((3, 3), np.nan), 2), "NaN"),
    "three views, shapes disagree": (
        lambda: tensor.three_view_decomposition(P3, P3[:2], P3, T3, 2, random_state=0),
        "shapes disagree",
    ),
    "expand states, tables missing": (
        lambda: tensor.expand_states(balanced_binary_tree(4), np.array([0.5, 0.5]), {}, 3),
        "no table for the non-root nodes",
    ),
    "draw, names of another length": (
        lambda: TREE8.draw(feature_names=["a"]),
        "1 names; the tree has 8",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_public_function_names_malformed_input(case):
    call, match = CASES[case]
    if case.startswith("draw"):
        pytest.importorskip("matplotlib")
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_a_similarity_matrix_keeps_its_diagonal():
    # mutual information and spanning-tree weights do not read the diagonal
    M = np.array([[1.0, 0.5, 0.1], [0.5, 1.0, 0.3], [0.1, 0.3, 1.0]])
    assert structure.chow_liu(M).edges == [(0, 1), (1, 2)]


@pytest.mark.parametrize("Est", [SpectralLatentTree, LatentTreeEM])
def test_a_column_without_values_is_named_in_a_warning(Est):
    # the model ignores it (tests/test_reliability.py); the user hears of it
    X = pd.DataFrame({"a": [0, 1, 1, 0] * 10, "b": [1, 0, 1, 1] * 10, "c": [np.nan] * 40})
    with pytest.warns(UserWarning, match=r"Columns \['c'\] have no observed value"):
        Est(2).fit(X)
    # declared categories give it a distribution (the prior's)
    X["c"] = pd.Categorical(X["c"], categories=["x", "y"])
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*no observed value")
        Est(2).fit(X)


@pytest.mark.parametrize("Est", [SpectralLatentTree, GaussianLatentTree])
def test_dates_are_refused_in_an_array_as_in_a_frame(Est):
    days = np.arange(300).reshape(100, 3).astype("datetime64[D]")
    with pytest.raises(TypeError, match="dates or times"):
        Est().fit(days)


def test_timestamps_among_objects_are_refused():
    stamps = pd.date_range("2020-01-01", periods=60).to_numpy().astype(object)
    X = np.column_stack([np.arange(60) % 2, np.arange(60) % 3, stamps]).astype(object)
    with pytest.raises(TypeError, match="Column 2 holds dates or times"):
        SpectralLatentTree(2).fit(X)


def test_gaussian_model_names_repeated_columns():
    X = pd.DataFrame(RNG.normal(size=(40, 3)), columns=["a", "a", "b"])
    with pytest.raises(ValueError, match="duplicated column names"):
        GaussianLatentTree().fit(X)
