"""Message passing with explicit conditional probability tables (CPTs).

One upward pass (Parikh, Song & Xing (ICML 2011) eq. (9): ``m_u(x_parent) = sum_x P(x | x_parent)
beta_u(x)``)
and one downward pass serve exact scoring, EM's expected counts and hidden posteriors for
every estimator. Messages are held feature-major, ``(n_states, n_rows)``, and the rows are
processed in blocks sized to the cache, in parallel threads (:func:`~.threads.block_threads`).
The nodes of one height (and one number of states) are processed together, with stacked
tables and batched matrix products (:class:`_Plan`), so that a pass makes a few NumPy calls
per height of the tree rather than per node; its arrays come from buffers that each thread
keeps from pass to pass. Every internal node's product of messages is rescaled to unit
column sums and the log of the factor accumulated, so trees with hundreds of leaves do not
underflow.

The downward pass carries ``q_p = w P(x_p | row)`` from node to node: a child's outside
message is ``cpt_c^T (q_p / m_c)`` (the parent's posterior with the child's own message
divided out - one division instead of products over the siblings), its pairwise
statistics ``(q_p / m_c) @ beta_c^T`` times the table, and a leaf's counts the sums of
``q_p`` over the rows of each category (a product with the one-hot matrix of its codes,
built per block). Per edge that is three ``k' x k'`` by
``k' x rows`` products and a few elementwise passes.

Evidence of the observed nodes comes from an evidence object (:mod:`.evidence`:
:class:`~.evidence.CodeEvidence` for category codes, :class:`~.evidence.DenseEvidence`
for arbitrary non-negative likelihood vectors).
"""

from __future__ import annotations

import functools
import math
import os
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .evidence import BLOCK_ROWS, divide
from .threads import block_threads, single_threaded_blas

#: rescale running products of sibling messages after this many factors
_RESCALE_EVERY = 8
__all__ = [
    "log_likelihood",
    "expected_counts",
    "expected_counts_stacked",
    "stacked_tables",
    "StackedTables",
    "hidden_posteriors",
    "sample_states",
    "release_buffers",
]


# ---------------------------------------------------------------------- passes
#: rows per block (between MIN and BLOCK_ROWS): the more of ``2^14`` elements (states x rows)
#: of the largest message and ``2^21`` of all the messages and node pools of the tree. A
#: level of the passes works on all its nodes' messages at once, so its working set is the
#: block's rows times k' times the level's nodes. Measured on one thread (float32, hidden
#: Chow-Liu trees): an E-step on plants at k' = 16 / 24 / 32 took 59 / 81 / 108 ms with
#: 2^14 elements of the largest message against 70 / 113 / 152 ms with 2^16, on jester at
#: k' = 24 122 against 186 ms; 2^13 was as fast. On a small tree that size makes NumPy calls
#: too small for two threads to share the interpreter: on a 16-leaf tree with 100,000
#: distinct rows, in two threads, blocks of 2^21 elements of the whole tree took 15.5 /
#: 18.7 / 33.5 / 79 ms at k' = 2 / 4 / 8 / 16 against 24.3 / 28.1 / 47.6 / 121 ms
#: (1,000-4,000 rows a block), while on the density sets' trees 2^21 was no faster
_MESSAGE_ELEMENTS = 1 << 14
_TREE_ELEMENTS = 1 << 21
_MIN_BLOCK_ROWS = 512


class _Level:
    """Internal nodes of one height (and one number of states, and one of their
    parents') processed together by the passes: ``nodes`` sorted by their number of
    children, most first, so that the ``j``-th children of the first ``m_j`` nodes
    make the ``j``-th round of the product of messages."""

    def __init__(self, nodes, k, k_parent, lo):
        self.nodes = nodes
        self.k, self.k_parent = k, k_parent
        self.lo, self.hi = lo, lo + len(nodes)  # rows in the pools of ``k`` states
        self.rounds = []  # (message slots, number of nodes) of each round of children
        self.observed = []  # (position, node) of the observed nodes: their evidence
        self.slots = None  # the nodes' own messages: a range of their parents' pool
        self.parents = None  # rows of the parents in the pools of ``k_parent`` states


