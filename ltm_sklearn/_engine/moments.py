"""The common marginal-estimation backend (DESIGN section 3): empirical singleton, pair
and projected higher-order moments of one-hot feature maps of encoded categorical data.

* Moments are weighted sums over rows divided by the total weight of the rows that
  observe all variables involved (available-case estimates; NaN entries are missing).
  Sums are additive, so the moments of the whole data equal the sum over row chunks:
  ``n_jobs`` splits the rows into chunks processed by joblib and adds the partial sums.
* Higher-order moments are only ever formed *projected*: each variable's one-hot vector
  is multiplied by a ``(r, n_states)`` projection (e.g. its top-r singular subspace) row
  by row, so a variable with 1,000 states never creates a 1,000^3 table. When the dense
  table is small it is counted directly and projected afterwards (same result, faster).

The encoding of the columns is in :mod:`~ltm_sklearn._engine.encoding`, the kernel
feature maps of continuous columns in :mod:`~ltm_sklearn._engine.kernel_features`.
"""

from __future__ import annotations

import math
from typing import Protocol, runtime_checkable

import numpy as np
from joblib import Parallel, delayed

from .checks import check_row_weights

__all__ = ["MomentSource", "MomentEstimator", "beyond_memory"]


def _check_codes(codes, n_states):
    """Category codes ``(n_features, n_rows)``: integers from ``UNSEEN`` (-2) to
    ``n_states - 1`` of their row (the encoder's output)."""
    if not isinstance(codes, np.ndarray) or codes.ndim != 2 or codes.dtype.kind not in "iu":
        raise ValueError(
            "codes must be a 2-D integer array (n_features, n_rows), e.g. the output of "
            "the package's encoder."
        )
    if n_states.shape != (codes.shape[0],):
        raise ValueError(
            f"n_states has {n_states.size} entries for {codes.shape[0]} rows of codes (one "
            "a feature)."
        )
    if codes.size and (codes.min() < -2 or np.any(codes.max(axis=1) >= n_states)):
        raise ValueError(
            "codes must lie between -2 (unseen) and n_states - 1 of their feature (-1 missing)."
        )


# Dense counting is used for a projected moment when the full table is at most this large.
_DENSE_TABLE_LIMIT = 4096


def _chunks(n, n_chunks):
    n_chunks = max(1, min(n_chunks, n))
    bounds = np.linspace(0, n, n_chunks + 1).astype(int)
    return [slice(bounds[i], bounds[i + 1]) for i in range(n_chunks)]


#: rows per chunk of the sums over rows: a fixed size, so that the chunks and the order
#: of their sums (and with weights, the rounding) do not depend on ``n_jobs``
_CHUNK_ROWS = 1 << 16


@runtime_checkable
class MomentSource(Protocol):
    """What the algorithms read from a source of moments.

    :class:`MomentEstimator` (rows in memory), the accumulated statistics of
    ``partial_fit`` and the Dask source (:mod:`ltm_sklearn._sources`) implement all of
    it; the kernel moments (:class:`~.kernel_features.KernelMoments`) and the algorithms'
    own sources (the observable representation, tensor unfoldings) implement the tables
    they serve. A capability is an attribute or a method with a meaning for every
    source, never probed with ``hasattr``:

    * ``exact_tiles`` - :meth:`MomentEstimator.pair_tiles` reads every row (not a
      sample), so the structure may read the pair tables in tiles;
    * ``sample_moments()`` - the moments of the rows in memory (the source itself, or a
      Dask source's uniform sample), for moments asked one after another;
    * ``prefetch(run, rng)`` - compute in one pass the projected moments ``run(rng)``
      will ask for (a no-op in memory);
    * ``n_rows_total`` - rows of the data, when more than the rows in memory
      (``None``: the rows in memory are the data).
    """

    n_states: np.ndarray
    sample_weight: np.ndarray
    exact_tiles: bool
    n_rows_total: int | None

    def singletons(self): ...

    def pairs(self, pairs): ...

    def pair(self, i, j): ...

    def projected(self, requests): ...

    def sample_moments(self): ...

    def prefetch(self, run, rng): ...


