"""Fitting on Dask collections: statistics computed partition by partition on the active
Dask scheduler (a ``distributed.Client`` when one is running), reduced on the cluster.

Only small objects reach the client: the category values of every column, the one-hot
Gram matrix of all columns with a uniform sample of rows
(:class:`~ltm_sklearn._sources.streaming.RowStatistics`), projected moments, EM's expected
counts. The passes over the data:

1. the distinct values of every column (their union is sorted into the categories
   exactly as ``fit`` sorts them);
2. the statistics of every partition, encoded with those categories and merged in a tree
   (pair and singleton tables exact, the sample for the tree search's held-out split and
   the first EM iterations, and the 64-bit hashes of the distinct rows while the merged
   ones number at most ``SAMPLE_ROWS``);
   2b. only when they do: the distinct rows with their counts (at most ``SAMPLE_ROWS``),
   so that EM reads every row, as ``fit`` does, and needs no pass 4;
3. every projected moment the estimator asks for (exact: the projections are known by
   then, and every partition is read again);
4. one pass per EM iteration on all rows (after EM has converged on the sample), with
   the expected counts of every partition summed on the cluster.

Dask is an optional dependency (``pip install "ltm-sklearn[dask]"``).
"""

from __future__ import annotations

import copy
import hashlib

import numpy as np
import pandas as pd
from sklearn.utils import check_random_state

from .._algorithms.em import unique_rows
from .._engine.encoding import _key
from .._engine.evidence import CodeEvidence
from .._engine.inference import expected_counts
from .._engine.moments import MomentEstimator, _add
from .._engine.row_keys import row_hash
from . import streaming
from .streaming import RowStatistics, StatisticsMoments, merge_distinct

__all__ = ["dask_moments", "DaskMoments"]

#: partials merged per node of the reduction tree
_SPLIT_EVERY = 8


def _dask():
    try:
        import dask
    except ImportError as exc:  # pragma: no cover - the dask extra is not installed
        raise ImportError(
            'Fitting on Dask collections needs Dask: pip install "ltm-sklearn[dask]".'
        ) from exc
    return dask


def _partitions(X):
    """Row partitions of a Dask DataFrame or array as delayed pandas / NumPy blocks."""
    if hasattr(X, "columns"):  # dask DataFrame
        return list(X.to_delayed()), [str(c) for c in X.columns], X.shape[1]
    if X.ndim != 2:
        raise ValueError(f"Expected a 2D Dask array, got {X.ndim}D.")
    if len(X.chunks[1]) > 1:
        X = X.rechunk({1: -1})  # every block holds whole rows
    return list(X.to_delayed().ravel()), None, X.shape[1]


def _tree_reduce(parts, combine):
    """Delayed tree reduction of ``parts`` with ``combine(list) -> one``."""
    dask = _dask()
    merge = dask.delayed(combine, pure=True)
    while len(parts) > 1:
        parts = [merge(parts[i : i + _SPLIT_EVERY]) for i in range(0, len(parts), _SPLIT_EVERY)]
    return parts[0]


def _values(block, d):
    """The category values of every column of a block (a RowStatistics that only
    encodes), and its number of rows."""
    stats = RowStatistics(d, sample_rows=0)
    stats.encode(block)
    return stats.values, [len(block)]


def _union(parts):
    out = RowStatistics(len(parts[0][0]), sample_rows=0)
    lengths = [n for _, ns in parts for n in ns]
    for values, _ in parts:
        for j, vals in enumerate(values):
            for v in vals:
                k = _key(v, j)
                if k not in out.lookup[j]:
                    out.lookup[j][k] = len(out.values[j])
                    out.values[j].append(v)
    return out.values, lengths


def _block_statistics(block, values, sample_rows, seed, offset, key_limit):
    """Statistics of one block, encoded with the final category lists ``values``; only
    rows whose sampling key is below ``key_limit`` are candidates for the sample. With
    them the hashes of the block's distinct rows (``None`` if more than ``sample_rows``):
    the rows themselves travel only once their union is known to be small (pass 2b)."""
    stats = _seeded(values, sample_rows, seed)
    stats.distinct = None  # counted by hashes here, gathered in pass 2b
    stats._threshold = key_limit
    codes = stats.encode(block)
    stats.n_rows = offset  # row numbers of the sample continue the global order
    n = codes.shape[1]
    stats.add_codes(codes, np.ones(n), None, np.random.default_rng(seed).random(n))
    stats.n_rows -= offset
    hashes = np.unique(row_hash(codes, seed=0))
    return stats, (hashes if hashes.size <= sample_rows else None)


