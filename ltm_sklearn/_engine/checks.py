"""Checks of the arguments of the package's public functions (the estimators validate
their input with scikit-learn's tools): each names what is wrong instead of letting a
NumPy error, or a silent NaN, surface from deep inside the computation."""

from __future__ import annotations

import numbers

import numpy as np

__all__ = ["check_finite", "check_row_weights", "check_whole"]


def check_finite(array, what):
    """``array`` as floats, refused when empty or holding NaN or infinite entries."""
    array = np.asarray(array, dtype=float)
    if array.size == 0:
        raise ValueError(f"{what} is empty (shape {array.shape}).")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{what} holds NaN or infinite entries.")
    return array


def check_row_weights(weights, n_rows, what="sample_weight"):
    """Frequency weights of ``n_rows`` rows (``None``: ones) as floats: one finite,
    non-negative value a row, of positive sum."""
    if weights is None:
        return np.ones(n_rows)
    weights = np.asarray(weights, dtype=float)
    if weights.shape != (n_rows,):
        raise ValueError(f"{what} has shape {weights.shape}; expected ({n_rows},), one a row.")
    if not np.all(np.isfinite(weights)):
        raise ValueError(f"{what} holds NaN or infinite values.")
    if np.any(weights < 0):
        raise ValueError(f"{what} holds negative values: a weight counts rows.")
    if n_rows and not weights.sum() > 0:
        raise ValueError(f"The values of {what} sum to zero: no row counts.")
    return weights


def check_whole(value, what, low):
    """``value`` as an int, refused unless a whole number (not a bool) at least ``low``."""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not float(value).is_integer()
        or value < low
    ):
        raise ValueError(f"{what} must be a whole number >= {low}, got {value!r}.")
    return int(value)
