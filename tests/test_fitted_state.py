"""One way to forget a fit: a new fit leaves nothing of an earlier one."""

import numpy as np
import pytest

from ltm_sklearn import (
    KernelLatentTree,
    LatentTreeClassifier,
    SpectralLatentTree,
)
from ltm_sklearn._estimators.validation import reset_fitted_state
from ltm_sklearn.datasets import LatentTreeModel, balanced_binary_tree


def _codes(n=600, seed=0):
    truth = LatentTreeModel.random(balanced_binary_tree(6), 2, 3, random_state=seed)
    return truth.sample(n, random_state=seed + 1)


def test_reset_removes_fitted_and_private_state_only():
    est = SpectralLatentTree()
    est.tree_, est._leaves, est._other, est.n_features_in_ = 1, 2, 3, 4
    reset_fitted_state(est)
    assert not hasattr(est, "tree_") and not hasattr(est, "n_features_in_")
    assert "_leaves" not in vars(est)
    assert est._other == 3  # not state of a fit
    assert est.get_params() == SpectralLatentTree().get_params()  # parameters untouched


def test_refit_with_a_given_k_drops_the_selection_scores():
    X = _codes()
    est = SpectralLatentTree(n_hidden_states="auto", n_members=1, random_state=0).fit(X)
    assert hasattr(est, "n_hidden_states_scores_")
    est.set_params(n_hidden_states=2, structure="me").fit(X)
    assert not hasattr(est, "n_hidden_states_scores_")
    assert est.n_hidden_states_ == 2


@pytest.mark.slow
def test_kernel_refit_in_the_other_form_keeps_nothing_of_the_first():
    rng = np.random.RandomState(0)
    X = rng.standard_normal((300, 4))
    X[:, 1] += X[:, 0]
    est = KernelLatentTree(hidden="gaussian", random_state=0).fit(X)
    assert hasattr(est, "gaussian_model_")
    est.set_params(hidden="discrete").fit(X)
    assert not hasattr(est, "gaussian_model_")
    assert hasattr(est, "cpts_") and est.hidden_ == "discrete"
    est.set_params(hidden="gaussian").fit(X)
    assert not hasattr(est, "cpts_") and not hasattr(est, "raw_estimate_")


@pytest.mark.slow
def test_classifier_refit_with_a_given_k_drops_the_selection():
    X = _codes(400)
    y = (X[:, 0] == 0).astype(int)
    clf = LatentTreeClassifier(n_hidden_states="auto", random_state=0).fit(X, y)
    assert hasattr(clf, "class_params_")
    clf.set_params(n_hidden_states=2).fit(X, y)
    assert not hasattr(clf, "class_params_") and clf.n_hidden_states_ == 2
