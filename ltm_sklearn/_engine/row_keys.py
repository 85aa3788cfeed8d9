"""Keys of rows that depend on the rows themselves: a 64-bit hash of each row's values,
uniform keys of every copy of a row, and the split of row weights into held-out and
training parts built on them. Splitting by these keys gives the same parts whatever the
order, the batching or the source of the rows."""

from __future__ import annotations

import numbers

import numpy as np
import pandas as pd

__all__ = ["row_hash", "row_keys", "holdout_weights", "row_values"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix(h):
    """The finaliser of splitmix64: a bijection of uint64 that scatters nearby inputs."""
    h = h ^ (h >> np.uint64(30))
    h = h * np.uint64(0xBF58476D1CE4E5B9)
    h = h ^ (h >> np.uint64(27))
    h = h * np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(31))


def row_hash(values, seed):
    """A 64-bit hash of every row's values (``values`` feature-major): the one row
    hash of the package (held-out splits, identical rows merged for EM)."""
    values = np.asarray(values)
    n = values.shape[1]
    if values.dtype.kind == "f":
        v = np.where(np.isnan(values), np.nan, values + 0.0)  # one NaN, no negative zero
        bits = np.ascontiguousarray(v, dtype=np.float64).view(np.uint64)
    else:
        bits = values.astype(np.int64).view(np.uint64)
    with np.errstate(over="ignore"):
        h = np.full(n, _mix(np.uint64(seed) + _GOLDEN))
        for column in bits:
            h = _mix(h ^ (column + _GOLDEN))
    return h


def row_values(X):
    """The values of ``X`` (an array or a DataFrame, rows by columns) as numbers for
    :func:`row_hash`, two rows per column (feature-major): the same whatever the
    container and dtype that hold them (``1``, ``1.0`` and ``np.int64(1)`` in an int,
    float or object column, or in a categorical one, are the number 1).

    Row ``2 j`` holds the column's numbers (NaN elsewhere), row ``2 j + 1`` the rank of
    every other value (text: ``"1"`` is not ``1``) among the column's, ordered by their
    text (NaN elsewhere). Missing entries (None, NaN, ``pd.NA``) are NaN in both.

    >>> a = row_values(np.array([[1, 2], [3, 4]]))
    >>> b = row_values(pd.DataFrame({"x": [1.0, 3.0], "y": pd.Categorical([2, 4])}))
    >>> bool(np.array_equal(a, b, equal_nan=True))
    True
    >>> row_values(np.array([["b", 1], ["a", "1"]], dtype=object))
    array([[nan, nan],
           [ 1.,  0.],
           [ 1., nan],
           [nan,  0.]])
    """
    if isinstance(X, pd.DataFrame):
        # extension dtypes (categorical, nullable) as their values
        columns = [
            c.to_numpy()
            if isinstance(c.dtype, np.dtype) and c.dtype.kind in "biuf"
            else c.to_numpy(dtype=object)
            for c in (X.iloc[:, j] for j in range(X.shape[1]))
        ]
    else:
        X = np.asarray(X) if isinstance(X, np.ndarray) else np.asarray(X, dtype=object)
        columns = [X[:, j] for j in range(X.shape[1])]
    n = len(columns[0]) if columns else 0
    out = np.full((2 * len(columns), n), np.nan)
    for j, col in enumerate(columns):
        if col.dtype.kind in "biuf":
            out[2 * j] = col
            continue
        missing = pd.isna(col)
        if pd.api.types.infer_dtype(col, skipna=True) in ("string", "empty"):
            number = np.zeros(n, dtype=bool)  # text only: no test of every entry
        else:
            number = np.fromiter((isinstance(v, numbers.Real) for v in col), bool, n)
            number &= ~missing
        out[2 * j, number] = [float(v) for v in col[number]]
        other = ~number & ~missing
        if other.any():
            try:
                codes, uniques = pd.factorize(col[other])
            except TypeError:  # an unhashable value: named as the encoders name it
                bad = next(v for v in col[other] if not _hashable(v))
                raise TypeError(
                    f"Column {j} holds a value of type {type(bad).__name__}: category "
                    "values must be hashable scalars (argument must be a string or a number)."
                ) from None
            rank = np.empty(len(uniques), dtype=np.int64)
            rank[np.argsort([str(u) for u in uniques], kind="stable")] = np.arange(len(uniques))
            out[2 * j + 1, other] = rank[codes]
    return out


