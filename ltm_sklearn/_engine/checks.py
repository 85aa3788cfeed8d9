"""Checks of the arguments of the package's public functions (the estimators validate
their input with scikit-learn's tools): each names what is wrong instead of letting a
NumPy error, or a silent NaN, surface from deep inside the computation."""

from __future__ import annotations

import numbers

import numpy as np

__all__ = [
    "check_finite",
    "check_latent_tree",
    "check_moments",
    "check_real",
    "check_row_weights",
    "check_stochastic",
    "check_whole",
]


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


def _scalar(value):
    """A 0-d NumPy array as its number; anything else unchanged."""
    return value.item() if isinstance(value, np.ndarray) and value.ndim == 0 else value


def check_whole(value, what, low):
    """``value`` as an int, refused unless a whole number (not a bool) at least ``low``."""
    value = _scalar(value)
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not float(value).is_integer()
        or value < low
    ):
        raise ValueError(f"{what} must be a whole number >= {low}, got {value!r}.")
    return int(value)


def check_real(value, what, low=None, high=None, *, low_open=False, high_open=False):
    """``value`` as a float, refused unless a finite real number (not a bool) within
    ``[low, high]`` (``low_open`` / ``high_open``: that end excluded; ``None``: no
    bound)."""
    value = _scalar(value)
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    ok = ok and bool(np.isfinite(value))
    if ok and low is not None:
        ok = value > low if low_open else value >= low
    if ok and high is not None:
        ok = value < high if high_open else value <= high
    if not ok:
        left = "" if low is None else f"{'>' if low_open else '>='} {low}"
        right = "" if high is None else f"{'<' if high_open else '<='} {high}"
        bounds = " and ".join(b for b in (left, right) if b)
        raise ValueError(
            f"{what} must be a finite number{' ' + bounds if bounds else ''}, got {value!r}."
        )
    return float(value)


def check_stochastic(table, what, atol=1e-6):
    """``table`` as floats, refused unless finite, non-negative and summing to one over
    its last axis (every row a distribution)."""
    table = np.asarray(table, dtype=float)
    if table.size == 0 or not np.all(np.isfinite(table)) or np.any(table < 0):
        raise ValueError(f"{what} must hold finite, non-negative probabilities.")
    sums = np.atleast_1d(table.sum(axis=-1))
    far = float(sums[np.argmax(np.abs(sums - 1.0))])
    if abs(far - 1.0) > atol:
        raise ValueError(
            f"{what} must sum to one over its last axis (every row a distribution); a "
            f"sum is {far:g}."
        )
    return table


def check_latent_tree(tree, what="tree"):
    """``tree`` unchanged, refused with a :class:`TypeError` unless a
    :class:`~ltm_sklearn.LatentTree` (or an object with its interface)."""
    if not all(hasattr(tree, a) for a in ("n_observed", "edges", "parent", "children")):
        raise TypeError(
            f"{what} must be a LatentTree, got {type(tree).__name__}: build one with "
            "LatentTree(edges, n_observed)."
        )
    return tree


def check_moments(moments, what="moments"):
    """``moments`` unchanged, refused with a :class:`TypeError` unless a moment source
    (:class:`~ltm_sklearn.moments.MomentEstimator` or one of its kind)."""
    if not all(hasattr(moments, a) for a in ("singletons", "pairs", "n_states")):
        raise TypeError(
            f"{what} must be a moment source such as MomentEstimator(codes, n_states), got "
            f"{type(moments).__name__}: build one from the category codes of the columns."
        )
    return moments