def beyond_memory(moments):
    """Whether the data of the moment source ``moments`` has rows beyond those in this
    process (a sample of distributed data: ``n_rows_total``, see :class:`MomentSource`).

    >>> beyond_memory(MomentEstimator(np.zeros((2, 5), dtype=int), [2, 2]))
    False
    """
    return (moments.n_rows_total or 0) > moments.n_samples


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

    #: :meth:`pair_tiles` reads every row of the data (see :class:`MomentSource`)
    exact_tiles = True
    #: rows of the data beyond those in memory (``None``: none beyond)
    n_rows_total = None

    def __init__(self, codes, n_states, sample_weight=None, n_jobs=None):
        self.codes = codes
        self.n_states = np.asarray(n_states, dtype=np.int64)
        _check_codes(codes, self.n_states)
        if codes.shape[1] == 0:
            raise ValueError("codes has no rows (shape (n_features, 0)): moments need data.")
        self.sample_weight = check_row_weights(sample_weight, codes.shape[1])
        self.n_jobs = n_jobs
        self._pairs = {}
        self._singletons = None

    @property
    def n_samples(self):
        return self.codes.shape[1]

    def sample_moments(self):
        """The moments of the rows in memory: all of them."""
        return self

    def prefetch(self, run, rng):
        """Nothing to compute ahead: the rows are in memory."""

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
        chunks = _chunks(self.n_samples, -(-self.n_samples // _CHUNK_ROWS))
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
    """Weighted sums ``sum_r w_r prod_m B_m e_{x_{v_m}}`` of the requests on these rows
    and the total weight of their rows (those observed on every variable of the
    request), request by request: a table of at most ``_DENSE_TABLE_LIMIT`` entries is
    counted and contracted with the projections one mode at a time, a larger one summed
    from the rows' projected features. (Contracting the requests of one shape in a
    batched product rounds differently, and a decomposition far from orthogonal followed
    the rounding.) Columns without a missing entry in these rows skip the masks, and with
    every weight 1 the counts are integers (the same values as summed weights)."""
    out = []
    # per column read, once for all the requests
    used = sorted({v for variables, _ in requests for v in variables})
    complete = {v: bool((codes[v] >= 0).all()) for v in used}
    unit = bool(np.all(w == 1.0))
    total = float(w.sum())
    for variables, projections in requests:
        if all(complete[v] for v in variables):
            ww, cols, weight = w, [codes[v] for v in variables], total
        else:
            obs = np.ones(codes.shape[1], dtype=bool)
            for v in variables:
                obs &= codes[v] >= 0
            ww, cols = w[obs], [codes[v][obs] for v in variables]
            weight = float(ww.sum())
        sizes = [int(n_states[v]) for v in variables]
        if math.prod(sizes) <= _DENSE_TABLE_LIMIT:
            key = np.zeros(len(ww), dtype=np.int64)
            for c, s in zip(cols, sizes):
                key = key * s + c
            counts = np.bincount(key, None if unit else ww, minlength=math.prod(sizes))
            table = counts.astype(float).reshape(sizes)
            for B in projections:
                # contract the leading (original) mode, append the projected one at the end
                table = np.tensordot(table, B, axes=([0], [1]))
        else:
            feats = [B.T[c] for B, c in zip(projections, cols)]  # (n_rows, r_m) each
            table = feats[0] * ww[:, None]
            for f in feats[1:]:
                # explicit width: no row may observe every variable of the request
                width = table.shape[1] * f.shape[1]
                table = (table[:, :, None] * f[:, None, :]).reshape(len(ww), width)
            table = table.sum(axis=0).reshape([B.shape[0] for B in projections])
        out.append((table, weight))
    return out
