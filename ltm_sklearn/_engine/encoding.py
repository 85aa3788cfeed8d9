"""Category encoding of the columns (DESIGN section 3): every column's values to integer
codes ``0..n_j-1``, ``MISSING`` (-1) for a missing entry and ``UNSEEN`` (-2) for a category
not known to the encoder, with the checks that keep continuous or duplicated columns
out of the categorical estimators."""

from __future__ import annotations

import math
import numbers

import numpy as np
import pandas as pd

from .user_warnings import warn

MISSING = -1
UNSEEN = -2

__all__ = [
    "CategoricalEncoder",
    "ContinuousColumnError",
    "check_unique_columns",
    "declared_categories",
    "MISSING",
    "UNSEEN",
]


def _is_missing(value):
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    return isinstance(value, (float, np.floating)) and math.isnan(value)


def _normalise_value(value, column):
    """Canonical form of a category value: whole-number floats become ints (``1.0`` and
    ``1`` are one category), numpy scalars become Python scalars, bools stay bools."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (numbers.Integral,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        if math.isinf(value):
            raise ValueError(f"Column {column} holds an infinite value; categories must be finite.")
        return int(value) if float(value).is_integer() else float(value)
    if isinstance(value, (str, bytes)):
        return value
    try:
        hash(value)
    except TypeError:
        raise TypeError(
            f"Column {column} holds a value of type {type(value).__name__}: category values "
            "must be hashable scalars (argument must be a string or a number)."
        ) from None
    return value


def _key(value, column):
    """Lookup key of a value: its canonical form, with bools kept apart from the ints they
    compare equal to (``True == 1`` in Python), in fit and in transform alike."""
    value = _normalise_value(value, column)
    return (type(value) is bool, value)


def _match_key(value):
    """What a value reads as, whatever its type: a number for numbers, bools and text
    that spells one (``1``, ``1.0``, ``True``, ``"1"``, ``"1.0"`` and ``"true"`` alike),
    else its text; :meth:`CategoricalEncoder._warn_if_retyped` finds with it the fitted
    category an unseen value was meant to be."""
    if isinstance(value, (bool, np.bool_, numbers.Real)):
        return float(value)
    text = str(value).strip()
    if text.lower() in ("true", "false"):
        return float(text.lower() == "true")
    try:
        return float(text)
    except ValueError:
        return text


def _sort_key(value):
    if isinstance(value, (bool, np.bool_)):
        return (0, float(value), "bool")
    if isinstance(value, (numbers.Number,)):
        return (0, float(value), "")
    return (1, 0.0, str(value))


class CategoricalEncoder:
    """Per-column encoding of arbitrary hashable category values into integer codes.

    Accepted values: ints, bools, strings, pandas categoricals, and floats (whole-number
    floats are merged with the equal int, so ``1.0`` and ``1`` are one category; other
    floats are categories by their exact value; ``True`` and ``1`` are two categories).
    ``None``/NaN/``pd.NA`` are missing.

    Parameters
    ----------
    categories : "auto" or list, default="auto"
        ``"auto"``: the values seen in ``fit``, sorted. A list has one entry per column:
        ``None`` (that column is ``"auto"``) or the array-like of its categories, in the
        order of the codes (declared categories may be unobserved; a value outside them
        in ``fit`` is an error).

    ``transform`` returns codes of shape ``(n_features, n_samples)`` (column-contiguous, the
    layout the moment routines read): ``0..n_j-1`` for known categories, ``MISSING`` (-1)
    for missing entries and ``UNSEEN`` (-2) for categories not known to the encoder.

    Examples
    --------
    >>> enc = CategoricalEncoder().fit([["a", 1.0], ["b", 2], ["a", None]])
    >>> enc.categories_
    [['a', 'b'], [1, 2]]
    >>> enc.transform([["b", 1], ["c", float("nan")]]).T.tolist()
    [[1, 0], [-2, -1]]
    >>> CategoricalEncoder([None, [2, 1, 3]]).fit([["a", 1], ["b", 2]]).categories_
    [['a', 'b'], [2, 1, 3]]
    """

    def __init__(self, categories="auto"):
        self.categories = categories

    def fit(self, X):
        self.fit_transform(X)
        return self

    def fit_transform(self, X, feature_names=None):
        """Learn the categories and encode ``X`` (one factorisation per column).

        A column of more than ``MAX_FLOAT_CATEGORIES`` distinct values, most of them
        fractional numbers, looks continuous and is refused (unless its categories are
        given): it would become as many categories as values.
        """
        columns = _columns(X)
        factorized = [_factorize(col, j) for j, col in enumerate(columns)]
        given = self.categories
        if isinstance(given, str):
            given = [None] * len(columns)
        elif len(given) != len(columns):
            raise ValueError(
                f"categories has {len(given)} entries but X has {len(columns)} columns."
            )
        self.categories_ = []
        for j, (_, uniques) in enumerate(factorized):
            if given[j] is None:
                values = {}
                for v in uniques:
                    if not _is_missing(v):
                        values.setdefault(_key(v, j), _normalise_value(v, j))
                cats = sorted(values.values(), key=_sort_key)
                _check_not_continuous(cats, j, feature_names)
                inverse = factorized[j][0]
                if not _warn_if_identifier(inverse, len(cats), j, feature_names):
                    if not _warn_if_many_numbers(cats, j, feature_names):
                        _warn_if_rare_values(inverse, len(cats), j, feature_names)
            else:
                cats = [_normalise_value(v, j) for v in given[j] if not _is_missing(v)]
                keys = [_key(v, j) for v in cats]
                if len(set(keys)) != len(keys):
                    raise ValueError(f"categories[{j}] lists a category more than once.")
                known = set(keys)
                unknown = [v for v in uniques if not _is_missing(v) and _key(v, j) not in known]
                if unknown:
                    raise ValueError(
                        f"Column {j} holds values {unknown[:5]} that are not among its "
                        "declared categories."
                    )
            self.categories_.append(cats)
        self.n_states_ = np.array([max(len(c), 1) for c in self.categories_], dtype=np.int64)
        self._feature_names = feature_names
        self._lookup = [
            {_key(v, j): i for i, v in enumerate(c)} for j, c in enumerate(self.categories_)
        ]
        return self._codes(factorized)

    def transform(self, X):
        columns = _columns(X)
        if len(columns) != len(self.categories_):
            raise ValueError(
                f"X has {len(columns)} columns, the encoder was fitted on {len(self.categories_)}."
            )
        factorized = [_factorize(col, j) for j, col in enumerate(columns)]
        codes = self._codes(factorized)
        for j, (_, uniques) in enumerate(factorized):
            self._warn_if_retyped(j, codes[j], uniques)
        return codes

    def _warn_if_retyped(self, j, codes, uniques):
        """Warn when most of a column's entries are unseen categories that match fitted
        ones in another type (``'4'`` scored against a fitted ``4``)."""
        observed = codes != MISSING
        share = np.mean(codes[observed] == UNSEEN) if observed.any() else 0.0
        if share < _RETYPED_SHARE:
            return
        fitted = {_match_key(v): v for v in self.categories_[j]}
        known = {_key(v, j) for v in self.categories_[j]}  # found in fit: no mismatch
        matches = [
            (v, fitted[_match_key(v)])
            for v in uniques
            if not _is_missing(v) and _key(v, j) not in known and _match_key(v) in fitted
        ]
        if matches:
            names = getattr(self, "_feature_names", None)
            name = _column_name(j, names)
            (new, old), *_ = matches
            warn(
                f"Column {name}: {share:.0%} of its entries are "
                f"categories not seen in fit, and {new!r} ({type(new).__name__}) matches the "
                f"fitted {old!r} ({type(old).__name__}): they are read as unseen categories. "
                "Give the column the type it had in fit.",
                UserWarning,
            )

    def inverse_transform(self, codes):
        """Values of ``codes`` of shape ``(n_samples, n_features)`` (non-negative codes).

        Returns an integer or float array when every column holds numbers, else an object
        array.
        """
        codes = np.asarray(codes)
        # a column never observed in training has no category to draw: it is missing
        cols = [
            np.asarray(c, dtype=object)[codes[:, j]] if len(c) else np.full(len(codes), np.nan)
            for j, c in enumerate(self.categories_)
        ]
        out = np.column_stack(cols) if cols else np.empty((codes.shape[0], 0), dtype=object)
        values = [v for c in self.categories_ for v in c]
        if values and all(self.categories_) and all(isinstance(v, bool) for v in values):
            return out.astype(bool)
        if all(isinstance(v, numbers.Number) and not isinstance(v, bool) for v in values):
            floats = any(isinstance(v, float) for v in values)
            return out.astype(float if floats or not all(self.categories_) else np.int64)
        return out

    def _codes(self, factorized):
        n = len(factorized[0][0]) if factorized else 0
        dtype = np.int16 if self.n_states_.max(initial=1) < 2**15 - 1 else np.int32
        codes = np.empty((len(factorized), n), dtype=dtype)
        for j, (inverse, uniques) in enumerate(factorized):
            lookup = self._lookup[j]
            mapped = np.empty(len(uniques) + 1, dtype=np.int64)
            for i, v in enumerate(uniques):
                mapped[i] = MISSING if _is_missing(v) else lookup.get(_key(v, j), UNSEEN)
            mapped[-1] = MISSING  # pandas' NA sentinel (-1) indexes the last slot
            codes[j] = mapped[inverse]
        return codes


#: more distinct values than this, most of them fractional: a continuous column
MAX_FLOAT_CATEGORIES = 50


class ContinuousColumnError(ValueError):
    """A column to be encoded as categories looks continuous.

    Parameters
    ----------
    message : str
    column : int
        Index of the column among the columns given to the encoder.
    n_values, n_fractional : int
        Its distinct values, and how many of them are fractional numbers.
    """

    def __init__(self, message, column, n_values, n_fractional):
        super().__init__(message)
        self.column = column
        self.n_values = n_values
        self.n_fractional = n_fractional


#: a column with a distinct value in at least this share of its observed entries (and at
#: least ``_ID_MIN_ROWS`` of them) is read as a row identifier
_ID_SHARE = 0.9
_ID_MIN_ROWS = 100
#: a column of at least this many distinct values, seen on average in fewer than
#: ``_RARE_ROWS`` rows each, warns too (2,000 values in 5,000 rows: no warning as an
#: identifier, a fit 15 times as long as without the column and a star-shaped tree)
_RARE_MIN_VALUES = 100
_RARE_ROWS = 5
#: share of a column's entries unseen in fit from which a change of type is looked for
_RETYPED_SHARE = 0.5


def _column_name(j, feature_names=None):
    """How a warning or an error names column ``j``: its name quoted, or its index."""
    return repr(str(feature_names[j])) if feature_names is not None else str(j)


def _warn_if_identifier(inverse, n_values, j, feature_names=None):
    """Warn when a column to be encoded has a distinct value in (almost) every row: as
    categories it tells nothing about the other columns, and costs a category per row."""
    n_observed = int(np.count_nonzero(np.asarray(inverse) >= 0))
    if n_observed >= _ID_MIN_ROWS and n_values >= _ID_SHARE * n_observed:
        name = _column_name(j, feature_names)
        warn(
            f"Column {name} has {n_values} distinct values in {n_observed} rows: like a row "
            "identifier it tells nothing about the other columns, and it becomes one "
            "category per row (slower fits, lower likelihoods). Drop it, or pass its "
            "categories if they are real ones.",
            UserWarning,
        )
        return True
    return False


def _warn_if_rare_values(inverse, n_values, j, feature_names=None):
    """Warn when a column to be encoded has many values, each seen in a few rows only:
    its categories cannot be estimated, and each adds to the cost of a fit."""
    n_observed = int(np.count_nonzero(np.asarray(inverse) >= 0))
    if n_values >= _RARE_MIN_VALUES and n_observed < _RARE_ROWS * n_values:
        name = _column_name(j, feature_names)
        warn(
            f"Column {name} has {n_values} distinct values in {n_observed} rows "
            f"({n_observed / n_values:.1f} rows a value): most of its categories are too "
            "rare to estimate, and each adds to the cost of the fit. Group the rare values "
            "(into one 'other' category, say) or drop the column; pass its categories if "
            "they are real ones.",
            UserWarning,
        )


def _warn_if_many_numbers(cats, j, feature_names=None):
    """Warn when a column of more than ``MAX_FLOAT_CATEGORIES`` categories is mostly
    whole numbers (counts, amounts, years): each value becomes a category of its own,
    with no order and nothing shared between neighbouring values. Fractional ones are
    refused (:func:`_check_not_continuous`); whole ones may be real categories (codes).
    Returns whether it warned."""
    if len(cats) <= MAX_FLOAT_CATEGORIES:
        return False
    whole = sum(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in cats)
    if 2 * whole > len(cats):
        name = _column_name(j, feature_names)
        warn(
            f"Column {name} has {len(cats)} distinct whole numbers, each of which becomes a "
            "category of its own (no order, nothing shared between neighbouring values). "
            "If it is a count or an amount, model it with KernelLatentTree or bin it (e.g. "
            "sklearn.preprocessing.KBinsDiscretizer); if its values are codes, pass its "
            "categories to keep them (which also silences this warning).",
            UserWarning,
        )
        return True
    return False


def _check_not_continuous(cats, j, feature_names=None):
    if len(cats) <= MAX_FLOAT_CATEGORIES:
        return
    fractional = sum(_is_fractional(v) for v in cats)
    if 2 * fractional > len(cats):
        name = _column_name(j, feature_names)
        raise ContinuousColumnError(
            f"Column {name} looks continuous ({len(cats)} distinct values, {fractional} "
            "of them fractional numbers, or text that reads as one): the categorical estimators "
            "would make a category of every value. Model numeric columns with KernelLatentTree "
            "(numbers read as text: convert them first, e.g. pandas.to_numeric), bin them (e.g. "
            "sklearn.preprocessing.KBinsDiscretizer), or pass their categories explicitly.",
            j,
            len(cats),
            fractional,
        )


def _is_fractional(value):
    """Whether a category is a finite number with a fractional part, or text that reads
    as one (``"0.25"``: numbers stored as text, as ``read_csv(dtype=str)`` gives them)."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return False
    return isinstance(value, float) and math.isfinite(value) and not value.is_integer()


