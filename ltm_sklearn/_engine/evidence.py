"""Evidence of the observed nodes of a tree, what the message passes of
:mod:`~ltm_sklearn._engine.inference` read from the data.

An evidence object (:class:`CodeEvidence` for category codes, :class:`DenseEvidence` for
arbitrary non-negative likelihood vectors) serves:

* ``message(u, cpt)`` - ``cpt @ e_u`` for every row, the message of an observed leaf;
* ``evidence(u)`` - ``e_u``, the evidence vectors ``(n_u, n_rows)`` of an observed node;
* ``leaf_counts(u, q, cpt, msg)`` - the expected counts of a leaf from its parent's posterior;
* ``leaf_messages(leaves, cpts)`` and ``leaf_counts_of(items, cpts, msg)`` - the same for
  several leaves at once (:class:`CodeEvidence` batches them by the shape of their tables);
* ``block(rows)`` - the same evidence restricted to a slice of rows.

A missing entry (code ``-1``) sends an all-ones evidence vector (it is marginalised); a
category never seen in training (code ``-2``) sends the constant ``unseen_proba``.
"""

from __future__ import annotations

import numpy as np

from .encoding import MISSING

__all__ = ["BLOCK_ROWS", "CodeEvidence", "DenseEvidence", "divide"]

#: rows per block of the message passes
BLOCK_ROWS = 16384
#: entries (rows x categories, summed over the columns) up to which an evidence keeps
#: its blocks, and their indicator matrices, from one pass to the next (EM passes over
#: the same rows hundreds of times; rebuilding the indicators took a third of an E-step
#: at k' = 4 on 8,258 rows x 69 binary columns); a column too wide for the indicators
#: keeps its flat positions instead, ``k'`` integers a row (fewer than its categories)
_KEEP_BLOCKS = 1 << 25
#: a leaf's table joins the batched product with the indicators up to this many columns
#: (or ``k'``, when larger)
_BATCH_COLUMNS = 8
#: the smallest normal number of each precision (a floor for divisors)
_TINY = {np.dtype(t): np.finfo(t).tiny for t in (np.float32, np.float64)}


def divide(q, m, out=None):
    """``q / m``, 0 where ``m`` is 0 (``q`` is 0 there: ``m`` is a factor of it)."""
    out = np.maximum(m, _TINY[m.dtype], out=out)
    return np.divide(q, out, out=out)


