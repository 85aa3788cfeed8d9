"""Checks and bookkeeping the estimators share: input dtypes, Dask input, target columns,
and the one way to forget a fit."""

from __future__ import annotations

from numbers import Integral

import numpy as np
import pandas as pd

from .._engine.user_warnings import warn
from .sklearn_internals import check_sample_weight

__all__ = [
    "fitted_state",
    "reset_fitted_state",
    "is_dask_collection",
    "target_index",
    "check_frame_dtypes",
    "as_fitted_frame",
    "mean_score",
    "refuse_dask",
]

#: private state of a fit, beside its public attributes (names with a trailing underscore)
_PRIVATE_FIT_STATE = (
    "_leaves",
    "_held_out_fit",
    "_stream",
    "_stream_declared",
    "_stream_stale",
    "_quartet_tests",
    "_quartet_last",
)


def fitted_state(est):
    """The names of what a fit set on ``est``: every fitted attribute (a public name
    with a trailing underscore) and the private state of a fit
    (:data:`_PRIVATE_FIT_STATE`)."""
    return [
        n
        for n in vars(est)
        if (n.endswith("_") and not n.startswith("_")) or n in _PRIVATE_FIT_STATE
    ]


def reset_fitted_state(est, names=None):
    """Forget what an earlier fit set: the one way the estimators do it.

    ``names=None`` removes every fitted attribute (a public name with a trailing
    underscore) and the private state of a fit (:data:`_PRIVATE_FIT_STATE`), so that
    nothing of an earlier fit - a raw estimate, selection scores, the other form of a
    kernel model - outlives a new one; ``names`` removes those only (what
    ``partial_fit`` rebuilds)."""
    for name in fitted_state(est) if names is None else names:
        est.__dict__.pop(name, None)


def is_dask_collection(X):
    """Whether ``X`` is a Dask array or DataFrame (without importing Dask)."""
    return type(X).__module__.split(".")[0] == "dask" and hasattr(X, "to_delayed")


def refuse_dask(X, estimator, in_fit=False):
    """A clear error for a Dask collection where the estimator reads rows in memory
    (scores, queries, ``partial_fit``; with ``in_fit``, the fit of an estimator that
    reads no Dask collection at all): read as an array it would lose its column names
    (a frame with its columns in another order would be scored unchecked) and be pulled
    into this process whole."""
    if not is_dask_collection(X):
        return
    if in_fit:
        raise TypeError(
            f"{estimator}.fit reads rows in memory, not a Dask collection (the discrete "
            "estimators fit on one, in passes over its partitions): compute it first "
            "(e.g. X.compute(), or a sample of it)."
        )
    raise TypeError(
        f"{estimator} reads a Dask collection in fit only (its moments in passes over "
        "the partitions). Here it reads rows in memory: compute them first (e.g. "
        "X.compute(), or one partition at a time: X.partitions[i].compute())."
    )


def target_index(estimator, target):
    """Index of the column ``target`` (an index, or a feature name seen in ``fit``)."""
    names = getattr(estimator, "feature_names_in_", None)
    n_features = estimator.n_features_in_
    if isinstance(target, str):
        if names is None or target not in list(names):
            raise ValueError(f"Unknown target column {target!r}.")
        return int(list(names).index(target))
    is_index = isinstance(target, (Integral, np.integer)) and not isinstance(
        target, (bool, np.bool_)
    )
    if not is_index or not 0 <= target < n_features:
        raise ValueError(
            f"target must be a column index in [0, {n_features}) or a feature name, got {target!r}."
        )
    return int(target)


def check_frame_dtypes(X, allowed, estimator):
    """Reject DataFrame columns (pandas or Dask) whose dtype the estimator cannot read,
    naming them; and arrays of dates or times."""
    if getattr(getattr(X, "dtype", None), "kind", "") in ("M", "m"):
        raise TypeError(
            f"{estimator} cannot read an array of dates or times (dtype {X.dtype}): convert "
            "it first (e.g. dates to numbers or categories)."
        )
    if not (isinstance(X, pd.DataFrame) or (is_dask_collection(X) and hasattr(X, "columns"))):
        return
    for name, dtype in X.dtypes.items():
        kind = getattr(dtype, "kind", "O")
        if kind in allowed:
            continue
        categorical = isinstance(dtype, pd.CategoricalDtype) or kind in "OSU" or dtype == "string"
        if categorical and "O" not in allowed:
            raise TypeError(
                f"{estimator} models numbers only, and column {name!r} (dtype {dtype}) holds "
                "categories or text: use KernelLatentTree for a table with categorical "
                "columns, or encode the column as numbers (or drop it) first."
            )
        raise TypeError(
            f"{estimator} cannot read column {name!r} of dtype {dtype}: convert it first "
            "(e.g. dates to numbers or categories)."
        )


def warn_empty_columns(categories, names=None):
    """Warn of columns without a category, observed or declared (every entry missing or
    of weight zero): each is a leaf of one phantom state, a factor of one when missing,
    and any value it later holds is unseen."""
    empty = np.flatnonzero([c is not None and len(c) == 0 for c in categories])
    if empty.size:
        shown = [str(names[j]) if names is not None else int(j) for j in empty[:10]]
        warn(
            f"Columns {shown} have no observed value and no declared category: the model "
            "ignores them (a value they hold later counts as an unseen category). Drop "
            "them, or declare their categories.",
            UserWarning,
        )


def extension_columns_as_objects(X):
    """``X`` with its pandas extension columns (categorical, string, nullable) as
    objects, so that the frame's NumPy form keeps their values and missing entries:
    converted beside other columns, a categorical of strings next to a bool column failed
    ("Cannot cast str dtype to float64"), and one of integer categories next to integer
    columns turned its missing entries into ``-2**63``."""
    if not isinstance(X, pd.DataFrame):
        return X
    extension = [j for j, dtype in enumerate(X.dtypes) if not isinstance(dtype, np.dtype)]
    if not extension:
        return X
    X = X.copy(deep=False)
    for j in extension:
        X.isetitem(j, X.iloc[:, j].astype(object))
    return X


def as_fitted_frame(estimator, values):
    """Rows drawn by ``sample`` in the form of the fitted ``X``: a DataFrame with its
    column names (each column's type inferred from its values) after a fit on a
    DataFrame, the array otherwise."""
    names = getattr(estimator, "feature_names_in_", None)
    if names is None:
        return values
    return pd.DataFrame(values, columns=list(names)).infer_objects()


def mean_score(values, sample_weight=None):
    """The mean of the per-row scores ``values``, weighted by ``sample_weight``
    (validated: non-negative, one per row, not all zero): what ``score`` returns."""
    if sample_weight is None:
        return float(np.mean(values))
    sample_weight = check_sample_weight(
        sample_weight, values.reshape(-1, 1), dtype=float, ensure_non_negative=True
    )
    if sample_weight.sum() <= 0:
        raise ValueError("sample_weight sums to zero: the weighted mean is undefined.")
    return float(np.average(values, weights=sample_weight))