#: pandas dtype inferences of object columns of dates and times
_TIMES = {"datetime64", "datetime", "date", "timedelta64", "timedelta", "time", "period"}
#: pandas dtype inferences of object columns that cannot mix bools with numbers
_NO_BOOL_MIX = {"string", "bytes", "integer", "floating", "mixed-integer-float", "empty", "boolean"}


def _factorize(col, j):
    """``pd.factorize`` that keeps ``True`` apart from ``1`` (and ``False`` from ``0``):
    they hash alike in Python, so bools and other values are factorised separately."""
    inferred = pd.api.types.infer_dtype(col, skipna=True) if col.dtype == object else None
    if col.dtype.kind in "Mm" or inferred in _TIMES:
        raise TypeError(
            f"Column {j} holds dates or times: convert them first (to numbers, or to "
            "categories as text), as for a DataFrame column of dates."
        )
    try:
        if inferred is not None and inferred not in _NO_BOOL_MIX:
            is_bool = np.fromiter((type(v) in (bool, np.bool_) for v in col), bool, len(col))
            if is_bool.any():
                codes = np.empty(len(col), dtype=np.int64)
                c1, u1 = pd.factorize(col[is_bool])
                c2, u2 = pd.factorize(col[~is_bool], use_na_sentinel=True)
                codes[is_bool] = c1
                codes[~is_bool] = np.where(c2 >= 0, c2 + len(u1), -1)
                return codes, np.concatenate([np.asarray(u1, object), np.asarray(u2, object)])
        return pd.factorize(col, use_na_sentinel=True)
    except TypeError:
        for v in col:  # find the offending value to name it
            _normalise_value(v, j)
        raise