class CodeEvidence:
    """Evidence of observed nodes given by category codes.

    Parameters
    ----------
    codes : ndarray of shape (n_observed, n_rows)
        ``0..n_states[u]-1``, ``-1`` missing, ``-2`` unseen.
    n_states : array-like of int, shape (n_observed,)
    unseen_proba : array-like of shape (n_observed,), default=None
        Likelihood of an unseen category given any state of the parent (0 if ``None``).
    softening : float, default=0.0
        Data softening (Liu & Van den Broeck, "Tractable Regularization of Probabilistic
        Circuits", NeurIPS 2021, section 4): an observed category ``v`` of a column with
        ``n`` categories is the soft evidence ``1 - softening`` on ``v`` and
        ``softening / (n - 1)`` on each other category, so EM fits the expected
        likelihood of the data with each entry flipped at that rate. ``0`` is the data
        as observed.
    """

    def __init__(self, codes, n_states, unseen_proba=None, softening=0.0, _index=None):
        self.n_states = np.asarray(n_states, dtype=np.int64)
        d = len(self.n_states)
        self.unseen = np.zeros(d) if unseen_proba is None else np.asarray(unseen_proba, float)
        self.softening = float(softening)
        # the soft evidence of category v, slope * one-hot(v) + other * ones: 1 - softening
        # on v, other = softening / (n - 1) on each other category (a column of one
        # category keeps its hard evidence)
        others = np.maximum(self.n_states - 1, 1)
        self._other = np.where(self.n_states > 1, self.softening / others, 0.0)
        self._slope = 1.0 - self._other * self.n_states
        if _index is None:
            codes = np.asarray(codes)
            n = self.n_states[:, None]
            # column of the augmented table [states | missing | unseen] read by each entry
            _index = np.where(codes >= 0, codes, np.where(codes == MISSING, n, n + 1))
            _index = _index.astype(np.intp)
        self.index = _index
        self._onehots = {}  # (node, dtype) -> indicator, kept for the life of a block
        self._stacks = {}  # (nodes, dtype) -> stacked indicators, the same
        # blocks kept from pass to pass when their indicators are small enough
        keep = self.n_rows * int(np.sum(self.n_states + 2)) <= _KEEP_BLOCKS
        self._blocks = {} if keep else None

    @property
    def n_rows(self):
        return self.index.shape[1]

    def block(self, rows):
        key = (rows.start, rows.stop, rows.step) if isinstance(rows, slice) else None
        kept = {} if self._blocks is None or key is None else self._blocks
        if key not in kept:
            kept[key] = CodeEvidence(
                None, self.n_states, self.unseen, self.softening, _index=self.index[:, rows]
            )
        return kept[key]

    def _augment(self, u, table):
        """``[table | row sums | unseen_proba * row sums]`` along the last axis: ``u`` one
        node and its table, or a list of nodes and their tables stacked. With
        ``softening`` the columns of the categories are those of their soft evidence,
        ``slope * table + other * row sums``."""
        n = table.shape[-1]
        out = np.empty((*table.shape[:-1], n + 2), dtype=table.dtype)
        table.sum(axis=-1, out=out[..., n])
        if self.softening:
            slope, other = self._soft(u)
            np.multiply(table, slope, out=out[..., :n])
            out[..., :n] += out[..., n, None] * other
        else:
            out[..., :n] = table
        unseen = self.unseen[u]
        np.multiply(
            out[..., n], unseen[:, None] if np.ndim(unseen) else unseen, out=out[..., n + 1]
        )
        return out

    def _soft(self, u):
        """``(slope, other)`` of the soft evidence of ``u`` (one node, or a list of nodes:
        shaped to broadcast against their tables stacked)."""
        slope, other = self._slope[u], self._other[u]
        if np.ndim(slope):
            return slope[:, None, None], other[:, None, None]
        return slope, other

    def _counts(self, u, T, tables):
        """Expected counts of the leaf ``u`` (or leaves, stacked) from the sums ``T`` of
        the parents' posteriors over the rows of each code: a row of category ``v`` puts
        ``P(x_u | x_parent, e_v) = table[x_parent, x_u] e_v[x_u] / (table e_v)[x_parent]``
        on ``x_u`` (all of it on ``v`` without softening), a missing or unseen entry
        spreads it as the table."""
        n = tables.shape[-1]
        if self.softening:
            soft = self._augment(u, tables)[..., :n]
            ratio = T[..., :n] / np.where(soft > 0, soft, 1.0)
            slope, other = self._soft(u)
            observed = tables * (slope * ratio + other * ratio.sum(axis=-1, keepdims=True))
        else:
            observed = T[..., :n]
        return observed + tables * (T[..., n] + T[..., n + 1])[..., None]

    def _onehot(self, u, dtype):
        """``(n_u + 2, n_rows)`` indicator of the column each row reads (states, missing,
        unseen); kept when it is no larger than a message of ``k'`` states."""
        key = (u, np.dtype(dtype))
        onehot = self._onehots.get(key)
        if onehot is None:
            m, n = int(self.n_states[u]) + 2, self.n_rows
            onehot = np.zeros((m, n), dtype=dtype)
            onehot.ravel()[self.index[u] * n + np.arange(n)] = 1
        return onehot

    def message(self, u, cpt):
        """``cpt`` read at each row's code: a product with the indicator where that has
        no more rows than ``cpt`` (3x faster than gathering along the rows at 32-64
        states, and exact: every sum has one non-zero term); a gather otherwise."""
        table = self._augment(u, cpt)
        if table.shape[1] > table.shape[0]:
            return np.take(table, self.index[u], axis=1)
        onehot = self._onehot(u, cpt.dtype)
        if self.n_rows <= BLOCK_ROWS:  # a block of the passes: read again by leaf_counts
            self._onehots[(u, onehot.dtype)] = onehot
        return table @ onehot

    def _batched(self, shape):
        """Whether leaves with tables of ``shape`` join a batched product with the
        indicators: the augmented table is no wider than ``max(k', _BATCH_COLUMNS)``
        (wider, a gather reads fewer entries than the product multiplies)."""
        k, c = shape
        return c + 2 <= max(k, _BATCH_COLUMNS)

    def _stacked_onehot(self, nodes, dtype):
        """``(len(nodes), n_u + 2, n_rows)`` indicators of leaves with ``n_u`` states;
        in a block of the passes kept, and each leaf's slice kept for :meth:`leaf_counts`."""
        key = (tuple(nodes), np.dtype(dtype))
        stack = self._stacks.get(key)
        if stack is None:
            m, n = int(self.n_states[nodes[0]]) + 2, self.n_rows
            stack = np.zeros((len(nodes), m, n), dtype=dtype)
            flat = (np.arange(len(nodes))[:, None] * m + self.index[nodes]) * n + np.arange(n)
            stack.ravel()[flat.ravel()] = 1
            if self.n_rows <= BLOCK_ROWS:
                self._stacks[key] = stack
                self._onehots.update(((u, np.dtype(dtype)), o) for u, o in zip(nodes, stack))
        return stack

    def leaf_messages(self, leaves, tables, out=None):
        """:meth:`message` of every leaf in ``leaves`` (tables stacked, all of one shape):
        one batched product with the indicators, so that a pass costs one call per shape
        of table rather than several per leaf (on 64 columns at ``k' = 2`` the calls per
        leaf took more time than their arithmetic); a gather where the tables are wider
        than :meth:`_batched` allows. Exact, as :meth:`message`. Returns the messages
        stacked, ``(len(leaves), k, n_rows)`` (in ``out`` when given)."""
        augmented = self._augment(leaves, tables)
        if self._batched(tables.shape[1:]):
            onehot = self._stacked_onehot(leaves, augmented.dtype)
            return np.matmul(augmented, onehot, out=out)
        # a gather of the augmented tables at the entries of every (leaf, state, row)
        flat = self._flat_codes(leaves, tables.shape[1])
        if out is None:
            return np.take(augmented.reshape(-1), flat)
        if out.flags.c_contiguous and out.dtype == augmented.dtype:
            return np.take(augmented.reshape(-1), flat, out=out)
        out[...] = np.take(augmented.reshape(-1), flat)
        return out

    def leaf_counts_of(self, leaves, tables, q, msg):
        """:meth:`leaf_counts` of every leaf in ``leaves`` (tables stacked as in
        :meth:`leaf_messages`, ``q`` the parents' posteriors stacked likewise): the sums
        per category in one batched product with the indicators, or leaf by leaf where
        the tables are too wide for them. Returns ``(len(leaves), k, n_u)`` float64."""
        if self._batched(tables.shape[1:]):
            onehot = self._stacked_onehot(leaves, q.dtype)
            T = np.matmul(q, onehot.transpose(0, 2, 1))
        else:
            T = self._scattered_sums(leaves, q)
        return self._counts(leaves, T, tables).astype(np.float64)

    def _flat_codes(self, leaves, k):
        """``(len(leaves), k, n_rows)`` positions, in the flat stack of the leaves'
        augmented tables ``(len(leaves), k, n_u + 2)``, of the entry each row reads for
        every parent state: the gather of :meth:`leaf_messages` and the bins of
        :meth:`_scattered_sums` for leaves too wide for the products with indicators.
        In a block of the passes kept from pass to pass, as the indicators."""
        key = ("flat", tuple(leaves), k)
        flat = self._stacks.get(key)
        if flat is None:
            m = int(self.n_states[leaves[0]]) + 2
            rows = np.arange(len(leaves) * k, dtype=np.intp).reshape(len(leaves), k, 1) * m
            flat = rows + self.index[leaves][:, None, :]
            if self.n_rows <= BLOCK_ROWS:
                self._stacks[key] = flat
        return flat

    def _scattered_sums(self, leaves, q):
        """``(len(leaves), k, n_u + 2)`` sums of the columns of the stacked ``q`` by the
        code each row reads, for leaves of ``n_u`` states: one ``bincount`` over every
        leaf and state (one per leaf and state cost as much as the rest of an E-step on
        a 13-column table of 7-9 categories a column at ``k' = 8``). Each sum adds its
        rows in their order, in float64."""
        n_leaves, k, _ = q.shape
        size = n_leaves * k * (int(self.n_states[leaves[0]]) + 2)
        flat = self._flat_codes(leaves, k)
        sums = np.bincount(flat.reshape(-1), weights=q.reshape(-1), minlength=size)
        return sums.reshape(n_leaves, k, -1)

    def _category_sums(self, u, q):
        """``(k, n_u + 2)`` sums of the columns of ``q`` by the code each row reads."""
        onehot = self._onehots.get((u, np.dtype(q.dtype)))
        if onehot is not None:  # built by the upward pass: a product with it
            return q @ onehot.T
        # more categories than states: sums per category, as for stacked leaves
        return self._scattered_sums([u], np.asarray(q)[None])[0]

    def evidence(self, u, dtype=np.float64):
        table = np.eye(int(self.n_states[u]), dtype=dtype)
        return np.take(self._augment(u, table), self.index[u], axis=1)

    def leaf_counts(self, u, q, cpt, msg):
        """Expected counts ``sum_r P(x_parent, x_u | row r) w_r`` of the leaf ``u`` from
        ``q = w P(x_parent | row)``: a row with code ``v`` puts its posterior on column
        ``v``, a missing or unseen entry spreads it as ``cpt`` (``msg`` is not needed).
        The rows of ``cpt`` must sum to 1, as the tables of EM do (a missing entry's
        evidence is then 1 for every parent state)."""
        return self._counts(u, self._category_sums(u, q), cpt)


