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