class _Plan:
    """The schedule of the passes over a rooted tree with given numbers of states.

    Nodes of one height do the same work at once: the product of their children's
    messages in rounds (one elementwise product per round, over every node that has
    that many children), the rescaling, and one batched matrix product for their
    messages to their parents. A pass thus costs a few calls per height of the tree
    rather than per node (on 64 columns at ``k' = 2`` the calls took ten times the
    arithmetic). Messages live in one pool per number of parent states; each level,
    and each group of leaves with tables of one shape, writes a contiguous range.
    """

    def __init__(self, tree, states):
        root, children, parent = tree.root, tree.children, tree.parent
        height = {}
        for u in tree.postorder:
            kids = children[u]
            if not kids and u != root and u >= tree.n_observed:
                raise ValueError(f"Hidden node {u} is a leaf: it carries no information.")
            height[u] = 1 + max((height[c] for c in kids), default=-1)
        self.states = states
        self.rows, self.slots = {}, {}  # state count -> rows of its node / message pools
        slot = {}

        def take_slots(nodes, k_parent):
            first = self.slots.get(k_parent, 0)
            self.slots[k_parent] = first + len(nodes)
            slot.update((u, first + i) for i, u in enumerate(nodes))
            return slice(first, first + len(nodes))

        # leaves, by the shape of their tables
        groups = {}
        for u in tree.postorder:
            if not children[u] and u != root:
                groups.setdefault((int(states[parent[u]]), int(states[u])), []).append(int(u))
        self.leaves = [
            (nodes, kp, take_slots(nodes, kp)) for (kp, _), nodes in sorted(groups.items())
        ]
        by_key = {}
        for u in tree.postorder:
            if children[u] and u != root:
                key = (height[u], int(states[u]), int(states[parent[u]]))
                by_key.setdefault(key, []).append(int(u))
        self.levels, position = [], {}
        for key in sorted(by_key) + [None]:
            if key is None:
                nodes, k, kp = [int(root)], int(states[root]), None
            else:
                nodes, (_, k, kp) = by_key[key], key
            nodes = sorted(nodes, key=lambda u: -len(children[u]))
            level = _Level(nodes, k, kp, self.rows.get(k, 0))
            self.rows[k] = level.hi
            position.update((u, level.lo + i) for i, u in enumerate(nodes))
            if kp is not None:
                level.slots = take_slots(nodes, kp)
            level.observed = [(i, u) for i, u in enumerate(nodes) if u < tree.n_observed]
            self.levels.append(level)
        # the rounds read the children's slots (written by the levels below)
        largest = [1]  # states x nodes of the largest temporary, per row
        for level in self.levels:
            degree = [len(children[u]) for u in level.nodes]
            for j in range(max(degree, default=0)):
                kids = [children[u][j] for u, d in zip(level.nodes, degree) if d > j]
                level.rounds.append((_index([slot[c] for c in kids]), len(kids)))
                largest.append(len(kids) * level.k)
            if level.k_parent is not None:
                level.parents = np.array([position[parent[u]] for u in level.nodes])
                largest.append(len(level.nodes) * level.k_parent)
        self.leaves = [
            (nodes, kp, slots, np.array([position[parent[u]] for u in nodes]))
            for nodes, kp, slots in self.leaves
        ]
        largest += [len(nodes) * kp for nodes, kp, *_ in self.leaves]
        self.temporary = max(largest)
        self.position = position
        self.parent_states = {u: int(states[parent[u]]) for u in position if u != root}
        self.parent_states.update((u, kp) for nodes, kp, *_ in self.leaves for u in nodes)

    @functools.cached_property
    def groups(self):
        """The non-root nodes in the order of the stacked tables (:meth:`cast`): the
        nodes of every level below the root, then of every group of leaves."""
        return [level.nodes for level in self.levels[:-1]] + [nodes for nodes, *_ in self.leaves]

    @functools.cached_property
    def by_shape(self):
        """The groups of tables of one shape: ``(shapes, where)`` with ``shapes`` a list of
        lists of groups (each a list of the indices of :attr:`groups` whose tables have
        one shape) and ``where[g] = (s, slice)`` the rows of group ``g`` in the stack of
        shape ``s`` (the groups of a shape, one after another)."""
        index, shapes = {}, []
        for g, nodes in enumerate(self.groups):
            u = nodes[0]
            shape = (self.parent_states[u], int(self.states[u]))
            if shape not in index:
                index[shape] = len(shapes)
                shapes.append([])
            shapes[index[shape]].append(g)
        where = [None] * len(self.groups)
        for s, groups in enumerate(shapes):
            start = 0
            for g in groups:
                where[g] = (s, slice(start, start + len(self.groups[g])))
                start += len(self.groups[g])
        return shapes, where

    def cast(self, root_marginal, stacks, dtype):
        """Tables stacked in the order of :attr:`groups` in the working precision (no
        copy when they are in it): the root marginal, the levels' and the leaf groups'."""
        root_marginal = np.asarray(root_marginal, dtype=dtype)
        stacks = [np.asarray(t, dtype=dtype) for t in stacks]
        n_levels = len(self.levels) - 1
        return root_marginal, stacks[:n_levels], stacks[n_levels:]