def _block_distinct(block, encoder):
    """The distinct rows of a block in the final codes, with their counts."""
    return unique_rows(_block_codes(block, encoder), np.ones(len(block)))


def _seeded(values, sample_rows, seed):
    stats = RowStatistics(len(values), sample_rows=sample_rows, random_state=seed)
    stats.values = [list(v) for v in values]
    stats.lookup = [{_key(v, j): i for i, v in enumerate(vals)} for j, vals in enumerate(values)]
    return stats


def _merge(parts):
    """Merge ``(statistics, hashes of the distinct rows)`` of blocks; the hashes are
    dropped (``None``) once there are more than the sample's rows."""
    first, hashes = parts[0]
    for other, more in parts[1:]:
        first.merge(other)
        if hashes is not None and more is not None:
            hashes = np.union1d(hashes, more)
            hashes = hashes if hashes.size <= first.sample_rows else None
        else:
            hashes = None
    return first, hashes


def _block_codes(block, encoder):
    return encoder.transform(block)


def _apply(block, encoder, func, args):
    codes = _block_codes(block, encoder)
    return func(codes, np.ones(codes.shape[1]), *args)


def _expected_totals(block, encoder, tree, root, tables, softening):
    codes, w = unique_rows(_block_codes(block, encoder), np.ones(len(block)))
    evidence = CodeEvidence(codes, encoder.n_states_, softening=softening)
    ll, rc, ec = expected_counts(tree, root, tables, evidence, w)
    return float(w @ ll), rc, ec


def _request_key(request):
    variables, projections = request
    return (tuple(int(v) for v in variables),) + tuple(
        (B.shape, hashlib.sha1(np.ascontiguousarray(B).tobytes()).hexdigest()) for B in projections
    )


def _sum_totals(parts):
    value = sum(p[0] for p in parts)
    rc = sum(p[1] for p in parts)
    ec = {u: sum(p[2][u] for p in parts) for u in parts[0][2]}
    return value, rc, ec


class DaskMoments(StatisticsMoments):
    """Moments of a Dask collection: pair and singleton tables from the merged statistics,
    every other moment by a pass over the partitions (``_map_chunks``), ``codes`` the
    uniform sample.

    An estimator's explicit recovery asks for projected moments node by node, each
    request a pass over the data. :meth:`prefetch` runs the recovery once on the sample
    to learn the requests (their projections come from the exact pair tables, so they are
    the ones the real run makes), computes them all in one pass, and serves the real run
    from that cache (a request it did not foresee costs one more pass).
    """

    _recording = None

    def for_parameters(self):
        return self  # every moment is exact (projected ones by a pass over the data)

    def projected(self, requests):
        keys = [_request_key(r) for r in requests]
        if self._recording is not None:
            self._recording.update(zip(keys, requests))
            sample = MomentEstimator(self.codes, self.n_states, self.sample_weight)
            return sample.projected(requests)
        cache = self.__dict__.setdefault("_cache", {})
        todo = {k: r for k, r in zip(keys, requests) if k not in cache}
        if todo:
            cache.update(zip(todo, super().projected(list(todo.values()))))
        return [cache[k] for k in keys]

    def sample_moments(self):
        """Moments of the uniform sample alone (for moments asked one after another, like
        the quartet tests of structure learning)."""
        moments = MomentEstimator(self.codes, self.n_states, self.sample_weight)
        moments._pairs, moments._singletons = self._pairs, self._singletons
        return moments

    def prefetch(self, run, rng):
        """Call ``run(copy of rng)`` recording its projected-moment requests, then compute
        them in one pass over the data."""
        self._recording = {}
        try:
            run(copy.deepcopy(rng))
            requests = self._recording
        finally:
            self._recording = None
        todo = {k: r for k, r in requests.items() if k not in self.__dict__.get("_cache", {})}
        if todo:
            self.__dict__.setdefault("_cache", {}).update(
                zip(todo, super().projected(list(todo.values())))
            )

    def _map_chunks(self, func, *args):
        dask = _dask()
        task = dask.delayed(_apply, pure=True)
        parts = [task(b, self.encoder, func, args) for b in self.blocks]
        (total,) = dask.compute(_tree_reduce(parts, _add))
        return total

    def evidence(self, softening=0.0):
        """The E-step over every partition (for :func:`~ltm_sklearn._algorithms.em.fit_em`),
        of the data softened by ``softening`` (:class:`~ltm_sklearn._engine.inference.
        CodeEvidence`)."""
        return DaskEStep(self.blocks, self.encoder, self.total_weight, softening)