def check_unique_columns(X):
    """Refuse a DataFrame whose column names repeat.

    Parameters
    ----------
    X : object
        The input of ``fit``; anything but a :class:`pandas.DataFrame` passes.

    Raises
    ------
    ValueError
        If two columns share a name: a column is then addressed by a name that means
        several columns (``X[name]`` is a frame), and the names of the fitted model
        (``feature_names_in_``, Newick labels, ``categorical_features``) would be ambiguous.
    """
    if not isinstance(X, pd.DataFrame):
        return
    duplicated = X.columns[X.columns.duplicated()].unique()
    if len(duplicated):
        raise ValueError(
            f"X has duplicated column names {[str(c) for c in duplicated]}: every column "
            "needs its own name (rename them, or pass a NumPy array)."
        )


def declared_categories(X):
    """Declared categories of the pandas ``Categorical`` columns of a DataFrame (``None``
    for other columns and for non-DataFrame input): what a user declared is honoured,
    observed or not. A DataFrame with duplicated column names is refused
    (:func:`check_unique_columns`)."""
    if not isinstance(X, pd.DataFrame):
        return None
    check_unique_columns(X)
    return [
        list(X[c].cat.categories) if isinstance(X[c].dtype, pd.CategoricalDtype) else None
        for c in X.columns
    ]


def _columns(X):
    """The columns of ``X`` as 1-D arrays: NumPy columns of a frame keep their dtype (no
    conversion of millions of numbers to Python objects), the others become objects."""
    if isinstance(X, pd.DataFrame):
        columns = []
        for j in range(X.shape[1]):
            col = X.iloc[:, j]
            if isinstance(col.dtype, np.dtype) and col.dtype.kind in "biuf":
                col = col.to_numpy()
                if col.dtype.kind == "f" and np.isinf(col).any():
                    raise ValueError("X holds infinite values; categories must be finite.")
                columns.append(col)
            else:
                columns.append(col.to_numpy(dtype=object))
        return columns
    arr = np.asarray(X, dtype=object) if not isinstance(X, np.ndarray) else X
    if arr.ndim != 2:
        raise ValueError(f"Expected a 2D array, got {arr.ndim}D.")
    if arr.dtype.kind == "f" and np.isinf(arr).any():
        raise ValueError("X holds infinite values; categories must be finite.")
    return [arr[:, j] for j in range(arr.shape[1])]
