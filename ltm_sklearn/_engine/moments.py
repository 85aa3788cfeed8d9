"""The common marginal-estimation backend (DESIGN section 3).

Every estimator gets its statistics here: per-column encoding of categorical values, and
empirical singleton / pair / projected higher-order moments of one-hot feature maps.

* Moments are weighted sums over rows divided by the total weight of the rows that
  observe all variables involved (available-case estimates; NaN entries are missing).
  Sums are additive, so the moments of the whole data equal the sum over row chunks:
  ``n_jobs`` splits the rows into chunks processed by joblib and adds the partial sums.
* Higher-order moments are only ever formed *projected*: each variable's one-hot vector
  is multiplied by a ``(r, n_states)`` projection (e.g. its top-r singular subspace) row
  by row, so a variable with 1,000 states never creates a 1,000^3 table. When the dense
  table is small it is counted directly and projected afterwards (same result, faster).
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import pandas as pd
from joblib import Parallel, delayed, effective_n_jobs

MISSING = -1
UNSEEN = -2

__all__ = [
    "CategoricalEncoder",
    "declared_categories",
    "MomentEstimator",
    "RBFFeatureMap",
    "KernelMoments",
    "rbf_features",
    "weighted_quantiles",
    "row_keys",
    "holdout_weights",
    "MISSING",
    "UNSEEN",
]

# Dense counting is used for a projected moment when the full table is at most this large.
_DENSE_TABLE_LIMIT = 4096


# ---------------------------------------------------------------------- encoding
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
        return self._codes([_factorize(col, j) for j, col in enumerate(columns)])

    def inverse_transform(self, codes):
        """Values of ``codes`` of shape ``(n_samples, n_features)`` (non-negative codes).

        Returns an integer or float array when every column holds numbers, else an object
        array.
        """
        codes = np.asarray(codes)
        cols = [
            np.asarray(self.categories_[j], dtype=object)[codes[:, j]]
            for j in range(codes.shape[1])
        ]
        out = np.column_stack(cols) if cols else np.empty((codes.shape[0], 0), dtype=object)
        values = [v for c in self.categories_ for v in c]
        if all(isinstance(v, numbers.Number) and not isinstance(v, bool) for v in values):
            return out.astype(float if any(isinstance(v, float) for v in values) else np.int64)
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


def _check_not_continuous(cats, j, feature_names=None):
    if len(cats) <= MAX_FLOAT_CATEGORIES:
        return
    fractional = sum(isinstance(v, float) and not float(v).is_integer() for v in cats)
    if 2 * fractional > len(cats):
        name = repr(str(feature_names[j])) if feature_names is not None else str(j)
        raise ContinuousColumnError(
            f"Column {name} looks continuous ({len(cats)} distinct values, {fractional} "
            "of them fractional): the categorical estimators would make a category of every "
            "value. Model numeric columns with KernelLatentTree, bin them first (e.g. "
            "sklearn.preprocessing.KBinsDiscretizer), or pass their categories explicitly.",
            j,
            len(cats),
            fractional,
        )


#: pandas dtype inferences of object columns that cannot mix bools with numbers
_NO_BOOL_MIX = {"string", "bytes", "integer", "floating", "mixed-integer-float", "empty", "boolean"}


def _factorize(col, j):
    """``pd.factorize`` that keeps ``True`` apart from ``1`` (and ``False`` from ``0``):
    they hash alike in Python, so bools and other values are factorised separately."""
    try:
        if col.dtype == object and pd.api.types.infer_dtype(col, skipna=True) not in _NO_BOOL_MIX:
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


# ---------------------------------------------------------------------- moments
def _chunks(n, n_chunks):
    n_chunks = max(1, min(n_chunks, n))
    bounds = np.linspace(0, n, n_chunks + 1).astype(int)
    return [slice(bounds[i], bounds[i + 1]) for i in range(n_chunks)]


def _effective_jobs(n_jobs):
    return 1 if n_jobs is None else effective_n_jobs(n_jobs)


class MomentEstimator:
    """Empirical moments of one-hot feature maps of encoded categorical data.

    Parameters
    ----------
    codes : ndarray of shape (n_features, n_samples)
        Output of :meth:`CategoricalEncoder.transform`.
    n_states : array-like of int, shape (n_features,)
    sample_weight : ndarray of shape (n_samples,), default=None
    n_jobs : int, default=None
        Number of row chunks processed in parallel by joblib (threads).

    Notes
    -----
    Pair tables are cached, so structure learning and parameter estimation share them
    (no second pass over the data for a pair already counted).
    """

    def __init__(self, codes, n_states, sample_weight=None, n_jobs=None):
        self.codes = codes
        self.n_states = np.asarray(n_states, dtype=np.int64)
        n = codes.shape[1]
        self.sample_weight = (
            np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=float)
        )
        self.n_jobs = n_jobs
        self._pairs = {}
        self._singletons = None

    @property
    def n_samples(self):
        return self.codes.shape[1]

    def subset(self, columns):
        """The moments of some columns only (a new estimator over ``codes[columns]``)."""
        columns = np.asarray(columns)
        return MomentEstimator(
            self.codes[columns], self.n_states[columns], self.sample_weight, self.n_jobs
        )

    def rows(self, rows, weights=None):
        """The moments of some rows only (a new estimator over ``codes[:, rows]``), with
        their own weights or new ``weights``."""
        w = self.sample_weight[rows] if weights is None else weights
        return MomentEstimator(self.codes[:, rows], self.n_states, w, self.n_jobs)

    def for_parameters(self):
        """The moments the parameters are estimated from (all of them come from one set
        of rows: see :class:`~ltm_sklearn._sources.streaming.StatisticsMoments`)."""
        return self

    def _map_chunks(self, func, *args):
        chunks = _chunks(self.n_samples, _effective_jobs(self.n_jobs))
        if len(chunks) == 1:
            return func(self.codes, self.sample_weight, *args)
        parts = Parallel(n_jobs=self.n_jobs, prefer="threads")(
            delayed(func)(self.codes[:, s], self.sample_weight[s], *args) for s in chunks
        )
        return _add(parts)

    # -- singletons
    def singleton_counts(self):
        """Per column, the weighted counts ``(n_j,)`` and the weight of rows observing it."""
        if self._singletons is None:
            self._singletons = self._map_chunks(_singleton_sums, self.n_states)
        return self._singletons

    def singletons(self):
        """Marginal probability vectors ``P(X_j)`` (over rows that observe ``X_j``)."""
        return [
            c / t if t > 0 else np.full(c.shape, 1.0 / c.size) for c, t in self.singleton_counts()
        ]

    def integral(self, j):
        """Sum of the one-hot feature map of column ``j`` over its values (marginalises it)."""
        return np.ones(int(self.n_states[j]))

    # -- pairs
    def pairs(self, pairs):
        """Joint tables ``P(X_i, X_j)`` for a list of ``(i, j)``; returns a dict."""
        todo = [key for key in dict.fromkeys(pairs) if key not in self._pairs]
        columns = np.unique(np.asarray(todo, dtype=np.int64).ravel()) if todo else None
        if todo and _gram_pays(self.n_states[columns], len(todo)):
            # many pairs of columns with few states: one weighted one-hot Gram matrix
            ((gram, totals),) = self._map_chunks(_gram_sums, self.n_states, columns)
            sizes = self.n_states[columns]
            offsets = np.concatenate([[0], np.cumsum(sizes)])
            where = {c: t for t, c in enumerate(columns)}
            if np.all(sizes == sizes[0]):  # all blocks at once
                k, m = len(columns), int(sizes[0])
                with np.errstate(invalid="ignore", divide="ignore"):
                    blocks = (
                        gram.reshape(k, m, k, m).transpose(0, 2, 1, 3)
                        / np.where(totals > 0, totals, np.inf)[:, :, None, None]
                    )
                for i, j in todo:
                    self._pairs[(i, j)] = blocks[where[i], where[j]]
            else:
                for i, j in todo:
                    a, b = where[i], where[j]
                    table = gram[offsets[a] : offsets[a + 1], offsets[b] : offsets[b + 1]]
                    self._pairs[(i, j)] = _normalise(table.copy(), totals[a, b])
        elif todo:
            sums = self._map_chunks(_pair_sums, self.n_states, todo)
            for (i, j), (table, total) in zip(todo, sums):
                self._pairs[(i, j)] = _normalise(table, total)
        return {(i, j): self._pairs[(i, j)] for i, j in pairs}

    def pair(self, i, j):
        """``P(X_i, X_j)`` with rows over ``X_i``, for either order of ``i, j`` (one cache)."""
        if i > j:
            return self.pairs([(j, i)])[(j, i)].T
        return self.pairs([(i, j)])[(i, j)]

    def all_pairs(self):
        """All ``d (d - 1) / 2`` pair tables, counted in one pass over the rows."""
        d = self.codes.shape[0]
        return self.pairs([(i, j) for i in range(d) for j in range(i + 1, d)])

    def pair_tiles(self, tile=512):
        """All pair tables, one tile of column pairs at a time (nothing cached).

        For a tile of columns ``I`` and a later (or the same) tile ``J`` yields
        ``(I, J, tables)``: ``tables[a, b]`` is ``P(X_I[a], X_J[b])`` padded with zeros to
        ``m x m`` (``m`` the largest number of states), read from one weighted one-hot
        Gram product of the two tiles. Memory holds two tiles of one-hot rows and one tile
        of tables, whatever the number of columns (:meth:`all_pairs` keeps all
        ``d (d - 1) / 2`` tables).

        Parameters
        ----------
        tile : int, default=512
            Columns per tile.

        Yields
        ------
        I, J : slice
        tables : ndarray of shape (len(I), len(J), m, m)
        """
        d = self.codes.shape[0]
        m = int(self.n_states.max(initial=1))
        w = self.sample_weight
        n = self.n_samples
        whole = np.all(w == np.round(w)) and w.max(initial=0.0) * n < 2.0**24
        dtype = np.float32 if whole else float
        tiles = [slice(a, min(a + tile, d)) for a in range(0, d, tile)]

        def onehot(cols):
            c = self.codes[cols]
            observed = c >= 0
            out = np.zeros((n, c.shape[0] * m), dtype=dtype)
            rows, js = np.nonzero(observed.T)
            out[rows, js * m + c.T[rows, js]] = 1.0
            return out, observed.T.astype(dtype)

        wd = w.astype(dtype)[:, None]
        for t, I in enumerate(tiles):
            hot_i, obs_i = onehot(I)
            hot_i_w, obs_i_w = hot_i * wd, obs_i * wd
            for J in tiles[t:]:
                hot_j, obs_j = (hot_i, obs_i) if J == I else onehot(J)
                counts = (hot_i_w.T @ hot_j).astype(float)
                totals = (obs_i_w.T @ obs_j).astype(float)
                a, b = I.stop - I.start, J.stop - J.start
                tables = counts.reshape(a, m, b, m).transpose(0, 2, 1, 3)
                with np.errstate(invalid="ignore", divide="ignore"):
                    tables = tables / np.where(totals > 0, totals, np.inf)[:, :, None, None]
                yield I, J, tables

    # -- projected higher-order moments
    def projected(self, requests):
        """Projected moments ``E[prod_m (B_m e_{x_{v_m}})]`` as tensors.

        Parameters
        ----------
        requests : list of (variables, projections)
            ``variables`` a tuple of distinct column indices; ``projections`` a tuple of
            matrices of shape ``(r_m, n_states[v_m])``.

        Returns
        -------
        list of ndarray, the m-th of shape ``(r_0, r_1, ...)``.
        """
        sums = self._map_chunks(_projected_sums, self.n_states, requests)
        return [_normalise(t, w) for t, w in sums]


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix(h):
    """The finaliser of splitmix64: a bijection of uint64 that scatters nearby inputs."""
    h = h ^ (h >> np.uint64(30))
    h = h * np.uint64(0xBF58476D1CE4E5B9)
    h = h ^ (h >> np.uint64(27))
    h = h * np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(31))


def _row_hash(values, seed):
    """A 64-bit hash of every row's values (``values`` feature-major)."""
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
    h = _row_hash(values, seed)
    n = h.size
    order = np.argsort(h, kind="stable")
    sorted_h = h[order]
    starts = np.r_[True, sorted_h[1:] != sorted_h[:-1]]
    first = np.maximum.accumulate(np.where(starts, np.arange(n), 0))
    occurrence = np.empty(n, dtype=np.int64)
    occurrence[order] = np.arange(n) - first
    return _unit_keys(h, occurrence)