class DenseEvidence:
    """Evidence given as non-negative likelihood vectors per observed node.

    Parameters
    ----------
    vectors : dict node -> ndarray of shape (n_rows, n_u)
        ``e_u[r, x] = p(observation of row r | X_u = x)`` (any common scale per row).
    """

    def __init__(self, vectors):
        self.vectors = vectors

    @property
    def n_rows(self):
        return next(iter(self.vectors.values())).shape[0]

    def block(self, rows):
        return DenseEvidence({u: v[rows] for u, v in self.vectors.items()})

    def message(self, u, cpt):
        return cpt @ self.vectors[u].T.astype(cpt.dtype, copy=False)

    def evidence(self, u, dtype=np.float64):
        return np.ascontiguousarray(self.vectors[u].T, dtype=dtype)

    def leaf_counts(self, u, q, cpt, msg):
        """Expected counts of the leaf ``u`` from ``q = w P(x_parent | row)`` and its
        message ``msg = cpt @ e_u``: ``cpt * ((q / msg) @ e_u^T)``."""
        return cpt * (divide(q, msg) @ self.vectors[u].astype(q.dtype, copy=False))

    def leaf_messages(self, leaves, tables, out=None):
        if out is None:
            out = np.empty((len(leaves), tables.shape[1], self.n_rows), dtype=tables.dtype)
        for i, (u, t) in enumerate(zip(leaves, tables)):
            out[i] = self.message(u, t)
        return out

    def leaf_counts_of(self, leaves, tables, q, msg):
        return np.stack(
            [self.leaf_counts(u, *args) for u, *args in zip(leaves, q, tables, msg)]
        ).astype(np.float64)
