"""Kernel feature maps and the kernel tree metric (papers/002, structure part)."""

import numpy as np
import pytest

from ltm_sklearn.datasets import balanced_binary_tree, sample_sign_flip_tree
from ltm_sklearn.metrics import robinson_foulds
from ltm_sklearn.moments import rbf_features
from ltm_sklearn.structure import (
    gaussian_distance,
    kernel_distance,
    neighbor_joining,
    nonparanormal_distance,
)


def test_rbf_features_are_centred_and_linear_in_n():
    X = np.random.default_rng(0).standard_normal((3000, 3))
    feats = rbf_features(X, n_components=40, random_state=0)
    assert len(feats) == 3 and feats[0].shape == (3000, 40)
    np.testing.assert_allclose(feats[1].mean(axis=0), 0.0, atol=1e-12)


def test_non_numeric_and_non_finite_input_rejected():
    with pytest.raises(TypeError, match="numeric"):
        rbf_features(np.array([["a", "b"], ["c", "d"]]))
    with pytest.raises(ValueError, match="finite"):
        rbf_features(np.array([[0.0, np.nan], [1.0, 2.0]]))


def test_kernel_metric_recovers_uncorrelated_tree_where_gaussian_fails():
    """papers/002's process (zero correlations): 16-leaf balanced tree, N = 2,000."""
    tree = balanced_binary_tree(16)
    exact = {"kernel": 0, "gaussian": 0, "nonparanormal": 0}
    for seed in range(5):
        X = sample_sign_flip_tree(tree, 2000, sigma=0.3, random_state=seed)
        feats = rbf_features(X, n_components=50, random_state=seed)
        exact["kernel"] += robinson_foulds(neighbor_joining(kernel_distance(feats, 1)), tree) == 0
        for name, metric in (
            ("gaussian", gaussian_distance),
            ("nonparanormal", nonparanormal_distance),
        ):
            exact[name] += robinson_foulds(neighbor_joining(metric(X)), tree) == 0
    assert exact["kernel"] >= 4
    assert exact["gaussian"] == 0 and exact["nonparanormal"] == 0