def _index(values):
    """A slice when ``values`` are consecutive (a view, no copy), else an index array."""
    values = np.asarray(values, dtype=np.intp)
    if values.size and np.array_equal(values, np.arange(values[0], values[0] + values.size)):
        return slice(int(values[0]), int(values[0]) + values.size)
    return values


_PLANS = weakref.WeakKeyDictionary()


def _plan(tree, root_marginal, cpts):
    """The :class:`_Plan` of ``tree`` for the state counts of the tables (kept with the
    tree: EM runs hundreds of passes over one)."""
    states = np.zeros(tree.n_nodes, dtype=np.int64)
    states[tree.root] = len(root_marginal)
    for u, c in cpts.items():
        states[u] = c.shape[1]
    key = (tree.root, states.tobytes())
    plans = _PLANS.setdefault(tree, {})
    if key not in plans:
        if len(plans) > 8:
            plans.clear()
        plans[key] = _Plan(tree, states)
    return plans[key]


#: bytes of a buffer of the passes that a thread keeps from one pass to the next: fresh
#: buffers each pass cost more than the passes' arithmetic (page faults: an E-step on
#: 1,000 rows x 64 columns at ``k' = 8`` took 11.9 ms allocating its arrays, 5.6 ms with
#: the allocator told to keep its memory)
_KEEP_BYTES = 1 << 26
_WORKSPACE = threading.local()
#: ``(thread, its buffers)`` of every thread alive that kept some, for
#: :func:`release_buffers`
_ALL_BUFFERS = []
_ALL_BUFFERS_LOCK = threading.Lock()


def _buffer(name, size, dtype):
    """A flat array of at least ``size`` entries, kept by the thread under ``name``
    from pass to pass (up to ``_KEEP_BYTES``) until :func:`release_buffers`."""
    dtype = np.dtype(dtype)
    kept = getattr(_WORKSPACE, "buffers", None)
    if kept is None:
        kept = _WORKSPACE.buffers = {}
        with _ALL_BUFFERS_LOCK:
            # the buffers of threads that ended go with them (kept here, a thread per
            # request that scores rows grew the process by its buffers every request)
            _ALL_BUFFERS[:] = [(t, b) for t, b in _ALL_BUFFERS if t.is_alive()]
            _ALL_BUFFERS.append((threading.current_thread(), kept))
    buf = kept.get((name, dtype))
    if buf is None or buf.size < size:
        buf = np.empty(size, dtype=dtype)
        if size * dtype.itemsize <= _KEEP_BYTES:
            kept[(name, dtype)] = buf
    return buf


