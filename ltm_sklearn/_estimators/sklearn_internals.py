"""The private scikit-learn helpers the estimators use, imported in one place.

scikit-learn's own estimators use these to validate parameters and sample weights and
to wrap ``fit``; they carry no deprecation cycle, so ``pyproject.toml`` bounds the
scikit-learn versions tested (``>=1.6,<1.10``) and a change in a new release is fixed
here alone.
"""

from __future__ import annotations

from numbers import Integral

import numpy as np
from sklearn.base import _fit_context
from sklearn.utils import _safe_indexing
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import _check_sample_weight

__all__ = [
    "N_JOBS_CONSTRAINT",
    "HasMethods",
    "Interval",
    "StrOptions",
    "available_if",
    "check_sample_weight",
    "fit_context",
    "safe_indexing",
]

fit_context = _fit_context
safe_indexing = _safe_indexing

#: ``n_jobs`` as joblib reads it: None, a positive count, or -1, -2, ... (all the cores,
#: all but one, ...); 0 means nothing
N_JOBS_CONSTRAINT = [
    None,
    Interval(Integral, 1, None, closed="left"),
    Interval(Integral, None, -1, closed="right"),
]

#: the largest row weight: the message passes run in single precision (up to 3.4e38),
#: where a weight enters a posterior divided by its row's probability
MAX_SAMPLE_WEIGHT = 1e30


def check_sample_weight(sample_weight, X, **kwargs):
    """scikit-learn's validation of ``sample_weight`` (``_check_sample_weight``), and
    values at most :data:`MAX_SAMPLE_WEIGHT` (beyond, a model fell to the uniform one with
    only overflow warnings)."""
    weights = _check_sample_weight(sample_weight, X, **kwargs)
    if sample_weight is not None and weights.size and np.max(weights) > MAX_SAMPLE_WEIGHT:
        raise ValueError(
            f"sample_weight holds values up to {np.max(weights):.3g}: a weight counts rows, "
            f"and beyond {MAX_SAMPLE_WEIGHT:g} the message passes' single precision "
            "overflows. Divide the weights by a common factor."
        )
    return weights
