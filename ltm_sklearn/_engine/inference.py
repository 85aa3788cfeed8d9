"""Message passing with explicit conditional probability tables (CPTs).

One upward pass (Parikh, Song & Xing (ICML 2011) eq. (9): ``m_u(x_parent) = sum_x P(x | x_parent)
beta_u(x)``)
and one downward pass serve exact scoring, EM's expected counts and hidden posteriors for
every estimator. Messages are held feature-major, ``(n_states, n_rows)``, and the rows are
processed in blocks sized to the cache, in parallel threads (:func:`~.threads.block_threads`).
Every internal node's product of messages is rescaled to unit column sums and the log of
the factor accumulated, so trees with hundreds of leaves do not underflow.

The downward pass carries ``q_p = w P(x_p | row)`` from node to node: a child's outside
message is ``cpt_c^T (q_p / m_c)`` (the parent's posterior with the child's own message
divided out - one division instead of products over the siblings), its pairwise
statistics ``(q_p / m_c) @ beta_c^T`` times the table, and a leaf's counts the sums of
``q_p`` over the rows of each category (a product with the one-hot matrix of its codes,
built per block). Per edge that is three ``k' x k'`` by
``k' x rows`` products and a few elementwise passes.

Evidence of the observed nodes comes from an *evidence object* (:class:`CodeEvidence`
for category codes, :class:`DenseEvidence` for arbitrary non-negative likelihood vectors):

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
from joblib import Parallel, delayed

from .threads import block_threads, single_threaded_blas

MISSING = -1
UNSEEN = -2

#: rows per block of the message passes
BLOCK_ROWS = 16384
#: entries (rows x categories, summed over the columns) up to which an evidence keeps
#: its blocks, and their indicator matrices, from one pass to the next (EM passes over
#: the same rows hundreds of times; rebuilding the indicators took a third of an E-step
#: at k' = 4 on 8,258 rows x 69 binary columns)
_KEEP_BLOCKS = 1 << 25
#: rescale running products of sibling messages after this many factors
_RESCALE_EVERY = 8
#: the smallest normal number of each precision (a floor for divisors)
_TINY = {np.dtype(t): np.finfo(t).tiny for t in (np.float32, np.float64)}

__all__ = [
    "MISSING",
    "UNSEEN",
    "CodeEvidence",
    "DenseEvidence",
    "log_likelihood",
    "expected_counts",
    "hidden_posteriors",
    "sample_states",
]


# ---------------------------------------------------------------------- evidence
class CodeEvidence:
    """Evidence of observed nodes given by category codes.

    Parameters
    ----------
    codes : ndarray of shape (n_observed, n_rows)
        ``0..n_states[u]-1``, ``-1`` missing, ``-2`` unseen.
    n_states : array-like of int, shape (n_observed,)
    unseen_proba : array-like of shape (n_observed,), default=None
        Likelihood of an unseen category given any state of the parent (0 if ``None``).
    """

    def __init__(self, codes, n_states, unseen_proba=None, _index=None):
        self.n_states = np.asarray(n_states, dtype=np.int64)
        d = len(self.n_states)
        self.unseen = np.zeros(d) if unseen_proba is None else np.asarray(unseen_proba, float)
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
            kept[key] = CodeEvidence(None, self.n_states, self.unseen, _index=self.index[:, rows])
        return kept[key]

    def _augment(self, u, table):
        """``[table | row sums | unseen_proba * row sums]`` along the last axis: ``u`` one
        node and its table, or a list of nodes and their tables stacked."""
        n = table.shape[-1]
        out = np.empty((*table.shape[:-1], n + 2), dtype=table.dtype)
        out[..., :n] = table
        table.sum(axis=-1, out=out[..., n])
        unseen = self.unseen[u]
        np.multiply(
            out[..., n], unseen[:, None] if np.ndim(unseen) else unseen, out=out[..., n + 1]
        )
        return out

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

    def _batched(self, u, cpt):
        """Whether the leaf ``u`` joins a batched product with the indicators: its
        augmented table is no wider than ``max(k', _BATCH_COLUMNS)`` (wider, a gather
        reads fewer entries than the product multiplies)."""
        k, c = cpt.shape
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

    def leaf_messages(self, leaves, cpts):
        """:meth:`message` of every leaf in ``leaves``: one batched product with the
        indicators per shape of table, so that a pass costs one call per shape rather
        than several per leaf (on 64 columns at ``k' = 2`` the calls per leaf took more
        time than their arithmetic). Exact, as :meth:`message`."""
        out, groups = {}, {}
        for u in leaves:
            if self._batched(u, cpts[u]):
                groups.setdefault(cpts[u].shape, []).append(u)
            else:
                out[u] = self.message(u, cpts[u])
        for nodes in groups.values():
            augmented = self._augment(nodes, np.stack([cpts[u] for u in nodes]))
            messages = np.matmul(augmented, self._stacked_onehot(nodes, augmented.dtype))
            out.update(zip(nodes, messages))
        return out

    def leaf_counts_of(self, items, cpts, msg):
        """:meth:`leaf_counts` of every ``(leaf, q)`` in ``items``: the sums per category
        leaf by leaf, the rest in one call per shape of table."""
        groups = {}
        for u, q in items:
            groups.setdefault(cpts[u].shape, []).append((u, q))
        out = {}
        for (_, c), pairs in groups.items():
            T = np.stack([self._category_sums(u, q) for u, q in pairs])
            tables = np.stack([cpts[u] for u, _ in pairs])
            counts = T[:, :, :c] + tables * (T[:, :, c] + T[:, :, c + 1])[:, :, None]
            out.update(zip([u for u, _ in pairs], counts.astype(np.float64)))
        return out

    def _category_sums(self, u, q):
        """``(k, n_u + 2)`` sums of the columns of ``q`` by the code each row reads."""
        onehot = self._onehots.get((u, np.dtype(q.dtype)))
        if onehot is not None:  # built by the upward pass: a product with it
            return q @ onehot.T
        # more categories than states: sums per category, one pass per state
        n, index = int(self.n_states[u]), self.index[u]
        return np.stack([np.bincount(index, weights=row, minlength=n + 2) for row in q])

    def evidence(self, u, dtype=np.float64):
        table = np.eye(int(self.n_states[u]), dtype=dtype)
        return np.take(self._augment(u, table), self.index[u], axis=1)

    def leaf_counts(self, u, q, cpt, msg):
        """Expected counts ``sum_r P(x_parent, x_u | row r) w_r`` of the leaf ``u`` from
        ``q = w P(x_parent | row)``: a row with code ``v`` puts its posterior on column
        ``v``, a missing or unseen entry spreads it as ``cpt`` (``msg`` is not needed).
        The rows of ``cpt`` must sum to 1, as the tables of EM do (a missing entry's
        evidence is then 1 for every parent state)."""
        n = int(self.n_states[u])
        T = self._category_sums(u, q)
        return T[:, :n] + cpt * (T[:, n] + T[:, n + 1])[:, None]


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
        return cpt * (_divide(q, msg) @ self.vectors[u].astype(q.dtype, copy=False))

    def leaf_messages(self, leaves, cpts):
        return {u: self.message(u, cpts[u]) for u in leaves}

    def leaf_counts_of(self, items, cpts, msg):
        return {u: self.leaf_counts(u, q, cpts[u], msg[u]) for u, q in items}


# ---------------------------------------------------------------------- passes
#: elements (states x rows) of one message in a block: blocks of about this size keep the
#: working set of a pass in cache (rows per block between MIN and BLOCK_ROWS)
_BLOCK_ELEMENTS = 1 << 16
_MIN_BLOCK_ROWS = 512
#: entries (states x rows) of the leaves' messages computed in one batch: more leaves
#: at once saves calls, fewer keep them in cache until their parents read them (all
#: leaves of a 64-column, 1,257-row table at k' = 2; a few at a time at 15,000 rows)
_BATCH_ELEMENTS = 1 << 18
#: a leaf's table joins the batched product with the indicators up to this many columns
#: (or ``k'``, when larger)
_BATCH_COLUMNS = 8


def _block_rows(tree_states):
    """Rows per block for messages of at most ``tree_states`` states."""
    rows = _BLOCK_ELEMENTS // max(int(tree_states), 1)
    return int(min(BLOCK_ROWS, max(_MIN_BLOCK_ROWS, rows)))


def _leaf_batch(k, n_rows):
    """Leaves per batch of the passes for messages of ``k`` states over ``n_rows``."""
    return max(1, _BATCH_ELEMENTS // max(int(k) * int(n_rows), 1))


def _rows(n, n_jobs, block_rows=BLOCK_ROWS):
    n_blocks = max(1, -(-n // block_rows))
    bounds = np.linspace(0, n, n_blocks + 1).astype(int)
    return [slice(bounds[i], bounds[i + 1]) for i in range(n_blocks)], block_threads(n_jobs)


def _max_states(cpts, root_marginal):
    return max([len(root_marginal)] + [max(c.shape) for c in cpts.values()])


def _map_blocks(func, evidence, weights, n_jobs, tree, root_marginal, cpts, *args):
    """``func(block evidence, block weights, tree, root, cpts, *args)`` over row blocks,
    in threads with ``n_jobs``; BLAS single-threaded, so the blocks share the cores
    instead of oversubscribing them."""
    rows = _block_rows(_max_states(cpts, root_marginal))
    blocks, jobs = _rows(evidence.n_rows, n_jobs, rows)

    def call(s):
        w = None if weights is None else weights[s]
        return func(evidence.block(s), w, tree, root_marginal, cpts, *args)

    with single_threaded_blas():
        if jobs == 1 or len(blocks) == 1:
            return [call(s) for s in blocks]
        return Parallel(n_jobs=jobs, prefer="threads")(delayed(call)(s) for s in blocks)


def _as_dtype(root_marginal, cpts, dtype):
    """The tables in the working precision of the passes."""
    return (
        np.asarray(root_marginal, dtype=dtype),
        {u: np.asarray(c, dtype=dtype) for u, c in cpts.items()},
    )


def _normalise_columns(m, log_scale=None):
    """Divide every column of ``m`` by its sum (in place); add the logs to ``log_scale``
    (when given); return the sums (1 where a column sums to 0)."""
    s = m.sum(axis=0)
    s[s <= 0] = 1
    m /= s
    if log_scale is not None:
        log_scale += np.log(s, dtype=np.float64)
    return s


def _upward(tree, root_marginal, cpts, ev, keep):
    """Upward pass on one block: ``(lik, log_scale, beta, msg)``.

    ``beta[u]`` (internal nodes, ``keep=True``) is the evidence of ``u`` times its
    children's messages, divided column-wise by its sum (the log of the factor added to
    ``log_scale``; the root's is not divided); ``msg[u] = cpt_u @ beta_u`` the message to
    the parent (a leaf's: ``cpt_u @ e_u``), kept with ``keep=True``.
    ``P(x) = lik * exp(log_scale)``.
    """
    n = ev.n_rows
    dtype = root_marginal.dtype
    log_scale = np.zeros(n)
    beta, msg = {}, {}
    lik = None
    # the leaves' messages come in batches, in the order the pass reads them
    leaves = [
        u for u in tree.postorder if u < tree.n_observed and not tree.children[u] and u != tree.root
    ]
    batch = _leaf_batch(root_marginal.size, n)
    batches = iter(range(0, len(leaves), batch))
    ready = {}
    for u in tree.postorder:
        kids = tree.children[u]
        observed = u < tree.n_observed
        if not kids:
            if u != tree.root:
                if not observed:
                    raise ValueError(f"Hidden node {u} is a leaf: it carries no information.")
                if u not in ready:
                    i = next(batches)
                    ready = ev.leaf_messages(leaves[i : i + batch], cpts)
                msg[u] = ready.pop(u)
                continue
            b = ev.evidence(u, dtype)
        else:
            first = msg[kids[0]] if keep else msg.pop(kids[0])
            b = first * (msg[kids[1]] if keep else msg.pop(kids[1])) if len(kids) > 1 else first
            if len(kids) == 1:
                b = b.copy()
            for t, c in enumerate(kids[2:], start=2):
                b *= msg[c] if keep else msg.pop(c)
                if t % _RESCALE_EVERY == 0:
                    _rescale(b, log_scale)
            if observed:
                b *= ev.evidence(u, dtype)
        if u == tree.root:
            if keep:
                beta[u] = b
            lik = (root_marginal @ b).astype(np.float64)
            break
        _normalise_columns(b, log_scale)
        if keep:
            beta[u] = b
        msg[u] = cpts[u] @ b
    return lik, log_scale, beta, msg


def _rescale(b, log_scale):
    s = b.max(axis=0)
    s[s <= 0] = 1
    b /= s
    log_scale += np.log(s, dtype=np.float64)


def _divide(q, m):
    """``q / m``, 0 where ``m`` is 0 (``q`` is 0 there: ``m`` is a factor of it)."""
    out = np.maximum(m, _TINY[m.dtype])
    return np.divide(q, out, out=out)


def _downward(tree, root_marginal, cpts, beta, msg, weights):
    """Yield ``(p, q_p, W_p)`` for every internal node ``p`` (and the root) in preorder.

    ``q_p = w P(x_p | row)`` (column sums ``w``; 0 for a row of probability 0) and, for
    each internal child ``c``, ``W_p[c] = q_p / msg_c`` - the outside evidence of ``c``'s
    parent times ``w / P(row)``, so that ``P(x_p, x_c | row) w = W_p[c][x_p] cpt_c[x_p,
    x_c] beta_c[x_c]`` and the outside message of ``c`` is ``cpt_c^T W_p[c]``.

    Only the root's ``q`` is normalised: below it ``q_c = (cpt_c^T W_p[c]) * beta_c``
    sums to ``sum_y W_p[c][y] msg_c[y] = sum_y q_p[y] = w`` whatever the scale of
    ``beta_c`` (``msg_c = cpt_c @ beta_c``; where ``msg_c`` is 0 so is ``q_p``), so the
    posteriors keep their column sums without a pass over them at every node.
    """
    outside = {tree.root: root_marginal[:, None]}
    for p in tree.preorder:
        kids = tree.children[p]
        if not kids and p != tree.root:
            continue
        q = outside.pop(p) * beta[p]
        if p == tree.root:
            q *= _safe_ratio(weights, q.sum(axis=0).astype(np.float64)).astype(q.dtype)
        W = {}
        for c in kids:
            if tree.children[c]:
                W[c] = _divide(q, msg[c])
                outside[c] = cpts[c].T @ W[c]
        yield p, q, W


def _log_likelihood_block(ev, _, tree, root_marginal, cpts):
    lik, log_scale, _, _ = _upward(tree, root_marginal, cpts, ev, keep=False)
    with np.errstate(divide="ignore"):
        return np.log(lik) + log_scale


def log_likelihood(tree, root_marginal, cpts, evidence, n_jobs=None, dtype=np.float64):
    """Exact ``log P(x_observed)`` of each row under a latent tree with explicit CPTs.

    Parameters
    ----------
    tree : LatentTree
        Rooted tree; observed nodes may be internal.
    root_marginal : ndarray of shape (k_root,)
    cpts : dict node -> ndarray of shape (n_states[parent], n_states[node])
        Row-stochastic ``P(X_node | X_parent)`` for every non-root node.
    evidence : CodeEvidence or DenseEvidence
    n_jobs : int, default=None
        Blocks of rows processed in parallel threads.
    dtype : {np.float64, np.float32}, default=np.float64
        Precision of the messages (the log-likelihood is accumulated in float64).

    Returns
    -------
    ndarray of shape (n_rows,)
    """
    root_marginal, cpts = _as_dtype(root_marginal, cpts, dtype)
    parts = _map_blocks(_log_likelihood_block, evidence, None, n_jobs, tree, root_marginal, cpts)
    return np.concatenate(parts) if parts else np.zeros(0)


def _safe_ratio(w, lik):
    """``w / lik`` per row, 0 where ``lik`` is 0 or so small (a table entry driven to
    ~1e-300, e.g. by an over-relaxed EM candidate) that the ratio overflows: such a row
    adds nothing to the expected counts (its log-likelihood stays exact)."""
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        r = w / lik
    return np.where(np.isfinite(r) & (lik > 0), r, 0.0)


def _counts_block(ev, w, tree, root_marginal, cpts):
    lik, log_scale, beta, msg = _upward(tree, root_marginal, cpts, ev, keep=True)
    with np.errstate(divide="ignore"):
        loglik = np.log(lik) + log_scale
    edge_counts, leaves = {}, []
    batch = _leaf_batch(root_marginal.size, ev.n_rows)
    for p, q, W in _downward(tree, root_marginal, cpts, beta, msg, w):
        if p == tree.root:
            root_counts = q.sum(axis=1).astype(np.float64)
        for c in tree.children[p]:
            if c in W:  # W[c] @ beta_c^T: sum_r P(x_p, x_c | row r) w_r / cpt_c[x_p, x_c]
                edge_counts[c] = (cpts[c] * (W[c] @ beta[c].T)).astype(np.float64)
            else:
                leaves.append((c, q))
        if len(leaves) >= batch:
            edge_counts.update(ev.leaf_counts_of(leaves, cpts, msg))
            leaves = []
    edge_counts.update(ev.leaf_counts_of(leaves, cpts, msg))
    return loglik, root_counts, edge_counts


def expected_counts(tree, root_marginal, cpts, evidence, weights, n_jobs=None, dtype=np.float64):
    """E-step: per-row log-likelihood and expected sufficient statistics.

    Parameters
    ----------
    tree, root_marginal, cpts, evidence : as in :func:`log_likelihood`.
    weights : ndarray of shape (n_rows,)
    n_jobs : int, default=None
        Blocks of rows processed in parallel threads.
    dtype : {np.float64, np.float32}, default=np.float64
        Precision of the messages and matrix products; counts are summed over blocks
        in float64.

    Returns
    -------
    loglik : ndarray of shape (n_rows,)
    root_counts : ndarray of shape (k_root,)
        ``sum_r w_r P(x_root | row r)``.
    edge_counts : dict node -> ndarray of shape (k_parent, k_node)
        ``sum_r w_r P(x_parent, x_node | row r)`` for every non-root node.
    """
    weights = np.asarray(weights, dtype=float)
    root_marginal, cpts = _as_dtype(root_marginal, cpts, dtype)
    parts = _map_blocks(_counts_block, evidence, weights, n_jobs, tree, root_marginal, cpts)
    loglik = np.concatenate([p[0] for p in parts])
    root_counts = sum(p[1] for p in parts)
    edge_counts = {u: sum(p[2][u] for p in parts) for u in parts[0][2]}
    return loglik, root_counts, edge_counts


def _posterior_block(ev, _, tree, root_marginal, cpts, nodes):
    _, _, beta, msg = _upward(tree, root_marginal, cpts, ev, keep=True)
    wanted, out = set(nodes), {}
    for p, q, _ in _downward(tree, root_marginal, cpts, beta, msg, np.ones(ev.n_rows)):
        if p in wanted:  # columns sum to 1, or to 0 for a row of probability 0
            out[p] = np.where(q.sum(axis=0) > 0, q, 1.0 / q.shape[0]).T
    return out


def hidden_posteriors(tree, root_marginal, cpts, evidence, nodes=None, n_jobs=None):
    """Posterior ``P(x_u | row)`` of internal nodes (default: the hidden ones).

    Returns a dict node -> ndarray of shape ``(n_rows, k_u)``; rows of probability zero
    get a uniform posterior.
    """
    nodes = tree.hidden_nodes if nodes is None else list(nodes)
    leaves = [u for u in nodes if not tree.children[u] and u != tree.root]
    if leaves:
        raise ValueError(f"Posteriors are computed for internal nodes; {leaves[:5]} are leaves.")
    root_marginal, cpts = _as_dtype(root_marginal, cpts, np.float64)
    parts = _map_blocks(_posterior_block, evidence, None, n_jobs, tree, root_marginal, cpts, nodes)
    return {u: np.vstack([p[u] for p in parts]) for u in nodes}


# ---------------------------------------------------------------------- sampling
def sample_states(tree, root_marginal, cpts, n_samples, rng):
    """States of every node for ``n_samples`` rows drawn by ancestral sampling.

    Returns an integer array of shape ``(n_nodes, n_samples)``; ``rng`` is a
    ``RandomState``.
    """
    states = np.empty((tree.n_nodes, n_samples), dtype=np.int64)
    states[tree.root] = _draw(np.cumsum(root_marginal)[None, :], rng, n_samples)
    for u in tree.preorder[1:]:
        cum = np.cumsum(cpts[u], axis=1)[states[tree.parent[u]]]
        states[u] = _draw(cum, rng, n_samples)
    return states


def _draw(cum, rng, n):
    """One draw per row from the cumulative tables ``cum`` (rows broadcast to ``n``)."""
    u = rng.random_sample(n)[:, None]
    out = (u > cum).sum(axis=1)
    return np.minimum(out, cum.shape[1] - 1)
