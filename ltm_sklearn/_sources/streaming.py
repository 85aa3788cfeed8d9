"""Statistics accumulated over batches of rows: the state behind ``partial_fit`` and the
distributed (Dask) fit.

The moment-based estimators read the data through sums (DESIGN section 3): singleton and
pair counts, projected higher-order counts, EM's expected counts. :class:`RowStatistics`
keeps what a batch adds:

* **exact, additive**: the weighted one-hot Gram matrix of all columns (every pair table
  and every singleton count at once) and the weight observing every pair of columns.
  Categories may first appear in any batch: codes are given in order of arrival and the
  tables grow; a new category adds rows and columns of zeros to the earlier counts and
  never changes them. At build time the categories are sorted (or put in the declared
  order) exactly as ``fit`` would, and the tables permuted accordingly.
* **a uniform sample of rows** (at most :data:`SAMPLE_ROWS`, a bottom-k sample by random
  keys, so the sample of a stream does not depend on how it was cut into batches): for
  what needs a projection chosen from statistics not yet complete (projected triples,
  whose projections come from the final pair tables), the tree search's held-out split
  of ``structure="auto"`` and EM. While the stream holds at most :data:`SAMPLE_ROWS`
  rows the sample is every row, and the fit equals ``fit`` on the concatenation; beyond
  it, pair tables (hence the tree metric and the projections) stay exact and the
  projected triples and EM read the sample (the approximation ``bench_scale.py``
  measures). The Dask path re-reads the data instead, so its triples and its final EM
  iterations are exact over all rows.
* **the distinct rows and their summed weights**, while there are at most
  :data:`SAMPLE_ROWS` of them (dropped for good once there are more): then the moments
  read every row, identical ones merged as ``fit``'s EM merges them, and the fit equals
  ``fit`` on the concatenation however many rows the stream holds (a table of few
  categories: 400,000 rows of 16 binary columns have at most 65,536 distinct ones).

Memory is independent of the number of rows: the Gram matrix is ``(sum_j n_j)^2`` and the
sample ``SAMPLE_ROWS x n_features`` codes.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._algorithms.em import unique_rows
from .._engine.encoding import (
    CategoricalEncoder,
    _columns,
    _factorize,
    _is_missing,
    _key,
    _normalise_value,
)
from .._engine.moments import _MAX_GRAM_WIDTH, MomentEstimator, _gram_sums, _normalise
from .._engine.user_warnings import warn

__all__ = ["RowStatistics", "StatisticsMoments", "SAMPLE_ROWS", "merge_distinct"]

#: rows kept in the uniform sample of a stream (codes of every column)
SAMPLE_ROWS = 200_000


class RowStatistics:
    """Additive statistics of the rows seen so far (see the module docstring).

    Parameters
    ----------
    n_features : int
    sample_rows : int, default=None
        Rows kept in the sample (``None``: :data:`SAMPLE_ROWS`).
    random_state : int or None
        Seeds the sampling keys.
    """

    def __init__(self, n_features, sample_rows=None, random_state=None):
        self.n_features = int(n_features)
        self.sample_rows = int(SAMPLE_ROWS if sample_rows is None else sample_rows)
        self.rng = np.random.default_rng(random_state)
        self.values = [[] for _ in range(self.n_features)]  # categories in arrival order
        self.lookup = [{} for _ in range(self.n_features)]
        self.by_text = [{} for _ in range(self.n_features)]  # str(category) -> category
        self.gram = np.zeros((0, 0))
        self.totals = np.zeros((self.n_features, self.n_features))
        self.sample_codes = np.zeros((self.n_features, 0), dtype=np.int32)
        self.sample_weight = np.zeros(0)
        self.sample_keys = np.zeros(0)
        self.sample_order = np.zeros(0, dtype=np.int64)
        # (codes, summed weights) of the distinct rows; None once there are too many
        self.distinct = (np.zeros((self.n_features, 0), dtype=np.int32), np.zeros(0))
        self.n_rows = 0
        self.weight = 0.0

    @property
    def sizes(self):
        return np.array([max(len(v), 1) for v in self.values], dtype=np.int64)

    # ------------------------------------------------------------------ adding rows
    def encode(self, X):
        """Arrival codes ``(n_features, n_rows)`` of a batch (``-1`` missing); new
        categories are appended to their column's list."""
        columns = _columns(X)
        codes = np.empty((self.n_features, len(columns[0]) if columns else 0), dtype=np.int32)
        earlier = [len(v) for v in self.values]  # the categories of the earlier batches
        warned = set()
        for j, col in enumerate(columns):
            inverse, uniques = _factorize(col, j)
            mapped = np.empty(len(uniques) + 1, dtype=np.int64)
            for i, v in enumerate(uniques):
                if _is_missing(v):
                    mapped[i] = -1
                    continue
                k = _key(v, j)
                if k not in self.lookup[j]:
                    value = _normalise_value(v, j)
                    if j not in warned and self._warn_if_twin(j, value, earlier[j]):
                        warned.add(j)  # once a column and batch
                    self.lookup[j][k] = len(self.values[j])
                    self.values[j].append(value)
                    self.by_text[j].setdefault(str(value), value)
                mapped[i] = self.lookup[j][k]
            mapped[-1] = -1
            codes[j] = mapped[inverse]
        return codes

    def _warn_if_twin(self, j, value, earlier):
        """Warn when a new category of column ``j`` reads as one of its first ``earlier``
        categories (those of the earlier batches) in another type (``'4'`` in a batch
        after ``4``): two categories, not one."""
        if not hasattr(self, "by_text"):  # statistics pickled before it was kept
            self.by_text = [{str(v): v for v in values} for values in self.values]
        twin = self.by_text[j].get(str(value))
        if twin is not None and self.lookup[j][_key(twin, j)] < earlier:
            warn(
                f"Column {j}: the value {value!r} ({type(value).__name__}) of this batch "
                f"matches the category {twin!r} ({type(twin).__name__}) of earlier batches; "
                "they are two categories. Give the column one type in every batch.",
                UserWarning,
            )
            return True
        return False

    def add(self, X, sample_weight):
        """Add a batch (rows of weight zero are left out, as in ``fit``)."""
        keep = sample_weight > 0
        if not keep.all():
            X = X.iloc[keep] if isinstance(X, pd.DataFrame) else X[keep]
            sample_weight = sample_weight[keep]
        old_sizes = self.sizes
        codes = self.encode(X)
        self.add_codes(codes, sample_weight, old_sizes)

    def add_codes(self, codes, w, old_sizes=None, keys=None):
        """Add arrival codes of a batch (``old_sizes``: the sizes before the batch)."""
        sizes = self.sizes
        width = int(sizes.sum())
        if width > _MAX_GRAM_WIDTH:
            raise ValueError(
                f"The columns hold {width} categories in total; the streamed pair statistics "
                f"(a one-hot Gram matrix) are limited to {_MAX_GRAM_WIDTH}. Fit in memory, "
                "or bin the columns with many categories."
            )
        if old_sizes is not None and not np.array_equal(old_sizes, sizes) and self.gram.size:
            self.gram = _grow(self.gram, old_sizes, sizes)
        elif self.gram.shape[0] != width:
            self.gram = np.zeros((width, width))
        if codes.shape[1]:
            columns = np.arange(self.n_features)
            ((gram, totals),) = _gram_sums(codes, w, sizes, columns)
            self.gram += gram
            self.totals += totals
        self.n_rows += codes.shape[1]
        self.weight += float(np.sum(w))
        self._sample(codes, w, keys)
        self._add_distinct(codes, np.asarray(w, dtype=float))

    def _sample(self, codes, w, keys=None):
        """Bottom-k sample by uniform keys: rows whose key is below the current k-th
        smallest are appended, and the buffer is cut back to the ``sample_rows`` smallest
        keys when it holds twice as many (amortised O(1) per row; :meth:`compact` before
        use)."""
        n = codes.shape[1]
        if keys is None:
            keys = self.rng.random(n)
        order = np.arange(self.n_rows - n, self.n_rows)
        keep = keys < self._threshold
        if not keep.all():
            codes, w, keys, order = codes[:, keep], w[keep], keys[keep], order[keep]
        self._append(codes, w, keys, order)

    _threshold = np.inf

    def _append(self, codes, w, keys, order):
        """Queue rows for the sample (concatenated only when the buffer is cut back or
        read: appending to one growing array would copy it for every batch)."""
        self._pending.append((codes.astype(np.int32), w, keys, order))
        self._n_pending += keys.size
        if self.sample_keys.size + self._n_pending > 2 * max(self.sample_rows, 1):
            self.compact()

    _n_pending = 0

    @property
    def _pending(self):
        return self.__dict__.setdefault("_pending_rows", [])

    def _add_distinct(self, codes, w):
        """Queue rows for the table of distinct rows (merged when the queue holds more
        than twice :attr:`sample_rows`, and before use)."""
        if self.distinct is None:
            return
        queue = self.__dict__.setdefault("_distinct_queue", [])
        queue.append((codes.astype(np.int32), w))
        queued = sum(c.shape[1] for c, _ in queue)
        if self.distinct[0].shape[1] + queued > 2 * max(self.sample_rows, 1):
            self.compact_distinct()

    def compact_distinct(self):
        """Merge the queued rows into the table of distinct rows; drop the table for good
        when it holds more than :attr:`sample_rows` rows."""
        queue = self.__dict__.pop("_distinct_queue", [])
        if self.distinct is None or not queue:
            return self
        codes, w = merge_distinct([self.distinct, *queue])
        self.distinct = (codes, w) if w.size <= self.sample_rows else None
        return self

    def compact(self):
        """Gather the queued rows and cut the sample back to its ``sample_rows`` smallest
        keys, in arrival order."""
        if self._pending:
            parts = [(self.sample_codes, self.sample_weight, self.sample_keys, self.sample_order)]
            parts += self._pending
            self.sample_codes = np.concatenate([p[0] for p in parts], axis=1)
            self.sample_weight = np.concatenate([p[1] for p in parts])
            self.sample_keys = np.concatenate([p[2] for p in parts])
            self.sample_order = np.concatenate([p[3] for p in parts])
            self._pending.clear()
            self._n_pending = 0
        if self.sample_keys.size > self.sample_rows:
            keep = np.argpartition(self.sample_keys, self.sample_rows)[: self.sample_rows]
            keep = keep[np.argsort(self.sample_order[keep])]
            self.sample_codes = self.sample_codes[:, keep]
            self.sample_weight = self.sample_weight[keep]
            self.sample_keys = self.sample_keys[keep]
            self.sample_order = self.sample_order[keep]
            self._threshold = self.sample_keys.max(initial=-np.inf)
        return self

    def merge(self, other):
        """Add the statistics of ``other`` (same categories, in the same arrival order:
        the distributed path encodes with one fixed list)."""
        self.gram += other.gram
        self.totals += other.totals
        self.n_rows += other.n_rows
        self.weight += other.weight
        other.compact_distinct()
        if other.distinct is None:
            self.distinct = None
        elif self.distinct is not None:
            self._add_distinct(*other.distinct)
        other.compact()
        self._append(other.sample_codes, other.sample_weight, other.sample_keys, other.sample_order)
        return self.compact()

    # ------------------------------------------------------------------ building
    def final_encoder(self, categories="auto", feature_names=None):
        """The encoder ``fit`` would build from the same rows (sorted categories, or the
        given ones), and the permutation of every column's arrival codes into its codes."""
        longest = max((len(v) for v in self.values), default=0)
        columns = np.full((max(longest, 1), self.n_features), None, dtype=object)
        for j, v in enumerate(self.values):
            columns[: len(v), j] = np.array(v, dtype=object)
        encoder = CategoricalEncoder(categories)
        encoder.fit_transform(columns, feature_names)
        perms = [
            np.array([encoder._lookup[j][_key(v, j)] for v in vals], dtype=np.int64)
            for j, vals in enumerate(self.values)
        ]
        return encoder, perms

    def moments(self, encoder, perms, n_jobs=None):
        """:class:`StatisticsMoments` in the codes of ``encoder``: exact pair and singleton
        tables; for everything else every row, when the sample holds them all or the
        distinct rows are few enough to be kept (identical rows merged), the sample's rows
        otherwise."""
        self.compact()
        sampled = self.sample_codes.shape[1] < self.n_rows
        if sampled:
            self.compact_distinct()
        if sampled and self.distinct is not None:
            rows, weights = self.distinct
            sampled = False
        else:
            rows, weights = self.sample_codes, self.sample_weight
        d = self.n_features
        n_states = encoder.n_states_
        sample = np.empty(rows.shape, dtype=np.int32)
        for j in range(d):
            c = rows[j]
            sample[j] = np.where(c >= 0, perms[j][np.maximum(c, 0)] if perms[j].size else 0, c)
        offsets = np.concatenate([[0], np.cumsum(self.sizes)])
        blocks = {}
        for i in range(d):
            for j in range(i, d):
                table = np.zeros((n_states[i], n_states[j]))
                src = self.gram[offsets[i] : offsets[i + 1], offsets[j] : offsets[j + 1]]
                if perms[i].size and perms[j].size:
                    table[np.ix_(perms[i], perms[j])] = src[: perms[i].size, : perms[j].size]
                blocks[(i, j)] = table
        moments = StatisticsMoments(sample, n_states, weights, n_jobs=n_jobs)
        moments._singletons = [
            (np.diag(blocks[(j, j)]).copy(), float(self.totals[j, j])) for j in range(d)
        ]
        moments._pairs = {
            (i, j): _normalise(blocks[(i, j)], self.totals[i, j])
            for i in range(d)
            for j in range(i + 1, d)
        }
        moments.total_weight = self.weight
        moments.sampled = sampled
        return moments