def release_buffers():
    """Free the buffers that every thread keeps from pass to pass (call it when no pass
    runs): once a fit is over, its process should not hold the messages of its largest
    model (up to a few hundred MB at ``k' = 48`` on 15,000 rows). A worker process that
    kept them between tasks was stopped by ``loky``'s leak check (memory grown by more
    than 300 MB since its first task), with a warning and a new worker to start."""
    with _ALL_BUFFERS_LOCK:
        for _, kept in _ALL_BUFFERS:
            kept.clear()


def _pools(name, counts, n, dtype):
    """Arrays ``(m, k, n)`` for each ``k -> m`` of each dict in ``counts``, carved from
    one :func:`_buffer`; a dict ``k -> array`` per dict of ``counts``."""
    buf = _buffer(name, sum(m * k * n for c in counts for k, m in c.items()), dtype)
    out, start = [], 0
    for c in counts:
        pools = {}
        for k, m in c.items():
            pools[k] = buf[start : start + m * k * n].reshape(m, k, n)
            start += m * k * n
        out.append(pools)
    return out


def _view(buf, shape):
    return buf[: math.prod(shape)].reshape(shape)


def _take(pool, index, out):
    """``pool[index]`` (rows) written into ``out``; a view when ``index`` is a slice."""
    if isinstance(index, slice):
        return pool[index]
    return np.take(pool, index, axis=0, out=out, mode="clip")