def holdout_weights(values, weights, share, seed=0, max_units=4096):
    """Split the weight of every row between a held-out and a training part, as a
    function of the rows themselves.

    Identical rows are pooled; the pooled weight ``W`` counts as ``ceil(W)`` unit rows
    (the ``j``-th of weight ``min(1, W - j)``), and a unit is held out when its key
    (:func:`row_keys` of the ``j``-th copy) is below ``share``. Repeating a row and giving
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
    h = _row_hash(values, seed)
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
    held = np.bincount(group, weights=unit_w * (keys < share), minlength=first.size)
    held_out, train, key = np.zeros(n), np.zeros(n), np.ones(n)
    held_out[first] = held
    train[first] = np.maximum(W - held, 0.0)
    key[first] = keys[np.cumsum(units) - units] if group.size else 1.0
    return held_out, train, key


def _normalise(table, total):
    if total <= 0:
        return np.zeros_like(table)
    return table / total


def _add(parts):
    """Sum per-chunk lists of ``(table, total)``: moments are additive over rows."""
    return [
        (sum(p[m][0] for p in parts), sum(p[m][1] for p in parts)) for m in range(len(parts[0]))
    ]


def _singleton_sums(codes, w, n_states):
    out = []
    for j in range(codes.shape[0]):
        c = codes[j]
        obs = c >= 0
        cnt = np.bincount(c[obs], weights=w[obs], minlength=n_states[j])[: n_states[j]]
        out.append((cnt, float(w[obs].sum())))
    return out


def _pair_sums(codes, w, n_states, pairs):
    out = []
    for i, j in pairs:
        a, b = codes[i], codes[j]
        ni, nj = int(n_states[i]), int(n_states[j])
        obs = (a >= 0) & (b >= 0)
        if obs.all():
            key = a.astype(np.int64) * nj + b
            ww = w
        else:
            key = a[obs].astype(np.int64) * nj + b[obs]
            ww = w[obs]
        table = np.bincount(key, weights=ww, minlength=ni * nj).reshape(ni, nj)
        out.append((table, float(ww.sum())))
    return out


#: cost per row of one pair table counted alone, and of one floating-point operation of a
#: matrix product (seconds; measured on the development machine, only their ratio matters)
_PAIR_ROW_COST = 1.1e-8
_FLOP_COST = 6e-12
#: largest one-hot width whose Gram matrix is formed (8192^2 doubles: 512 MB)
_MAX_GRAM_WIDTH = 8192


def _gram_pays(n_states, n_pairs):
    """Whether one one-hot Gram matrix over these columns is cheaper than ``n_pairs``
    separate pair counts (both scale with the rows; a safety factor of 4 on the Gram)."""
    width = int(np.sum(n_states))
    if width > _MAX_GRAM_WIDTH or n_pairs < 16:
        return False
    return 4 * 2.0 * width**2 * _FLOP_COST < n_pairs * _PAIR_ROW_COST


def _gram_sums(codes, w, n_states, columns, block=4096):
    """Weighted one-hot Gram matrix of ``columns`` and the weight observing each pair.

    ``gram[off_i + a, off_j + b]`` is the weight of the rows with ``X_i = a, X_j = b``;
    ``totals[i, j]`` the weight of the rows observing both (missing codes are -1).
    """
    sizes = n_states[columns]
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    width = int(np.sum(sizes))
    k = len(columns)
    gram = np.zeros((width, width))
    totals = np.zeros((k, k))
    sub = codes[columns]
    for start in range(0, sub.shape[1], block):
        c = sub[:, start : start + block]
        ww = w[start : start + block]
        n = c.shape[1]
        observed = c >= 0
        # whole-number weights sum exactly in single precision below 2^24 (twice as fast)
        whole = np.all(ww == np.round(ww)) and ww.max(initial=0.0) * n < 2.0**24
        onehot = np.zeros((n, width), dtype=np.float32 if whole else float)
        rows, cols = np.nonzero(observed.T)
        onehot[rows, offsets[cols] + c.T[rows, cols]] = 1.0
        weighted = onehot if np.all(ww == 1.0) else onehot * ww[:, None].astype(onehot.dtype)
        gram += weighted.T @ onehot
        if observed.all():
            totals += ww.sum()
        else:
            obs = observed.T.astype(float)
            totals += (obs * ww[:, None]).T @ obs
    return [(gram, totals)]


def _projected_sums(codes, w, n_states, requests):
    out = []
    for variables, projections in requests:
        obs = np.ones(codes.shape[1], dtype=bool)
        for v in variables:
            obs &= codes[v] >= 0
        ww = w if obs.all() else w[obs]
        cols = [codes[v] if obs.all() else codes[v][obs] for v in variables]
        sizes = [int(n_states[v]) for v in variables]
        if math.prod(sizes) <= _DENSE_TABLE_LIMIT:
            key = np.zeros(len(ww), dtype=np.int64)
            for c, s in zip(cols, sizes):
                key = key * s + c
            table = np.bincount(key, weights=ww, minlength=math.prod(sizes)).reshape(sizes)
            for B in projections:
                # contract the leading (original) mode, append the projected one at the end
                table = np.tensordot(table, B, axes=([0], [1]))
        else:
            feats = [B.T[c] for B, c in zip(projections, cols)]  # (n_rows, r_m) each
            table = feats[0] * ww[:, None]
            for f in feats[1:]:
                table = (table[:, :, None] * f[:, None, :]).reshape(len(ww), -1)
            table = table.sum(axis=0).reshape([B.shape[0] for B in projections])
        out.append((table, float(ww.sum())))
    return out


# ---------------------------------------------------------------------- kernel features
# Nystroem eigen-directions kept, relative to the largest eigenvalue of the landmark Gram.
_EIG_RTOL = 1e-9
# Quantile grid on which the median pairwise distance (the bandwidth) is computed.
_BANDWIDTH_GRID = 256
# Rows per chunk when accumulating kernel moments (bounds the temporaries).
_ROW_CHUNK = 65536


def weighted_quantiles(x, weights, probs):
    """Inverse weighted CDF: for each ``p`` the smallest ``x`` with ``F(x) >= p``.

    A row of weight 2 counts exactly as two rows of weight 1, and rows of weight 0 are
    ignored, so results do not depend on how the weights are spread over repeated rows.

    Examples
    --------
    >>> weighted_quantiles(np.array([3.0, 1.0, 2.0]), np.array([1.0, 2.0, 1.0]), [0.25, 0.75])
    array([1., 2.])
    """
    order = np.argsort(x, kind="stable")
    xs, cw = x[order], np.cumsum(weights[order])
    idx = np.searchsorted(cw, np.asarray(probs) * cw[-1], side="left")
    return xs[np.minimum(idx, xs.size - 1)]


def _fill_gaps(landmarks, width, budget):
    """Insert evenly spaced landmarks where consecutive ones are more than ``width`` apart
    (sparse quantiles in a heavy tail), at most ``budget`` of them in total."""
    gaps = np.diff(landmarks)
    need = np.maximum(np.ceil(gaps / width) - 1, 0)
    if need.sum() > budget:
        need = np.floor(need * budget / need.sum())
    pieces = [landmarks[:1]]
    for a, g, k in zip(landmarks[:-1], gaps, need.astype(int)):
        pieces.append(a + g * np.arange(1, k + 2) / (k + 1))
    return np.concatenate(pieces)


class RBFFeatureMap:
    """Per-column Nystroem features of the normalised Gaussian kernel (papers/002 section 3).

    Column ``j`` gets the kernel ``k_j(x, y) = N(x; y, h_j^2)`` - the Gaussian RBF kernel
    scaled to a probability density in ``x``, so that a product of these kernels is a
    smoothing kernel and the embedding of the data is a kernel density estimate - with
    bandwidth ``h_j = bandwidth_scale * median |x - x'|`` (the median heuristic, computed on
    a grid of weighted quantiles). It is approximated by the Nystroem method
    (Williams & Seeger 2001; the map of ``sklearn.kernel_approximation.Nystroem``) on
    ``n_components`` landmarks placed at the weighted quantiles ``(l - 1/2) / m`` of the
    column (plus up to ``n_components`` evenly spaced ones where consecutive quantiles
    are more than ``h_j`` apart, as in a heavy tail):
    ``phi_j(x) = k_j(x, L) V diag(lambda)^-1/2`` with ``(lambda, V)`` the eigenpairs of
    the landmark Gram ``k_j(L, L)`` above a relative cutoff, so
    ``phi_j(x) . phi_j(y) ~ k_j(x, y)``. Quantile landmarks make the map deterministic
    and make weights and repeated rows interchangeable.

    Because every landmark kernel integrates to one, the integrals ``int phi_j(x) dx``
    (``integrals_``, the feature a marginalised entry carries) and
    ``int x phi_j(x) dx`` (``first_moments_``, for conditional means) are exact.

    A categorical column (``n_categories[j] > 0``, values the codes ``0..n_j-1``) gets the
    indicator features ``phi_j(x) = e_x`` (the delta kernel; the "integral" is the sum over
    the categories, a vector of ones): with indicator features the kernel algorithm is the
    discrete one (papers/002 section 4), so one map serves mixed tables.

    Parameters
    ----------
    n_components : int, default=50
        Quantile landmarks per column (fewer when the column has fewer distinct
        quantiles; at most as many again fill gaps wider than the bandwidth).
    bandwidth_scale : float, default=1.0
        Multiplies the median-distance bandwidth.
    bandwidths : array-like of shape (n_features,), default=None
        Bandwidths to use instead of the median heuristic (``bandwidth_scale`` ignored).
    n_categories : array-like of int, shape (n_features,), default=None
        Number of categories of every categorical column (0 for a continuous column);
        ``None``: every column is continuous.

    Attributes
    ----------
    landmarks_, bandwidths_, projections_, integrals_, first_moments_ : list
        One entry per column (for a categorical column: its codes, bandwidth 0, the
        identity, ones and ``None``).
    n_features_out_ : ndarray of int
        Feature dimension of every column.
    offsets_ : ndarray of int
        Column ``j`` occupies ``offsets_[j]:offsets_[j + 1]`` of :meth:`transform`.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).standard_normal((500, 2))
    >>> fmap = RBFFeatureMap(n_components=30).fit(X)
    >>> F = fmap.transform(X)
    >>> F.shape[0], bool(F.shape[1] == fmap.offsets_[-1])
    (500, True)
    """

    def __init__(self, n_components=50, bandwidth_scale=1.0, bandwidths=None, n_categories=None):
        self.n_components = n_components
        self.bandwidth_scale = bandwidth_scale
        self.bandwidths = bandwidths
        self.n_categories = n_categories

    def fit(self, X, sample_weight=None):
        """Bandwidths and landmarks of every column (NaN entries are ignored)."""
        X = np.asarray(X, dtype=float)
        n, d = X.shape
        w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=float)
        self.landmarks_, self.bandwidths_, self.projections_ = [], [], []
        self.integrals_, self.first_moments_ = [], []
        grid_p = (np.arange(_BANDWIDTH_GRID) + 0.5) / _BANDWIDTH_GRID
        land_p = (np.arange(self.n_components) + 0.5) / self.n_components
        n_cat = np.zeros(d, dtype=np.int64) if self.n_categories is None else self.n_categories
        for j in range(d):
            if n_cat[j] > 0:  # indicator features of the codes
                m = int(n_cat[j])
                self.landmarks_.append(np.arange(m, dtype=float))
                self.bandwidths_.append(0.0)
                self.projections_.append(np.eye(m))
                self.integrals_.append(np.ones(m))
                self.first_moments_.append(None)
                continue
            obs = ~np.isnan(X[:, j]) & (w > 0)
            x, wj = X[obs, j], w[obs]
            if x.size == 0:
                x, wj = np.zeros(1), np.ones(1)
            q = weighted_quantiles(x, wj, np.concatenate([grid_p, land_p]))  # one sort
            grid, L = q[:_BANDWIDTH_GRID], np.unique(q[_BANDWIDTH_GRID:])
            gaps = np.abs(grid[:, None] - grid[None, :])[np.triu_indices(grid.size, 1)]
            gaps = gaps[gaps > 0]
            if self.bandwidths is not None:
                h = float(self.bandwidths[j])
            else:
                h = self.bandwidth_scale * (float(np.median(gaps)) if gaps.size else 1.0)
            L = _fill_gaps(L, h, budget=self.n_components)
            lam, V = np.linalg.eigh(np.exp(-((L[:, None] - L[None, :]) ** 2) / (2 * h * h)))
            keep = lam > _EIG_RTOL * lam[-1]
            proj = V[:, keep] / np.sqrt(lam[keep]) * (2 * np.pi * h * h) ** -0.25
            mass = np.sqrt(2 * np.pi) * h  # integral of exp(-(x - l)^2 / (2 h^2)) over x
            self.landmarks_.append(L)
            self.bandwidths_.append(h)
            self.projections_.append(proj)
            self.integrals_.append(mass * proj.sum(axis=0))
            self.first_moments_.append(mass * (L @ proj))
        self.n_features_out_ = np.array([p.shape[1] for p in self.projections_], dtype=np.int64)
        self.offsets_ = np.concatenate([[0], np.cumsum(self.n_features_out_)])
        return self

    def transform_column(self, j, x):
        """Features ``(len(x), n_features_out_[j])`` of the values ``x`` of column ``j``;
        NaN rows get zeros (and so do codes outside a categorical column's categories)."""
        x = np.asarray(x, dtype=float)
        L, h = self.landmarks_[j], self.bandwidths_[j]
        if h == 0:  # categorical: indicators of the codes
            F = (np.nan_to_num(x, nan=-1.0)[:, None] == L[None, :]).astype(float)
            return F
        K = np.exp(-((np.nan_to_num(x)[:, None] - L[None, :]) ** 2) / (2 * h * h))
        F = K @ self.projections_[j]
        F[np.isnan(x)] = 0.0
        return F

    def transform(self, X):
        """All columns' features side by side, ``(n_samples, offsets_[-1])``."""
        X = np.asarray(X, dtype=float)
        F = np.empty((X.shape[0], int(self.offsets_[-1])))
        for j in range(X.shape[1]):
            F[:, self.offsets_[j] : self.offsets_[j + 1]] = self.transform_column(j, X[:, j])
        return F


class KernelMoments:
    """Moments of kernel feature maps: the covariance operators of papers/002 section 4.1.

    The continuous counterpart of :class:`MomentEstimator`, with the same interface
    (``n_states`` are the feature dimensions): ``pair(i, j)`` is the uncentred
    cross-covariance operator ``C_ij = E[phi_i(X_i) phi_j(X_j)^T]`` (papers/002 eq. (5)),
    ``projected`` gives ``E[prod_m B_m phi_{v_m}(X_{v_m})]``, ``integral(j)`` the feature
    that marginalises column ``j``, and :meth:`covariance` the centred operators of every
    pair at once (for the tree metric of eq. (12)). With one-hot features these are the
    probability tables of the discrete case. NaN entries are missing (available-case
    averages, as in :class:`MomentEstimator`).

    Parameters
    ----------
    feature_map : RBFFeatureMap
        Fitted.
    X : ndarray of shape (n_samples, n_features)
    sample_weight : ndarray of shape (n_samples,), default=None
    features : ndarray, default=None
        ``feature_map.transform(X)`` if already computed (shared by per-class moments).
    """

    def __init__(self, feature_map, X, sample_weight=None, features=None):
        self.feature_map = feature_map
        self.X = np.asarray(X, dtype=float)
        n = self.X.shape[0]
        self.sample_weight = (
            np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=float)
        )
        self.features = feature_map.transform(self.X) if features is None else features
        self.n_states = feature_map.n_features_out_
        self._offsets = feature_map.offsets_
        missing = np.isnan(self.X)
        self._observed = None if not missing.any() else (~missing).astype(float)
        self._gram = None

    @property
    def n_samples(self):
        return self.X.shape[0]

    def for_parameters(self):
        return self

    def rows(self, rows, weights=None):
        """The moments of some rows only (features reused), with their own weights or new
        ``weights``."""
        w = self.sample_weight[rows] if weights is None else weights
        return KernelMoments(self.feature_map, self.X[rows], w, self.features[rows])

    def _block(self, j):
        return slice(int(self._offsets[j]), int(self._offsets[j + 1]))

    def integral(self, j):
        """``int phi_j(x) dx``: the feature a marginalised (missing) entry carries."""
        return self.feature_map.integrals_[j]

    def _pair_weights(self):
        """``W_ij``: total weight of the rows observing both ``i`` and ``j``."""
        w = self.sample_weight
        if self._observed is None:
            d = self.X.shape[1]
            return np.full((d, d), w.sum())
        return self._observed.T @ (w[:, None] * self._observed)

    def gram(self):
        """Weighted second moments of all features, ``(sum_j r_j, sum_j r_j)``, normalised
        block by block by the weight of the rows observing both columns (cached)."""
        if self._gram is None:
            F, w = self.features, self.sample_weight
            G = np.zeros((F.shape[1], F.shape[1]))
            for s in _chunks(F.shape[0], max(1, F.shape[0] // _ROW_CHUNK)):
                G += F[s].T @ (w[s, None] * F[s])
            W = self._pair_weights()
            sizes = self.n_states
            scale = np.repeat(np.repeat(np.where(W > 0, W, 1.0), sizes, axis=0), sizes, axis=1)
            self._gram = G / scale
        return self._gram

    def _row_weights(self, variables):
        """Row weights, zero on the rows that miss any of ``variables``."""
        if self._observed is None:
            return self.sample_weight
        return self.sample_weight * self._observed[:, list(variables)].prod(axis=1)

    def _column_weights(self):
        """Total weight of the rows observing each column (floored away from zero)."""
        obs = ~np.isnan(self.X)
        return np.maximum(self.sample_weight @ obs, np.finfo(float).tiny)

    def means(self):
        """``E[phi_j(X_j)]`` of every column, stacked."""
        return (self.sample_weight @ self.features) / np.repeat(
            self._column_weights(), self.n_states
        )

    def covariance(self):
        """Centred cross-covariance operators of all pairs, ``(G, offsets)``."""
        mu = self.means()
        return self.gram() - np.outer(mu, mu), self._offsets

    def pair(self, i, j):
        """``C_ij = E[phi_i(X_i) phi_j(X_j)^T]``, rows over the features of ``X_i``."""
        if self._gram is not None:
            return self._gram[self._block(i), self._block(j)]
        F, w = self.features, self._row_weights((i, j))
        a, b = F[:, self._block(i)], F[:, self._block(j)]
        return _normalise(a.T @ (w[:, None] * b), w.sum())

    def pairs(self, pairs):
        """``{(i, j): C_ij}`` for a list of pairs."""
        return {(i, j): self.pair(i, j) for i, j in pairs}

    def projected(self, requests):
        """``E[prod_m B_m phi_{v_m}(X_{v_m})]`` for ``(variables, projections)`` requests
        (see :meth:`MomentEstimator.projected`), accumulated over row chunks."""
        out = []
        F = self.features
        for variables, projections in requests:
            ww = self._row_weights(variables)
            shape = [B.shape[0] for B in projections]
            table = np.zeros(math.prod(shape))
            for s in _chunks(F.shape[0], max(1, F.shape[0] // _ROW_CHUNK)):
                feats = [F[s, self._block(v)] @ B.T for v, B in zip(variables, projections)]
                acc = feats[0] * ww[s, None]
                for f in feats[1:-1]:
                    acc = (acc[:, :, None] * f[:, None, :]).reshape(acc.shape[0], -1)
                table += (acc.T @ feats[-1]).ravel() if len(feats) > 1 else acc.sum(axis=0)
            out.append(_normalise(table.reshape(shape), float(ww.sum())))
        return out

    def column_moments(self):
        """Weighted mean and variance of the raw values of every column (observed rows)."""
        w = self.sample_weight
        obs = ~np.isnan(self.X)
        tot = self._column_weights()
        mean = (w @ np.where(obs, self.X, 0.0)) / tot
        var = (w @ (np.where(obs, self.X - mean, 0.0) ** 2)) / tot
        return mean, var


def rbf_features(X, n_components=50, bandwidth_scale=1.0):
    """Centred per-column RBF features (:class:`RBFFeatureMap`) of complete numeric data.

    ``F_i^T F_j / N`` is then the empirical centred cross-covariance operator of columns
    ``i`` and ``j``; every cost is linear in ``N``.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Numeric, finite data.
    n_components : int, default=50
    bandwidth_scale : float, default=1.0

    Returns
    -------
    list of ndarray, one ``(n_samples, r_j)`` centred feature matrix per column.
    """
    try:
        X = np.asarray(X, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            "Kernel features need numeric data; got values that are not numbers "
            "(encode categorical columns or use a discrete estimator)."
        ) from exc
    if X.ndim != 2 or X.shape[0] < 2:
        raise ValueError(f"X must be 2D with at least 2 rows, got shape {X.shape}.")
    if not np.all(np.isfinite(X)):
        raise ValueError("X holds NaN or infinite values; kernel features need finite data.")
    fmap = RBFFeatureMap(n_components, bandwidth_scale).fit(X)
    F = fmap.transform(X)
    F -= F.mean(axis=0)
    return [F[:, fmap.offsets_[j] : fmap.offsets_[j + 1]] for j in range(X.shape[1])]