def _hashable(value):
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _unit_keys(h, occurrence):
    """Uniform ``[0, 1)`` keys of the ``occurrence``-th copy of rows of hash ``h``."""
    with np.errstate(over="ignore"):
        key = _mix(h + occurrence.astype(np.uint64) * _GOLDEN)
    return (key >> np.uint64(11)).astype(np.float64) / float(2**53)


def row_keys(values, seed=0):
    """A uniform key in ``[0, 1)`` for every row, a function of the rows themselves.

    The key of a row depends on its values, on how many identical rows come before it,
    and on ``seed`` - not on where the row sits in the data. Splitting rows by their keys
    (e.g. ``keys < 0.2`` held out) therefore gives the same two multisets of rows however
    the data were ordered, batched (``partial_fit``) or partitioned.

    Parameters
    ----------
    values : ndarray of shape (n_features, n_rows)
        Category codes or numbers (NaN allowed), feature-major.
    seed : int, default=0

    Returns
    -------
    ndarray of shape (n_rows,)
    """
    h = row_hash(values, seed)
    n = h.size
    order = np.argsort(h, kind="stable")
    sorted_h = h[order]
    starts = np.r_[True, sorted_h[1:] != sorted_h[:-1]]
    first = np.maximum.accumulate(np.where(starts, np.arange(n), 0))
    occurrence = np.empty(n, dtype=np.int64)
    occurrence[order] = np.arange(n) - first
    return _unit_keys(h, occurrence)


def holdout_weights(values, weights, share, seed=0, max_units=4096, low=0.0):
    """Split the weight of every row between a held-out and a training part, as a
    function of the rows themselves.

    Identical rows are pooled; the pooled weight ``W`` counts as ``ceil(W)`` unit rows
    (the ``j``-th of weight ``min(1, W - j)``), and a unit is held out when its key
    (:func:`row_keys` of the ``j``-th copy) is below ``share`` (and at least ``low``:
    the bands ``[k / K, (k + 1) / K)`` are ``K`` folds). Repeating a row and giving
    it an integer weight therefore hold out the same weight, in any order of the rows, and
    the copies of a frequent row fall on both sides. Beyond ``max_units`` units a row's
    weight is spread evenly over ``max_units`` of them.

    Parameters
    ----------
    values : ndarray of shape (n_features, n_rows)
    weights : ndarray of shape (n_rows,)
    share : float
        Expected held-out share of the weight.
    seed : int, default=0
    max_units : int, default=4096

    Returns
    -------
    held_out, train : ndarray of shape (n_rows,)
        Weights that sum to ``weights`` over every group of identical rows, carried by the
        group's first row (the other rows of the group get 0).
    key : ndarray of shape (n_rows,)
        The key of each group's first unit, on the group's first row (1 elsewhere): an
        order in which to keep rows when fewer are wanted.
    """
    h = row_hash(values, seed)
    n = h.size
    _, first, inverse = np.unique(h, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    W = np.bincount(inverse, weights=np.asarray(weights, dtype=float), minlength=first.size)
    units = np.minimum(np.ceil(W).astype(np.int64), max_units)
    group = np.repeat(np.arange(first.size), units)
    j = np.arange(group.size) - np.repeat(np.cumsum(units) - units, units)
    even = W[group] / np.maximum(units[group], 1)
    unit_w = np.where(W[group] > max_units, even, np.minimum(1.0, W[group] - j))
    keys = _unit_keys(h[first][group], j)
    held = np.bincount(
        group, weights=unit_w * ((keys >= low) & (keys < share)), minlength=first.size
    )
    held_out, train, key = np.zeros(n), np.zeros(n), np.ones(n)
    held_out[first] = held
    train[first] = np.maximum(W - held, 0.0)
    key[first] = keys[np.cumsum(units) - units] if group.size else 1.0
    return held_out, train, key