def merge_distinct(parts):
    """``(codes, weights)`` of the distinct rows of several ``(codes, weights)``, their
    weights summed (rows of weight zero dropped)."""
    codes, w = unique_rows(
        np.concatenate([c for c, _ in parts], axis=1), np.concatenate([w for _, w in parts])
    )
    return codes.astype(np.int32), w


def _grow(gram, old_sizes, sizes):
    """The Gram matrix with every column block padded from ``old_sizes`` to ``sizes``."""
    old_off = np.concatenate([[0], np.cumsum(old_sizes)])
    new_off = np.concatenate([[0], np.cumsum(sizes)])
    index = np.concatenate([new_off[j] + np.arange(old_sizes[j]) for j in range(len(sizes))])
    out = np.zeros((new_off[-1], new_off[-1]))
    # a column that had no category yet occupied one (empty) slot: it stays at the start
    out[np.ix_(index, index)] = gram[: old_off[-1], : old_off[-1]]
    return out


class StatisticsMoments(MomentEstimator):
    """A :class:`~ltm_sklearn.moments.MomentEstimator` whose singleton and pair tables
    come from accumulated statistics (prefilled caches, exact over every row) and whose
    ``codes`` are a sample of the rows (everything else reads them).

    The exact pair tables serve the structure (tree metric, mutual information). When the
    sample is not every row, the parameters are estimated from the sample's own moments
    (:meth:`for_parameters`): the observable representation relies on its pair and triple
    moments coming from the same rows (summing a child out of a triple gives the pair
    exactly), and mixing exact pairs with sampled triples broke that - on 64 leaves at
    1e6 rows (sample 2e5) the moment estimate fell from -39.89 to -52.6 nats per row.
    """

    total_weight = None
    sampled = False

    @property
    def exact_tiles(self):
        """The pair tiles read ``codes``: every row only when they are not a sample."""
        return not self.sampled

    def for_parameters(self):
        if not self.sampled:
            return self
        return MomentEstimator(self.codes, self.n_states, self.sample_weight, self.n_jobs)

    def subset(self, columns):
        columns = np.asarray(columns)
        sub = StatisticsMoments(
            self.codes[columns], self.n_states[columns], self.sample_weight, self.n_jobs
        )
        where = {int(c): t for t, c in enumerate(columns)}
        sub._pairs = {
            (where[i], where[j]): P
            for (i, j), P in self._pairs.items()
            if i in where and j in where and where[i] < where[j]
        }
        if self._singletons is not None:
            sub._singletons = [self._singletons[int(c)] for c in columns]
        sub.total_weight = self.total_weight
        sub.sampled = self.sampled
        return sub
