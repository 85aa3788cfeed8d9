"""The private scikit-learn helpers the estimators use, imported in one place.

scikit-learn's own estimators use these to validate parameters and sample weights and
to wrap ``fit``; they carry no deprecation cycle, so ``pyproject.toml`` bounds the
scikit-learn versions tested (``>=1.6,<1.10``) and a change in a new release is fixed
here alone.
"""

from __future__ import annotations

from sklearn.base import _fit_context
from sklearn.utils import _safe_indexing
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import _check_sample_weight

__all__ = [
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
check_sample_weight = _check_sample_weight
