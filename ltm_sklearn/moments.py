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
from joblib import Parallel, delayed

MISSING = -1
UNSEEN = -2

__all__ = ["CategoricalEncoder", "MomentEstimator", "MISSING", "UNSEEN"]

# Dense counting is used for a projected moment when the full table is at most this large.
_DENSE_TABLE_LIMIT = 4096


# ---------------------------------------------------------------------- encoding
def _is_missing(value):
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    return isinstance(value, (float, np.floating)) and math.isnan(value)


def _normalise_value(value, column):
    """Map whole-number floats to ints so that 1.0 and 1 are one category."""
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


def _sort_key(value):
    if isinstance(value, (numbers.Number,)):
        return (0, float(value), "")
    return (1, 0.0, str(value))


class CategoricalEncoder:
    """Per-column encoding of arbitrary hashable category values into integer codes.

    Accepted values: ints, bools, strings, pandas categoricals, and floats (whole-number
    floats are merged with the equal int, so ``1.0`` and ``1`` are one category; other
    floats are categories by their exact value). ``None``/NaN/``pd.NA`` are missing.

    ``transform`` returns codes of shape ``(n_features, n_samples)`` (column-contiguous, the
    layout the moment routines read): ``0..n_j-1`` for known categories, ``MISSING`` (-1)
    for missing entries and ``UNSEEN`` (-2) for categories not seen in ``fit``.

    Examples
    --------
    >>> enc = CategoricalEncoder().fit([["a", 1.0], ["b", 2], ["a", None]])
    >>> enc.categories_
    [['a', 'b'], [1, 2]]
    >>> enc.transform([["b", 1], ["c", float("nan")]]).T.tolist()
    [[1, 0], [-2, -1]]
    """

    def fit(self, X):
        self.fit_transform(X)
        return self

    def fit_transform(self, X):
        """Learn the categories and encode ``X`` (one factorisation per column)."""
        factorized = [_factorize(col, j) for j, col in enumerate(_columns(X))]
        self.categories_ = []
        for j, (_, uniques) in enumerate(factorized):
            values = {_normalise_value(v, j) for v in uniques if not _is_missing(v)}
            self.categories_.append(sorted(values, key=_sort_key))
        self.n_states_ = np.array([max(len(c), 1) for c in self.categories_], dtype=np.int64)
        self._lookup = [
            {_lookup_key(v): i for i, v in enumerate(cats)} for cats in self.categories_
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
        if all(isinstance(v, numbers.Number) for c in self.categories_ for v in c):
            return out.astype(
                float
                if any(isinstance(v, float) for c in self.categories_ for v in c)
                else np.int64
            )
        return out

    def _codes(self, factorized):
        n = len(factorized[0][0]) if factorized else 0
        dtype = np.int16 if self.n_states_.max(initial=1) < 2**15 - 1 else np.int32
        codes = np.empty((len(factorized), n), dtype=dtype)
        for j, (inverse, uniques) in enumerate(factorized):
            lookup = self._lookup[j]
            mapped = np.empty(len(uniques) + 1, dtype=np.int64)
            for i, v in enumerate(uniques):
                if _is_missing(v):
                    mapped[i] = MISSING
                else:
                    mapped[i] = lookup.get(_lookup_key(_normalise_value(v, j)), UNSEEN)
            mapped[-1] = MISSING  # pandas' NA sentinel (-1) indexes the last slot
            codes[j] = mapped[inverse]
        return codes


def _factorize(col, j):
    try:
        return pd.factorize(col, use_na_sentinel=True)
    except TypeError:
        for v in col:  # find the offending value to name it
            _normalise_value(v, j)
        raise


def _lookup_key(value):
    # bools and ints hash alike in Python (True == 1); keep them apart
    return (type(value) is bool, value)


def _columns(X):
    if isinstance(X, pd.DataFrame):
        return [X.iloc[:, j].to_numpy(dtype=object) for j in range(X.shape[1])]
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
    from joblib import effective_n_jobs

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

    # -- pairs
    def pairs(self, pairs):
        """Joint tables ``P(X_i, X_j)`` for a list of ``(i, j)``; returns a dict."""
        todo = sorted({(i, j) for i, j in pairs if (i, j) not in self._pairs})
        if todo:
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


def rbf_features(X, n_components=100, random_state=None):
    """Per-column RBF kernel feature maps for continuous data (papers/002 section 3).

    Each column gets a Nystroem approximation (``sklearn.kernel_approximation``) of the
    Gaussian RBF kernel ``exp(-(x - x')^2 / (2 b^2))`` with the median-distance bandwidth
    ``b`` (median of ``|x_i - x_j|`` over up to 1,000 rows), centred, so that
    ``F_i^T F_j / N`` is the empirical cross-covariance operator ``C_ij`` and every cost is
    linear in ``N``.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Numeric, finite data.
    n_components : int, default=100
        Nystroem landmarks per column (at most ``n_samples``).
    random_state : int, RandomState instance or None, default=None

    Returns
    -------
    list of ndarray, one ``(n_samples, r_j)`` centred feature matrix per column.
    """
    from sklearn.kernel_approximation import Nystroem
    from sklearn.utils import check_random_state

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
    rng = check_random_state(random_state)
    n = X.shape[0]
    sub = rng.choice(n, size=min(n, 1000), replace=False)
    feats = []
    for j in range(X.shape[1]):
        x = X[:, j : j + 1]
        s = x[sub, 0]
        gaps = np.abs(s[:, None] - s[None, :])[np.triu_indices(s.size, 1)]
        width = np.median(gaps[gaps > 0]) if np.any(gaps > 0) else 1.0
        ny = Nystroem(
            gamma=1.0 / (2.0 * width**2),
            n_components=min(n_components, n),
            random_state=rng.randint(np.iinfo(np.int32).max),
        )
        F = ny.fit_transform(x)
        feats.append(F - F.mean(axis=0))
    return feats