class DaskEStep:
    """Expected counts of all rows, summed over the partitions on the cluster."""

    def __init__(self, blocks, encoder, total_weight, softening=0.0):
        self.blocks = blocks
        self.encoder = encoder
        self.total_weight = total_weight
        self.softening = softening

    def expected_totals(self, tree, root, tables):
        dask = _dask()
        task = dask.delayed(_expected_totals, pure=True)
        parts = [task(b, self.encoder, tree, root, tables, self.softening) for b in self.blocks]
        (total,) = dask.compute(_tree_reduce(parts, _sum_totals))
        return total


def _declared(X):
    """The declared categories of a Dask DataFrame's categorical columns whose categories
    are known (``None`` for the other columns; ``None`` when there are none): kept,
    observed or not, as ``fit`` keeps pandas' declared categories."""
    dtypes = getattr(X, "dtypes", None)
    if dtypes is None or not hasattr(X, "columns"):
        return None
    declared = [
        list(dtype.categories)
        if isinstance(dtype, pd.CategoricalDtype) and X[c].cat.known
        else None
        for c, dtype in dtypes.items()
    ]
    return declared if any(c is not None for c in declared) else None


def dask_moments(X, categories="auto", random_state=None, n_jobs=None):
    """Statistics of a Dask collection, computed on the active scheduler.

    Parameters
    ----------
    X : dask.array.Array or dask.dataframe.DataFrame
    categories : "auto" or list
        Categories of every column (as the estimators' ``categories``).
    random_state : int, RandomState instance or None
        Seeds the uniform row sample.
    n_jobs : int or None
        Threads of the client-side moment computations.

    Returns
    -------
    moments : DaskMoments
    encoder : CategoricalEncoder
        The final encoding of the columns.
    names : list of str or None
        Column names of a DataFrame.
    """
    dask = _dask()
    blocks, names, d = _partitions(X)
    # pass 1: the categories
    task = dask.delayed(_values, pure=True)
    ((values, lengths),) = dask.compute(_tree_reduce([task(b, d) for b in blocks], _union))
    stats = _seeded(values, 0, 0)
    given = (_declared(X) or "auto") if isinstance(categories, str) else categories
    encoder, perms = stats.final_encoder(given, names)
    final = [list(c) for c in encoder.categories_]
    # pass 2: pair statistics and the sample, in the final codes
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    rng = check_random_state(random_state)
    seeds = rng.randint(2**31 - 1, size=len(blocks))
    # keys are uniform: about 1.5 x the sample's rows have a key below this limit (the
    # sample, the bottom-k of them, is all but surely among them), so the partitions ship
    # only those
    sample_rows = streaming.SAMPLE_ROWS
    key_limit = min(1.0, 1.5 * sample_rows / max(int(offsets[-1]), 1))
    task = dask.delayed(_block_statistics, pure=True)
    parts = [
        task(b, final, sample_rows, int(s), int(o), key_limit)
        for b, s, o in zip(blocks, seeds, offsets)
    ]
    ((merged, hashes),) = dask.compute(_tree_reduce(parts, _merge))
    if merged.n_rows == 0:
        raise ValueError("The Dask collection has no rows: there is nothing to fit.")
    if hashes is not None and merged.compact().sample_codes.shape[1] < merged.n_rows:
        # pass 2b: few distinct rows - every one of them, with its count
        task = dask.delayed(_block_distinct, pure=True)
        parts = [task(b, encoder) for b in blocks]
        (merged.distinct,) = dask.compute(_tree_reduce(parts, merge_distinct))
    identity = [np.arange(len(c)) for c in final]
    base = merged.moments(encoder, identity, n_jobs)
    moments = DaskMoments(base.codes, base.n_states, base.sample_weight, base.n_jobs)
    moments._pairs, moments._singletons = base._pairs, base._singletons
    moments.total_weight = merged.weight
    moments.blocks, moments.encoder = blocks, encoder
    # every row in memory (identical ones merged): EM needs no pass over the partitions
    moments.n_rows_total = merged.n_rows if base.sampled else None
    return moments, encoder, names
