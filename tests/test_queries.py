"""The queries of a fitted model: posteriors of the hidden variables and latent classes."""

import numpy as np
import pandas as pd
import pytest

from ltm_sklearn import KernelLatentTree, SpectralLatentTree
from ltm_sklearn.datasets import LatentTreeModel, star_tree


# ---------------------------------------------------------------------- latent classes
def test_predict_proba_is_the_root_posterior_and_predict_recovers_latent_classes():
    model = LatentTreeModel.random(star_tree(6), 3, 4, noise=0.1, random_state=0)
    X, states = model.sample(4000, random_state=1, return_hidden=True)
    est = SpectralLatentTree(3, tree=model.tree, random_state=0).fit(X)
    proba = est.predict_proba(X)
    assert proba.shape == (4000, 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    labels = est.predict(X)
    truth = states[:, model.tree.root]
    # accuracy up to a relabelling of the states
    agree = max(
        np.mean(np.array(perm)[labels] == truth)
        for perm in __import__("itertools").permutations(range(3))
    )
    assert agree > 0.9
    Xn = X.astype(float)
    Xn[:, 0] = np.nan  # marginalised
    assert np.all(np.isfinite(est.predict_proba(Xn)))
    cl = SpectralLatentTree(2, structure="chow_liu").fit(X)  # no hidden node: one class
    np.testing.assert_array_equal(cl.predict_proba(X[:5]), np.ones((5, 1)))
    np.testing.assert_array_equal(cl.predict(X[:5]), np.zeros(5))


def test_samples_keep_the_fitted_pandas_categorical_and_bool_dtypes():
    rng = np.random.RandomState(0)
    levels = pd.CategoricalDtype(["lo", "mid", "hi", "unused"], ordered=True)
    frame = pd.DataFrame(
        {
            "level": pd.Series(rng.choice(["lo", "mid", "hi"], 200)).astype(levels),
            "count": rng.randint(0, 3, 200),
            "flag": rng.rand(200) > 0.5,  # beside a categorical of strings: fitted too
        }
    )
    est = SpectralLatentTree(2, structure="clnj", random_state=0).fit(frame)
    drawn = est.sample(50, random_state=0)
    assert drawn["level"].dtype == levels and drawn["flag"].dtype == bool
    assert drawn["count"].dtype.kind == "i"
    flags = SpectralLatentTree(2, structure="clnj", random_state=0).fit(rng.rand(200, 4) > 0.5)
    assert flags.sample(5, random_state=0).dtype == bool
    # a mixed table's categorical column too
    mixed = frame.assign(count=rng.randn(200), flag=rng.randn(200))
    kernel = KernelLatentTree(2, structure="chow_liu", random_state=0).fit(mixed)
    drawn = kernel.sample(20, random_state=0)
    assert drawn["level"].dtype == levels and drawn["count"].dtype == float


def test_a_bool_target_is_not_a_column_index():
    X = LatentTreeModel.random(star_tree(3), 2, 3, random_state=0).sample(300, random_state=0)
    est = SpectralLatentTree(2, random_state=0).fit(X)
    assert est.conditional_proba(X[:2], target=1).shape == (2, 3)
    with pytest.raises(ValueError, match="target must be a column index"):
        est.conditional_proba(X[:2], target=True)