def _block_rows(plan):
    """Rows per block of the passes of ``plan``."""
    width = sum(k * m for pools in (plan.slots, plan.rows) for k, m in pools.items())
    rows = max(_MESSAGE_ELEMENTS // int(plan.states.max()), _TREE_ELEMENTS // max(width, 1))
    return int(min(BLOCK_ROWS, max(_MIN_BLOCK_ROWS, rows)))


def _rows(n, n_jobs, block_rows=BLOCK_ROWS):
    n_blocks = max(1, -(-n // block_rows))
    bounds = np.linspace(0, n, n_blocks + 1).astype(int)
    return [slice(bounds[i], bounds[i + 1]) for i in range(n_blocks)], block_threads(
        n_jobs, passes=True
    )


def _map_blocks(
    func, evidence, weights, n_jobs, tree, root_marginal, cpts, dtype, *args, fold=list
):
    """``func(block evidence, block weights, plan, stacked tables, *args)`` over row
    blocks, in threads with ``n_jobs``; BLAS single-threaded, so the blocks share the
    cores instead of oversubscribing them. ``cpts`` is a dict node -> table, or a
    :class:`StackedTables`. ``fold`` reads the blocks' results in the order of the
    blocks, as they come (default: their list); a sum of them folded as they come holds
    a few blocks' results at a time, not every block's."""
    if not isinstance(cpts, StackedTables):
        cpts = stacked_tables(tree, root_marginal, cpts, dtype)
    plan = cpts.plan
    tables = plan.cast(root_marginal, cpts.stacks, dtype)
    blocks, jobs = _rows(evidence.n_rows, n_jobs, _block_rows(plan))

    def call(s):
        w = None if weights is None else weights[s]
        return func(evidence.block(s), w, plan, tables, *args)

    with single_threaded_blas():
        if jobs == 1 or len(blocks) == 1:
            return fold(call(s) for s in blocks)
        # map's results are dropped as they are read: the threads run ahead by a few
        return fold(_block_pool(jobs).map(call, blocks))


@functools.lru_cache(maxsize=4)
def _block_pool(n_threads):
    """Threads of the row blocks, kept for the life of the process: EM runs hundreds of
    passes, and threads started anew for each pass (4.4 ms a pass at 1e5 rows, 10% of a
    fit) would also lose the buffers they keep from pass to pass (:func:`_buffer`)."""
    return ThreadPoolExecutor(max_workers=n_threads, thread_name_prefix="ltm-blocks")


def _after_fork_in_child():
    """A forked child has none of the pool's threads (a pass given the parent's pool
    would wait for them for ever) and only the thread that forked."""
    global _ALL_BUFFERS_LOCK
    _block_pool.cache_clear()
    _ALL_BUFFERS_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _rescale(b, log_scale):
    """Divide every column of the stacked messages ``b`` by its largest entry (in
    place) and add the logs to ``log_scale``."""
    s = b.max(axis=1)
    s[s <= 0] = 1
    b /= s[:, None, :]
    log_scale += np.log(s, dtype=np.float64).sum(axis=0)


def _upward(plan, tables, ev):
    """Upward pass on one block: ``(lik, log_scale, beta, msg)``.

    ``beta[k][i]`` (the internal node at row ``i`` of the pool of ``k`` states) is the
    node's evidence times its children's messages, divided column-wise by its sum (the
    log of the factor added to ``log_scale``; the root's is not divided);
    ``msg[k][s]`` the message ``cpt_u @ beta_u`` (a leaf's ``cpt_u @ e_u``) of the node
    in slot ``s`` of the pool of parents with ``k`` states.
    ``P(x) = lik * exp(log_scale)``.
    """
    root_marginal, level_tables, leaf_tables = tables
    n, dtype = ev.n_rows, root_marginal.dtype
    log_scale = np.zeros(n)
    msg, beta = _pools("up", (plan.slots, plan.rows), n, dtype)
    spare = _buffer("spare", plan.temporary * n, dtype)
    for (nodes, kp, slots, _), t in zip(plan.leaves, leaf_tables):
        ev.leaf_messages(nodes, t, out=msg[kp][slots])
    for level, t in zip(plan.levels, level_tables + [None]):
        k = level.k
        b = beta[k][level.lo : level.hi]
        if level.rounds:
            first = _take(msg[k], level.rounds[0][0], b)  # written into b, or a view
            if first is not b:
                np.copyto(b, first)
        else:  # a tree of one node: its evidence alone
            b[...] = 1
        for j, (index, m) in enumerate(level.rounds[1:], start=1):
            b[:m] *= _take(msg[k], index, _view(spare, (m, k, n)))
            if j % _RESCALE_EVERY == 0:
                _rescale(b, log_scale)
        for i, u in level.observed:
            b[i] *= ev.evidence(u, dtype)
        if t is None:  # the root
            lik = (root_marginal @ b[0]).astype(np.float64)
            break
        s = b.sum(axis=1)
        s[s <= 0] = 1
        b /= s[:, None, :]
        log_scale += np.log(s, dtype=np.float64).sum(axis=0)
        np.matmul(t, b, out=msg[level.k_parent][level.slots])
    return lik, log_scale, beta, msg


def _downward(plan, tables, beta, msg, weights, level_counts=None):
    """The posteriors ``q = w P(x_u | row)`` of every internal node, in pools as
    ``beta``; with ``edge_counts`` (a dict), the expected counts of every edge to an
    internal node are added to it.

    ``q_p = w P(x_p | row)`` (column sums ``w``; 0 for a row of probability 0) and, for
    an internal child ``c``, ``W_c = q_p / msg_c`` - the outside evidence of ``c``'s
    parent times ``w / P(row)``, so that ``P(x_p, x_c | row) w = W_c[x_p] cpt_c[x_p,
    x_c] beta_c[x_c]`` and the outside message of ``c`` is ``cpt_c^T W_c``.

    Only the root's ``q`` is normalised: below it ``q_c = (cpt_c^T W_c) * beta_c``
    sums to ``sum_y W_c[y] msg_c[y] = sum_y q_p[y] = w`` whatever the scale of
    ``beta_c`` (``msg_c = cpt_c @ beta_c``; where ``msg_c`` is 0 so is ``q_p``), so the
    posteriors keep their column sums without a pass over them at every node.

    With ``level_counts`` (a list with an entry per level below the root), the expected
    counts of the edges to the nodes of every level are written to its entry.
    """
    root_marginal, level_tables, _ = tables
    n, dtype = next(iter(beta.values())).shape[2], root_marginal.dtype
    (q,) = _pools("down", (plan.rows,), n, dtype)
    spare = _buffer("spare", plan.temporary * n, dtype)
    divisor = _buffer("divisor", plan.temporary * n, dtype)
    top = plan.levels[-1]
    qr = q[top.k][top.lo]
    np.multiply(root_marginal[:, None], beta[top.k][top.lo], out=qr)
    qr *= _safe_ratio(weights, qr.sum(axis=0).astype(np.float64)).astype(dtype)
    for i, level, t in zip(
        range(len(level_tables) - 1, -1, -1), plan.levels[-2::-1], level_tables[::-1]
    ):
        shape = (len(level.nodes), level.k_parent, n)
        W = _take(q[level.k_parent], level.parents, _view(spare, shape))
        W = divide(W, msg[level.k_parent][level.slots], out=_view(divisor, shape))
        b = beta[level.k][level.lo : level.hi]
        out = q[level.k][level.lo : level.hi]
        np.matmul(t.transpose(0, 2, 1), W, out=out)
        out *= b
        if level_counts is not None:
            # W_c @ beta_c^T: sum_r P(x_p, x_c | row r) w_r / cpt_c[x_p, x_c]
            level_counts[i] = (t * np.matmul(W, b.transpose(0, 2, 1))).astype(np.float64)
    return q


def _log_likelihood_block(ev, _, plan, tables):
    lik, log_scale, _, _ = _upward(plan, tables, ev)
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
    parts = _map_blocks(
        _log_likelihood_block, evidence, None, n_jobs, tree, root_marginal, cpts, dtype
    )
    return np.concatenate(parts) if parts else np.zeros(0)


def _safe_ratio(w, lik):
    """``w / lik`` per row, 0 where ``lik`` is 0 or so small (a table entry driven to
    ~1e-300, e.g. by an over-relaxed EM candidate) that the ratio overflows: such a row
    adds nothing to the expected counts (its log-likelihood stays exact)."""
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        r = w / lik
    return np.where(np.isfinite(r) & (lik > 0), r, 0.0)


def _counts_block(ev, w, plan, tables):
    lik, log_scale, beta, msg = _upward(plan, tables, ev)
    with np.errstate(divide="ignore"):
        loglik = np.log(lik) + log_scale
    counts = [None] * (len(plan.levels) - 1)
    q = _downward(plan, tables, beta, msg, w, counts)
    top = plan.levels[-1]
    root_counts = q[top.k][top.lo].sum(axis=1).astype(np.float64)
    spare = _buffer("spare", plan.temporary * ev.n_rows, q[top.k].dtype)
    for (nodes, kp, slots, parents), t in zip(plan.leaves, tables[2]):
        qp = _take(q[kp], parents, _view(spare, (len(nodes), kp, ev.n_rows)))
        counts.append(ev.leaf_counts_of(nodes, t, qp, msg[kp][slots]))
    return loglik, root_counts, counts


class StackedTables:
    """The tables of every non-root node in one array per shape of table, ordered as the
    message passes read them: the rows of each level of the tree and of each group of
    leaves (:attr:`groups` lists their nodes) are a contiguous range of their shape's
    array (:attr:`stacks`: views, no copies). EM keeps its parameters in this form, so
    that an iteration's M-step, over-relaxed step and prior are a few NumPy calls per
    shape of table rather than one per table (at 277 rows x 9 columns, regrouping dicts
    of tables took as long as the E-step's passes), and the passes read them in place.

    Parameters
    ----------
    plan : _Plan
        The schedule of the passes (:func:`stacked_tables` builds it).
    shapes : list of ndarray
        One ``(n_tables, k_parent, k)`` array per shape of :attr:`_Plan.by_shape`.
    """

    def __init__(self, plan, shapes):
        self.plan = plan
        self.shapes = shapes

    @property
    def groups(self):
        return self.plan.groups

    @property
    def stacks(self):
        """The tables of each group of :attr:`groups` (views of :attr:`shapes`)."""
        return [self.shapes[s][rows] for s, rows in self.plan.by_shape[1]]

    def like(self, shapes):
        """Tables of the same nodes with the values ``shapes``."""
        return StackedTables(self.plan, shapes)

    def to_dict(self):
        """The tables as a dict node -> table (views)."""
        return {u: t for nodes, s in zip(self.groups, self.stacks) for u, t in zip(nodes, s)}

    def stack_values(self, values, dtype=None):
        """A dict node -> value (one shape per shape of table) stacked as :attr:`shapes`."""
        groups = self.plan.groups
        return [
            np.array([values[u] for g in gs for u in groups[g]], dtype=dtype)
            for gs in self.plan.by_shape[0]
        ]

    def join(self, stacks):
        """Arrays per group of :attr:`groups` (the counts of a pass) as arrays per shape."""
        return [
            stacks[gs[0]] if len(gs) == 1 else np.concatenate([stacks[g] for g in gs])
            for gs in self.plan.by_shape[0]
        ]


def stacked_tables(tree, root_marginal, cpts, dtype=float):
    """The tables ``cpts`` (dict node -> table) of ``tree`` as :class:`StackedTables`."""
    tables = StackedTables(_plan(tree, root_marginal, cpts), None)
    tables.shapes = tables.stack_values(cpts, dtype)
    return tables


def expected_counts_stacked(tree, root_marginal, tables, evidence, weights, n_jobs=None,
                            dtype=np.float64):  # fmt: skip
    """:func:`expected_counts` with the tables and the edge counts stacked
    (:class:`StackedTables`): returns ``loglik, root_counts, counts`` with ``counts`` as
    ``tables.shapes``."""
    weights = np.asarray(weights, dtype=float)
    loglik, root_counts, counts = _map_blocks(
        _counts_block, evidence, weights, n_jobs, tree, root_marginal, tables, dtype,
        fold=_sum_counts,
    )  # fmt: skip
    return loglik, root_counts, tables.join(counts)


def _sum_counts(parts):
    """The rows' log-likelihoods and the counts of the blocks ``parts`` (in order),
    summed block after block as they come (a block's counts are as large as the tables:
    kept for every block, a fit at k' = 150 over 100 columns peaked at 2.1 GB on 40,000
    rows, against 0.8 GB summed as they come)."""
    logliks, root_counts, counts = [], None, None
    for loglik, root, block in parts:
        logliks.append(loglik)
        if counts is None:
            root_counts, counts = root, list(block)
        else:
            root_counts = root_counts + root
            counts = [a + b for a, b in zip(counts, block)]
    return np.concatenate(logliks) if len(logliks) > 1 else logliks[0], root_counts, counts


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
    tables = stacked_tables(tree, root_marginal, cpts, dtype)
    loglik, root_counts, counts = expected_counts_stacked(
        tree, root_marginal, tables, evidence, weights, n_jobs, dtype
    )
    return loglik, root_counts, tables.like(counts).to_dict()


def _posterior_block(ev, _, plan, tables, nodes):
    _, _, beta, msg = _upward(plan, tables, ev)
    q = _downward(plan, tables, beta, msg, np.ones(ev.n_rows))
    out = {}
    for u in nodes:  # columns sum to 1, or to 0 for a row of probability 0
        p = q[plan.states[u]][plan.position[u]]
        out[u] = np.where(p.sum(axis=0) > 0, p, 1.0 / p.shape[0]).T
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
    parts = _map_blocks(
        _posterior_block, evidence, None, n_jobs, tree, root_marginal, cpts, np.float64, nodes
    )
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
