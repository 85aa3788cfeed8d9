"""The columns of a mixed table as one float matrix: which columns are categorical,
their codes, and the standardisation of the continuous ones.

:class:`MixedEncoder` is the encoding of the continuous-data estimators, as
:class:`~.encoding.CategoricalEncoder` is that of the discrete ones: ``fit`` learns the
categories of the categorical columns and the centre and scale of the continuous ones,
``transform`` returns the standardised matrix (a categorical column holds its codes, NaN
missing, ``-2`` a category unseen in training). :func:`categorical_mask` reads which
columns are categorical from ``categorical_features`` or the dtypes, and
:func:`column_scales` is the one standardisation of the package.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .encoding import CategoricalEncoder, ContinuousColumnError
from .user_warnings import warn

__all__ = ["MixedEncoder", "categorical_mask", "column_scales", "warn_few_values"]


#: a continuous column with at most this many distinct numbers over at least
#: ``FEW_VALUES_MIN_ROWS`` observed rows is warned about (see ``MixedEncoder``)
FEW_VALUES = 10
FEW_VALUES_MIN_ROWS = 100


def warn_few_values(
    Z, columns, owner, names=None, sample_weight=None, declare=False, constant_said=False
):
    """Warn about each continuous column (indices ``columns`` of the float matrix ``Z``,
    NaN missing) with at most ``FEW_VALUES`` distinct numbers over at least
    ``FEW_VALUES_MIN_ROWS`` observed rows of positive weight (a rating, a count, a coded
    category): a density spreads its mass between the values, and as categories it would
    score higher. ``declare``: the estimator takes categorical columns (say how);
    ``constant_said``: a column of one value has a warning of its own."""
    rows = np.ones(Z.shape[0], bool) if sample_weight is None else np.asarray(sample_weight) > 0
    for j in columns:
        values = Z[rows, j][~np.isnan(Z[rows, j])]
        if values.size < FEW_VALUES_MIN_ROWS:
            continue
        n_values = np.unique(values).size
        if n_values <= FEW_VALUES and not (constant_said and n_values == 1):
            name = repr(str(names[j])) if names is not None else str(int(j))
            advice = (
                "declare the column with categorical_features= or a pandas category dtype."
                if declare
                else "model the column as categorical (KernelLatentTree with a category "
                "column, or a discrete estimator such as SpectralLatentTree)."
            )
            warn(
                f"{owner}: column {name} is modelled as continuous but holds only "
                f"{n_values} distinct numbers in {values.size} rows; a density spreads its "
                f"mass between them. If they are categories, {advice}",
                UserWarning,
            )


def categorical_mask(X, categorical_features="from_dtype"):
    """Which columns of ``X`` are categorical.

    Parameters
    ----------
    X : array-like or DataFrame of shape (n_samples, n_features)
        Before validation (a DataFrame's dtypes are read).
    categorical_features : "from_dtype", None, or indices, names or a boolean mask
        ``"from_dtype"``: a DataFrame column of category, string, object or bool dtype;
        in an array, bool and string dtypes, or an object column holding a value that is
        not a number. ``None``: no column.

    Returns
    -------
    ndarray of bool, shape (n_features,)
    """
    spec = categorical_features
    if isinstance(X, pd.DataFrame):
        columns = [str(c) for c in X.columns]
    else:
        X = X if hasattr(X, "dtype") and hasattr(X, "shape") else np.asarray(X, dtype=object)
        if X.ndim != 2:
            raise ValueError(f"Expected a 2D array, got {X.ndim}D.")
        columns = None
    d = X.shape[1]
    if spec is None:
        return np.zeros(d, dtype=bool)
    if isinstance(spec, str):  # "from_dtype"
        if columns is not None:
            return np.array([_categorical_dtype(X.dtypes.iloc[j]) for j in range(d)])
        if X.dtype.kind in "biuf":
            return np.full(d, X.dtype.kind == "b")
        if X.dtype.kind in "SU":
            return np.ones(d, dtype=bool)
        return np.array([_holds_labels(X[:, j]) for j in range(d)])
    spec = np.asarray(spec)
    if spec.ndim != 1:
        raise ValueError("categorical_features must be 1D (indices, names or a mask).")
    if spec.dtype.kind == "b":
        if spec.size != d:
            raise ValueError(
                f"categorical_features as a boolean mask must have {d} entries (one per "
                f"column), got {spec.size}."
            )
        return spec.copy()
    mask = np.zeros(d, dtype=bool)
    if spec.dtype.kind in "iu":
        if np.any((spec < 0) | (spec >= d)):
            raise ValueError(
                f"categorical_features holds column indices outside [0, {d}): {spec.tolist()}."
            )
        mask[spec] = True
        return mask
    if spec.dtype.kind in "OSU" and spec.size:
        if columns is None:
            raise ValueError(
                "categorical_features names columns, which needs X as a DataFrame with "
                "column names."
            )
        unknown = [str(c) for c in spec if str(c) not in columns]
        if unknown:
            raise ValueError(f"categorical_features names unknown columns {unknown}.")
        mask[[columns.index(str(c)) for c in spec]] = True
        return mask
    if spec.size == 0:
        return mask
    raise ValueError(
        "categorical_features must be 'from_dtype', None, or column indices, names or a "
        f"boolean mask; got {categorical_features!r}."
    )


def column_scales(X, sample_weight=None):
    """Weighted mean and standard deviation of every column over its observed entries
    (NaN missing, rows of zero weight left out), computed without overflow for any
    magnitude, and on the column's distinct values with their summed weights: the same
    numbers, to the last bit, in any order of the rows and for integer weights as for
    repeated rows.

    A column without observed entries, or constant to within ``1e-12`` of its mean (a
    relative test: columns of any magnitude, 1e-200 or 1e200, are scaled alike), gets
    scale 1 (it keeps its units: its density is the estimator's floor's, finite).

    Returns
    -------
    center, scale : ndarray of shape (n_features,)
    """
    n, d = X.shape
    w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=float)
    center, scale = np.zeros(d), np.ones(d)
    for j in range(d):
        obs = ~np.isnan(X[:, j]) & (w > 0)
        if not obs.any():
            continue
        # the column's distinct values, sorted, with their summed weights: the same sums
        # in any order of the rows, and for a row of integer weight w as for w copies of
        # it (ties between bump centres in the kernel leaves flipped on the last bit)
        x, inverse = np.unique(X[obs, j], return_inverse=True)
        wj = np.bincount(inverse.reshape(-1), weights=w[obs], minlength=x.size)
        big = np.max(np.abs(x))
        if big == 0:
            continue
        y = x / big  # in [-1, 1]: no overflow in the moments
        m = np.average(y, weights=wj)
        sd = np.sqrt(np.average((y - m) ** 2, weights=wj))
        center[j] = m * big
        if sd > 1e-12 * abs(m) and np.isfinite(sd * big) and sd * big > 0:
            scale[j] = sd * big
    return center, scale


class MixedEncoder:
    """Continuous columns standardised, categorical ones coded, in one float matrix.

    Parameters
    ----------
    categorical_features : "from_dtype", None, or indices, names or a boolean mask
        How the categorical columns were chosen (:func:`categorical_mask`), for messages.
    categories : "auto" or list, default="auto"
        Per column, the categories of a categorical column (``None`` for a continuous
        one), or ``"auto"``: learned, or the pandas-declared ones passed to ``fit``.
    owner : str, default="MixedEncoder"
        The estimator named in error messages.

    Attributes
    ----------
    is_categorical_ : ndarray of bool, shape (n_features,)
    categories_ : list
        Per column, its categories (``None`` for a continuous column).
    center_, scale_ : ndarray of shape (n_features,)
        The standardisation of the continuous columns (0 and 1 for the categorical ones,
        whose codes stay codes).
    n_categories_ : ndarray of int, shape (n_features,)
        Categories per column, 0 for a continuous one.
    """

    def __init__(self, categorical_features="from_dtype", categories="auto", owner="MixedEncoder"):
        self.categorical_features = categorical_features
        self.categories = categories
        self.owner = owner

    def fit_transform(self, X, is_categorical, declared=None, sample_weight=None, names=None):
        """Learn the categories and the scales from validated ``X`` (a 2D array, object
        dtype for mixed columns) and return its standardised matrix.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
        is_categorical : ndarray of bool, shape (n_features,)
            From :func:`categorical_mask`.
        declared : list, default=None
            pandas-declared categories per column (``None`` where undeclared).
        sample_weight : ndarray of shape (n_samples,), default=None
            Rows of zero weight add no category and do not move the scales.
        names : sequence of str, default=None
            Column names for messages.
        """
        self.is_categorical_ = np.asarray(is_categorical, dtype=bool)
        self._names = None if names is None else [str(n) for n in names]
        cat = np.flatnonzero(self.is_categorical_)
        self.categories_ = [None] * X.shape[1]
        self._encoder = None
        given = self.categories
        if not isinstance(given, str):  # checked whether or not a column is categorical
            if len(given) != X.shape[1]:
                raise ValueError(
                    f"categories has {len(given)} entries but X has {X.shape[1]} columns."
                )
            if any(given[j] is not None for j in np.flatnonzero(~self.is_categorical_)):
                raise ValueError(
                    "categories gives categories for a continuous column: use None for "
                    "the continuous columns (or declare the column categorical)."
                )
        if cat.size:
            if isinstance(given, str):
                given = None if declared is None else [declared[j] for j in cat]
            else:
                given = [given[j] for j in cat]
            # the encoder's messages name a column by its name, or its position in X
            sub_names = [self._names[j] if self._names is not None else str(j) for j in cat]
            self._encoder = CategoricalEncoder("auto" if given is None else given)
            sub = X[:, cat]
            try:
                if sample_weight is not None and not np.all(sample_weight > 0):
                    self._encoder.fit_transform(sub[sample_weight > 0], sub_names)
                else:
                    self._encoder.fit_transform(sub, sub_names)
            except ContinuousColumnError as exc:
                raise self._continuous_category_error(X, cat[exc.column], exc) from None
            for t, j in enumerate(cat):
                self.categories_[j] = self._encoder.categories_[t]
        self.n_categories_ = np.array(
            [0 if c is None else len(c) for c in self.categories_], dtype=np.int64
        )
        Z = self._matrix(X)
        observed = ~np.isnan(Z)
        if sample_weight is not None:
            observed &= (np.asarray(sample_weight) > 0)[:, None]
        empty = np.flatnonzero(~observed.any(axis=0))
        if empty.size:
            raise ValueError(
                f"Columns {empty[:10].tolist()} have no observed value: a column without "
                "data has no distribution to estimate. Drop them."
            )
        warn_few_values(
            Z,
            np.flatnonzero(~self.is_categorical_),
            self.owner,
            self._names,
            sample_weight,
            declare=True,
        )
        self.center_, self.scale_ = column_scales(Z, sample_weight)
        self.center_[self.is_categorical_], self.scale_[self.is_categorical_] = 0.0, 1.0
        return (Z - self.center_) / self.scale_

    def transform(self, X):
        """The standardised matrix of validated ``X``."""
        return (self._matrix(X) - self.center_) / self.scale_

    def _matrix(self, X):
        """Continuous columns as floats, categorical ones as their codes (NaN missing,
        ``-2`` unseen)."""
        Z = np.empty(X.shape, dtype=float)
        Z[:, ~self.is_categorical_] = self._numeric_columns(X)
        cat = np.flatnonzero(self.is_categorical_)
        if cat.size:
            codes = self._encoder.transform(X[:, cat]).T.astype(float)
            codes[codes == -1] = np.nan
            Z[:, cat] = codes
        return Z

    def _name(self, j):
        return repr(self._names[j]) if self._names is not None else str(int(j))

    def _numeric_columns(self, X):
        """The continuous columns of ``X`` as floats (NaN missing)."""
        num = np.flatnonzero(~self.is_categorical_)
        out = np.empty((X.shape[0], num.size))
        for t, j in enumerate(num):
            col = X[:, j]
            if col.dtype.kind in "biuf":
                out[:, t] = col
                continue
            missing = pd.isna(col)
            try:
                out[~missing, t] = np.asarray(col[~missing], dtype=float)
            except (TypeError, ValueError) as exc:
                bad = next((v for v in col[~missing] if not _converts(v)), exc)
                raise TypeError(
                    f"{self.owner}: column {self._name(j)} is modelled as continuous but "
                    f"holds {bad!r}, which is not a number ({exc}). Declare categorical "
                    "columns with categorical_features= or a pandas category dtype."
                ) from exc
            out[missing, t] = np.nan
        if np.isinf(out).any():
            raise ValueError("X holds infinite values; continuous columns must be finite.")
        return out

    def _continuous_category_error(self, X, j, exc):
        """The error of a categorical column ``j`` that looks continuous: why it is
        categorical, and how to model it either way."""
        if isinstance(self.categorical_features, str):  # "from_dtype"
            col = X[:, j]
            label = next((v for v in col[~pd.isna(col)] if not _is_number(v)), None)
            why = (
                f"it holds values that are not numbers (e.g. {label!r})"
                if label is not None
                else f"its dtype {col.dtype} is not numeric"
            )
            fix = (
                "convert it to numbers (e.g. its non-numeric entries to NaN, which are "
                "missing values) or list the categorical columns in categorical_features= "
                "without it"
            )
        else:
            why = "categorical_features declares it categorical"
            fix = "leave it out of categorical_features"
        return ValueError(
            f"{self.owner}: column {self._name(j)} is modelled as categorical because {why}, "
            f"but it looks continuous ({exc.n_values} distinct values, {exc.n_fractional} of "
            "them fractional): every value would become a category. To model it as "
            f"continuous, {fix}; to keep it categorical, bin it first or pass its categories "
            "explicitly with categories=."
        )


def _categorical_dtype(dtype):
    """A DataFrame column is categorical when its dtype is category, string, object or
    bool."""
    if isinstance(dtype, pd.CategoricalDtype):
        return True
    return pd.api.types.is_string_dtype(dtype) or getattr(dtype, "kind", "O") in "OSUb"


def _is_number(v):
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(
        v, (bool, np.bool_)
    )


def _converts(value):
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def _holds_labels(column):
    """An object column holds labels when some non-missing entry is not a number."""
    return any(not _is_number(v) for v in column[~pd.isna(column)])
