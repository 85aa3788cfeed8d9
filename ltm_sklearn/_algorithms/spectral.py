"""Spectral learning of latent tree models (Parikh, Song & Xing (ICML 2011), Parikh, Song & Xing
2011).

Observable representation
-------------------------
Root the tree at a hidden node. For every non-root node ``i`` with parent ``p`` pick a
*representative* observed leaf ``rep(i)`` inside the subtree ``T_i`` and a *reference*
observed leaf ``ref(i)`` outside it, and take the thin SVD of their pair marginal
``P[X_rep(i), X_ref(i)] = U_i diag(s_i) V_i^T`` (top ``k'`` singular triplets; Parikh, Song & Xing
(ICML 2011)
Algorithm 1 step 3). The transformed message of ``T_i`` is

    n_i(x_{T_i}) = diag(s_i)^-1 V_i^T P[X_ref(i), x_{T_i}]   (a k'-vector).

Writing ``m_i = P[x_{T_i} | X_p]`` (the true message, Parikh, Song & Xing (ICML 2011) eq. (9)) this
is
``n_i = F_i m_i`` with ``F_i = diag(s_i)^-1 V_i^T O_{ref(i)|p} diag(P[X_p])`` invertible, and
``F_i^-1 = (U_i^T O_{rep(i)|p})^T`` because ``U_i^T P[X_rep, X_ref] V_i = diag(s_i)``: the
sandwich ``R L^-1 = I`` of Parikh, Song & Xing (ICML 2011) section 5.1, realised with the same
singular vectors
``U`` that eq. (18)-(21) use. From this:

* leaf ``i``: ``n_i(x_i) = U_i[x_i, :]`` (a row of the left singular vectors);
* hidden ``h`` with children ``c1, c2`` (eq. (21)/(29), the transition tensor):
  ``n_h = C_h x_2 n_c1 x_3 n_c2`` with the projected triple
  ``C_h = P[X_ref(h), X_rep(c1), X_rep(c2)] x_1 (diag(s_h)^-1 V_h^T) x_2 U_c1^T x_3 U_c2^T``;
  with a single child the projected pair plays the same role;
* root with children ``c_1..c_J`` (eq. (34), ``J <= 3``):
  ``P(x) = P[X_rep(c_1), ..., X_rep(c_J)] x_j (U_cj^T n_cj)``.

Hidden nodes with more children than these moments allow are binarised with *virtual*
copies of the node (same hidden state), which plays the role of the cyclic sibling order
and "adopted" children of Parikh, Song & Xing (ICML 2011) section 5.2 and keeps every moment at
order <= 3.
Representative and reference leaves are chosen among the nearest leaves to maximise the
``k'``-th singular value of their pair marginal (Parikh, Song & Xing (ICML 2011) section 5.3,
Theorem 1).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .._engine.encoding import MISSING
from .tensor import tensor_cpts

__all__ = [
    "fit_spectral",
    "inverse_linker",
    "spectral_log_abs",
    "computation_tree",
    "SpectralParams",
    "RepresentationMoments",
    "explicit_from_representation",
    "raw_representation",
]

# Candidates per side when choosing representative / reference leaves.
_N_CANDIDATES = 2
# Relative singular-value cutoff of the edge SVDs (pseudo-inverse threshold).
_RCOND = 1e-10


@dataclass
class _Node:
    host: int  # tree node represented (virtual nodes carry their hidden host)
    children: list = field(default_factory=list)  # computation-node ids
    leaves: tuple = ()  # observed variables in the subtree
    rep: int = -1
    ref: int = -1


@dataclass
class SpectralParams:
    """Fitted observable representation, in postorder of the computation tree."""

    nodes: list  # _Node records, children before parents; the root last
    leaf_tables: dict  # node id -> (n_states + 2, r): rows for codes, MISSING, UNSEEN
    cores: dict  # node id -> projected moment tensor
    log_normaliser: float = 0.0


def computation_tree(tree):
    """Binarise ``tree`` (rooted) into computation nodes, postorder, root last.

    A non-root node keeps at most two children and the root at most three; extra children
    are grouped pairwise under virtual copies of their parent. Children are taken in the
    order of the smallest column below them, so the computation tree (and every moment
    built on it) depends on the rooted tree only, not on its node ids or the order in
    which it was written.
    """
    nodes = []

    def new(host, children):
        leaves = tuple(sorted(v for c in children for v in nodes[c].leaves))
        nodes.append(_Node(host=host, children=list(children), leaves=leaves))
        return len(nodes) - 1

    done = {}  # tree node -> its computation node
    for u in tree.postorder:  # children before parents: no recursion, any depth
        u = int(u)
        if u < tree.n_observed and not tree.children[u]:
            nodes.append(_Node(host=u, leaves=(u,)))
            done[u] = len(nodes) - 1
            continue
        kids = sorted((done.pop(c) for c in tree.children[u]), key=lambda c: nodes[c].leaves[0])
        limit = 3 if u == tree.root else 2
        while len(kids) > limit:
            grouped = [new(u, kids[i : i + 2]) for i in range(0, len(kids) - 1, 2)]
            if len(kids) % 2:
                grouped.append(kids[-1])
            kids = grouped
        done[u] = new(u, kids)
    return nodes


def _choose_rep_ref(tree, nodes, moments, k):
    """Pick ``rep``/``ref`` of every non-root computation node (Parikh, Song & Xing (ICML 2011)
    section 5.3).

    ``ref`` may be any observed leaf outside the subtree. Pair tables are counted in one
    batch (one pass over the rows).
    """
    hops = tree.hop_distances()
    d = tree.n_observed
    all_leaves = np.arange(d)
    choices = {}
    for nid, node in enumerate(nodes[:-1]):
        inside = np.asarray(node.leaves)
        outside = np.setdiff1d(all_leaves, inside, assume_unique=True)
        if outside.size == 0:
            continue
        choices[nid] = nearest_candidates(hops[node.host], inside, outside)
    wanted = sorted({(min(a, b), max(a, b)) for c in choices.values() for a, b in c})
    moments.pairs(wanted)
    for nid, cands in choices.items():
        nodes[nid].rep, nodes[nid].ref = best_linker_pair(moments, cands, k)


def nearest_candidates(near, inside, outside):
    """``(rep, ref)`` candidates: the ``_N_CANDIDATES`` nearest leaves on each side."""
    inside, outside = np.asarray(inside), np.asarray(outside)
    reps = inside[np.argsort(near[inside], kind="stable")[:_N_CANDIDATES]]
    refs = outside[np.argsort(near[outside], kind="stable")[:_N_CANDIDATES]]
    return [(int(a), int(b)) for a in reps for b in refs]


def best_linker_pair(moments, candidates, k):
    """The candidate ``(rep, ref)`` whose pair marginal has the largest ``k``-th singular
    value (Parikh, Song & Xing (ICML 2011) Theorem 1: the error bound grows with its inverse)."""
    best, best_s = candidates[0], -np.inf
    for a, b in candidates:
        s = np.linalg.svd(moments.pair(a, b), compute_uv=False)
        sk = s[min(k, s.size) - 1]
        if sk > best_s:
            best, best_s = (a, b), sk
    return best


def _edge_svd(P, k):
    U, s, Vt = np.linalg.svd(P, full_matrices=False)
    if s.size == 0 or s[0] <= 0:
        return U[:, :1], np.ones(1), Vt[:1].T
    r = int(min(k, np.sum(s > _RCOND * s[0])))
    return U[:, :r], s[:r], Vt[:r].T


def inverse_linker(pair, k):
    """Linker of the correctly specified decomposition (Song, Ishteva, Parikh, Xing & Park (ICML
    2013) Theorem 3, eq. (4)).

    The unfolding at the edge above a subtree is ``P_{S1;S2} = PB M A^T P`` with
    ``PB = P[x_S1, X_ref] V``, ``A^T P = U^T P[X_rep, x_S2]`` and
    ``M = (U^T P[X_rep, X_ref] V)^-1 = diag(s)^-1`` for the top-``k`` singular triplets
    ``(U, s, V)`` of the pair marginal ``P[X_rep, X_ref]``.

    Parameters
    ----------
    pair : ndarray of shape (n_rep, n_ref)
    k : int

    Returns
    -------
    head : ndarray of shape (n_ref, r)
        Maps ``X_ref`` to the message space: the message of the subtree is
        ``head^T P[X_ref, x_S1]`` (``V diag(s)^-1``).
    tail : ndarray of shape (n_rep, r)
        Maps ``X_rep`` to the same space from outside (``U``); ``M = head @ tail.T``.
    """
    U, s, V = _edge_svd(pair, k)
    return V / s, U


def fit_spectral(tree, moments, n_hidden_states, unseen_proba, linker=None, select=None):
    """Estimate the observable representation of Parikh, Song & Xing (ICML 2011) Algorithm 1.

    Parameters
    ----------
    tree : LatentTree
        Rooted at a hidden node; observed variables at the leaves.
    moments : MomentEstimator
    n_hidden_states : int
        ``k'``, the rank of every edge linker.
    unseen_proba : ndarray of shape (n_features,)
        Likelihood given to a category never seen in training.
    linker : callable, default=None
        ``linker(nid, node, pair, k) -> (head, tail)`` for every edge (see
        :func:`inverse_linker`, the default, which is Parikh, Song & Xing (ICML 2011)). The
        hierarchical
        decomposition of Song, Ishteva, Parikh, Xing & Park (ICML 2013) passes its rank-``k``
        optimal linker here.
    select : callable, default=None
        ``select(tree, nodes, moments, k)`` sets ``rep``/``ref`` of the computation nodes
        (default: Parikh, Song & Xing (ICML 2011)'s choice, any outside leaf as ``ref``).

    Returns
    -------
    SpectralParams
    """
    k = int(n_hidden_states)
    nodes = computation_tree(tree)
    (_choose_rep_ref if select is None else select)(tree, nodes, moments, k)
    n_states = moments.n_states
    heads, tails, leaf_msgs = {}, {}, {}
    for nid, node in enumerate(nodes[:-1]):
        if node.rep < 0:  # a single observed variable: nothing outside, keep it exact
            tails[nid] = leaf_msgs[nid] = np.eye(n_states[node.leaves[0]])
            continue
        pair = moments.pair(node.rep, node.ref)
        if linker is None:
            heads[nid], tails[nid] = inverse_linker(pair, k)
        else:
            heads[nid], tails[nid] = linker(nid, node, pair, k)
        if not node.children:  # a leaf's message: head^T P[X_ref, x_leaf] (inverse: U)
            leaf_msgs[nid] = pair @ heads[nid]
    leaf_tables = {}
    requests, owners = [], []
    for nid, node in enumerate(nodes):
        if not node.children:
            j = node.host
            u = leaf_msgs[nid]
            missing = moments.integral(j) @ u  # a marginalised entry (sum or integral)
            leaf_tables[nid] = np.vstack([u, missing, unseen_proba[j] * missing])
            continue
        kids = node.children
        child_vars = tuple(nodes[c].rep if nodes[c].rep >= 0 else nodes[c].leaves[0] for c in kids)
        child_proj = tuple(tails[c].T for c in kids)
        if nid == len(nodes) - 1:  # root: eq. (34)
            requests.append((child_vars, child_proj))
        else:  # eq. (29): projected triple (or pair with one child)
            requests.append(((node.ref,) + child_vars, (heads[nid].T,) + child_proj))
        owners.append(nid)
    cores = dict(zip(owners, moments.projected(requests)))
    params = SpectralParams(nodes=nodes, leaf_tables=leaf_tables, cores=cores)
    # Renormalise: the all-missing row sums P_hat over every configuration.
    n_features = len(n_states)
    sign, logabs = spectral_log_abs(params, np.full((n_features, 1), MISSING, dtype=np.int16))
    if sign[0] > 0 and np.isfinite(logabs[0]):
        params.log_normaliser = float(logabs[0])
    return params


def spectral_log_abs(params, codes):
    """Sign and ``log |P_hat(x)|`` of every row (Parikh, Song & Xing (ICML 2011) eqs. (33)-(34)).

    ``codes`` is an array of shape ``(n_features, N)``, or an object with a ``shape`` and a
    method ``leaf_messages(j, table) -> (r, N)`` that evaluates the leaf tables on other
    feature maps (kernel features,
    :class:`~ltm_sklearn._algorithms.leaves.KernelEvaluation`); rows ``-2`` / ``-1`` of a
    leaf table are the messages of a missing / unseen entry. Messages are held
    feature-major, ``(r, N)``.
    Leaf messages are rows of orthonormal ``U`` (entries bounded by ``sqrt(n_states)``);
    every internal message is rescaled so that its max-abs entry is 1 and the log of the
    factor accumulated, so a 200-leaf chain neither underflows nor overflows. The result
    already includes the normaliser.
    """
    n = codes.shape[1]
    log_scale = np.zeros(n)
    msgs = {}
    nodes = params.nodes
    root = len(nodes) - 1
    value = None
    for nid, node in enumerate(nodes):
        if not node.children:
            table = params.leaf_tables[nid]
            if not isinstance(codes, np.ndarray):  # rows of continuous columns
                msgs[nid] = codes.leaf_messages(node.host, table)
                continue
            c = codes[node.host].astype(np.intp)
            idx = np.where(
                c >= 0, c, np.where(c == MISSING, table.shape[0] - 2, table.shape[0] - 1)
            )
            msgs[nid] = table.T[:, idx]
            continue
        core = params.cores[nid]
        kids = [msgs.pop(c) for c in node.children]
        if nid == root:
            value = _contract_all(core, kids)
            break
        if len(kids) == 1:
            msg = core @ kids[0]
        else:
            a, b = kids
            outer = (a[:, None, :] * b[None, :, :]).reshape(-1, n)
            msg = core.reshape(core.shape[0], -1) @ outer
        scale = np.abs(msg).max(axis=0)
        scale[scale == 0] = 1.0
        msg /= scale
        msgs[nid] = msg
        log_scale += np.log(scale)
    with np.errstate(divide="ignore"):
        logabs = np.log(np.abs(value)) + log_scale - params.log_normaliser
    return np.sign(value), logabs


def _contract_all(core, kids):
    """Contract the root tensor with one ``(r_j, N)`` message per mode."""
    if len(kids) == 1:
        return core @ kids[0]
    t = np.tensordot(core, kids[0], axes=([0], [0]))  # (r_1, ..., r_J-1, N)
    for m in kids[1:]:
        t = np.einsum("a...n,an->...n", t, m)
    return t


class _MarginalisedMessages:
    """The messages of a raw representation with every column marginalised, to evaluate
    marginals of a few columns without a pass over the whole tree.

    ``inside[i]`` is the message of computation node ``i`` when no column below it carries
    evidence, ``outside[i]`` the linear form that the rest of the tree applies to the
    message of ``i`` when no column outside its subtree carries evidence; both as a
    vector of max-abs 1 and the log of its scale. A value with evidence on a set ``S`` of
    columns is then the message of their lowest common ancestor ``A``, computed on the
    paths from ``S`` up to ``A`` only (every other child contributes its ``inside``),
    contracted with ``outside[A]``: the cost is that of the paths, not of the tree.
    Requests are evaluated many at a time (:meth:`values`): each node on the paths of a
    chunk of requests once for all the chunk's rows, so a chunk costs the union of its
    paths times its rows.
    """

    def __init__(self, params):
        self.params = params
        nodes = params.nodes
        root = len(nodes) - 1
        self.parent = np.full(len(nodes), -1, dtype=np.int64)
        self.depth = np.zeros(len(nodes), dtype=np.int64)
        self.leaf_of = {}  # column -> its leaf computation node
        for nid, node in enumerate(nodes):
            for c in node.children:
                self.parent[c] = nid
            if not node.children:
                self.leaf_of[node.host] = nid
        for nid in range(root - 1, -1, -1):  # parents after children: walk down
            self.depth[nid] = self.depth[self.parent[nid]] + 1
        # rows of a chunk of requests evaluated together (see _CHUNK_ELEMENTS)
        widest = max((c.size for c in params.cores.values()), default=1)
        self._chunk_rows = max(min(_CHUNK_ELEMENTS // widest, _CHUNK_ROWS), 1)
        self.inside = {}
        for nid, node in enumerate(nodes[:-1]):
            if not node.children:
                table = params.leaf_tables[nid]
                self.inside[nid] = (table[table.shape[0] - 2], 0.0)
                continue
            kids = [self.inside[c] for c in node.children]
            msg = _internal_message(params.cores[nid], [v[:, None] for v, _ in kids])[:, 0]
            scale = np.abs(msg).max()
            scale = scale if scale > 0 else 1.0
            self.inside[nid] = (msg / scale, sum(lg for _, lg in kids) + np.log(scale))
        self.outside = {}
        kids = nodes[root].children
        for t, c in enumerate(kids):
            others = [self.inside[o] for o in kids if o != c]
            form = _root_form(params.cores[root], [v for v, _ in others], t)
            self._set_outside(c, form, sum(lg for _, lg in others))
        for nid in range(root - 1, -1, -1):  # parents before children
            node = nodes[nid]
            if not node.children:
                continue
            out, out_log = self.outside[nid]
            core = params.cores[nid]
            if len(node.children) == 1:
                self._set_outside(node.children[0], out @ core, out_log)
                continue
            a, b = node.children
            (va, la), (vb, lb) = self.inside[a], self.inside[b]
            self._set_outside(a, np.einsum("i,ijk,k->j", out, core, vb), out_log + lb)
            self._set_outside(b, np.einsum("i,ijk,j->k", out, core, va), out_log + la)

    def _set_outside(self, nid, form, log_scale):
        scale = np.abs(form).max() if form.size else 0.0
        scale = scale if scale > 0 else 1.0
        self.outside[nid] = (form / scale, log_scale + np.log(scale))

    def _dense(self, j, vectors):
        if vectors.ndim == 2:
            return vectors
        table = self.params.leaf_tables[self.leaf_of[j]]
        return np.eye(table.shape[0] - 2)[vectors]

    def _lowest_common_ancestor(self, leaves):
        nodes = set(leaves)
        while len(nodes) > 1:
            deepest = max(nodes, key=lambda u: self.depth[u])
            nodes.discard(deepest)
            nodes.add(int(self.parent[deepest]))
        return nodes.pop()

    def values(self, blocks):
        """Sign and ``log |P_hat|`` of the rows of each request of ``blocks``: a request
        is a list of ``(column, evidence)`` (other columns marginalised), the evidence of
        a column either ``(n_rows, n_states)`` vectors or ``(n_rows,)`` category codes
        (one-hot vectors, not formed). Returns one ``(sign, logabs)`` per request.

        The requests are evaluated together, in chunks of rows: every node on the path
        from a request's columns up to their lowest common ancestor is computed once for
        the rows of the whole chunk, the rows of a request without evidence below it
        carrying the marginalised message (so a value is read at its ancestor whatever
        the other requests). A call per node and chunk rather than per node and request:
        the requests of a decomposition are many and small (a few to a few hundred
        rows each).
        """
        budget = self._chunk_rows
        out, chunk, rows = [], [], 0
        for block in blocks:
            n = len(block[0][1])
            if chunk and rows + n > budget:
                out.extend(self._values_chunk(chunk))
                chunk, rows = [], 0
            chunk.append(block)
            rows += n
        if chunk:
            out.extend(self._values_chunk(chunk))
        return out

    def _values_chunk(self, blocks):
        params = self.params
        nodes = params.nodes
        root = len(nodes) - 1
        sizes = [len(block[0][1]) for block in blocks]
        bounds = np.concatenate([[0], np.cumsum(sizes)])
        n = int(bounds[-1])
        evidence = {}  # column -> [(rows, vectors or codes)]
        tops, active = [], set()
        for b, block in enumerate(blocks):
            own = {}
            for j, vectors in block:
                if j in own:  # the same column twice: the product of the evidence
                    own[j] = self._dense(j, own[j]) * self._dense(j, vectors)
                else:
                    own[j] = vectors
            rows = slice(int(bounds[b]), int(bounds[b + 1]))
            for j, vectors in own.items():
                evidence.setdefault(j, []).append((rows, vectors))
            leaves = [self.leaf_of[j] for j in own]
            top = self._lowest_common_ancestor(leaves)
            tops.append(top)
            for u in leaves:  # up to this request's top (other requests may go higher)
                while True:
                    active.add(u)
                    if u == top:
                        break
                    u = int(self.parent[u])
        ending = {}  # node -> the requests whose top it is
        for b, top in enumerate(tops):
            ending.setdefault(top, []).append(b)
        out = [None] * len(blocks)

        def read(nid, msg, log_scale):
            """The values of the requests whose top is ``nid``, from its message."""
            for b in ending.get(nid, ()):
                rows = slice(int(bounds[b]), int(bounds[b + 1]))
                value, scale = msg[..., rows], log_scale[rows]
                if nid != root:
                    form, lg = self.outside[nid]
                    value = form @ value
                    scale = scale + lg
                with np.errstate(divide="ignore"):
                    logabs = np.log(np.abs(value)) + scale - params.log_normaliser
                out[b] = (np.sign(value), logabs)

        # the message of every active node over all rows of the chunk, with its log scale,
        # kept until its parent has read it
        msgs, unscaled = {}, np.zeros(n)
        for nid in sorted(active):  # children before parents
            node = nodes[nid]
            if not node.children:
                table = params.leaf_tables[nid]
                m = table.shape[0] - 2
                msg = np.empty((table.shape[1], n))
                msg[:] = table[m][:, None]  # the rows without evidence: marginalised
                for rows, vectors in evidence[node.host]:
                    if vectors.ndim == 1:  # category codes: rows of the table
                        msg[:, rows] = table[:m][vectors].T
                    else:
                        msg[:, rows] = (vectors @ table[:m]).T
                msgs[nid] = (msg, unscaled)
                read(nid, *msgs[nid])
                continue
            kids, log_scale = [], np.zeros(n)
            for c in node.children:
                if c in active:
                    msg, lg = msgs.pop(c)
                else:  # the same message on every row: a vector
                    msg, lg = self.inside[c]
                kids.append(msg)
                log_scale = log_scale + lg
            if nid == root:
                kids = [
                    k if k.ndim == 2 else np.broadcast_to(k[:, None], (k.size, n)) for k in kids
                ]
                read(nid, _contract_all(params.cores[nid], kids), log_scale)
                continue
            msg = _internal_message(params.cores[nid], kids)
            scale = np.abs(msg).max(axis=0)
            scale[scale == 0] = 1.0
            msg /= scale
            msgs[nid] = (msg, log_scale + np.log(scale))
            read(nid, *msgs[nid])
        return out


#: a chunk of requests evaluated together by :meth:`_MarginalisedMessages.values`: its
#: rows times the largest core's entries (a bound on the outer products of two children's
#: messages) at most ``_CHUNK_ELEMENTS``, and at most ``_CHUNK_ROWS`` rows, unless one
#: request alone has more (it is then a chunk of its own). Every node on a path of the
#: chunk computes all its rows, so large requests go (nearly) one at a time: on 40
#: columns of 30 categories (pair requests of 900 rows) the moment start took 0.48 s with
#: chunks of up to 131,072 rows, 0.35 s one request at a time and 0.26 s with chunks of
#: 1,024 rows
_CHUNK_ELEMENTS = 1 << 20
_CHUNK_ROWS = 1024


def _internal_message(core, kids):
    """Message ``(r, N)`` of a non-root computation node from its children's ``(r_c, N)``
    messages (eq. (29): the projected triple, or pair with one child). A child's message
    that is the same on every row (a vector ``(r_c,)``: no evidence below it) is folded
    into the core first, instead of forming the ``(r_a r_b, N)`` outer product."""
    if len(kids) == 1:
        return core @ kids[0]
    a, b = kids
    if b.ndim == 1:
        return (core @ b) @ a
    if a.ndim == 1:
        return np.tensordot(a, core, axes=([0], [1])) @ b
    n = max(a.shape[1], b.shape[1])
    outer = (a[:, None, :] * b[None, :, :]).reshape(-1, n)
    return core.reshape(core.shape[0], -1) @ outer


def _root_form(core, others, mode):
    """The root tensor contracted with constant messages on every mode but ``mode``."""
    t = np.moveaxis(core, mode, 0)
    for v in others:
        t = np.tensordot(t, v, axes=([1], [0]))
    return t


class RepresentationMoments:
    """Low-order marginals of a raw observable representation ``P_hat``.

    The interface of :class:`~ltm_sklearn.moments.MomentEstimator` (``n_states``,
    ``singletons``, ``pair``, ``pairs``, ``projected``) on the joint that the
    representation estimates (Parikh, Song & Xing (ICML 2011) eq. (34) with every other column
    marginalised),
    so the explicit-parameter recovery of :func:`~ltm_sklearn.tensor.tensor_cpts` reads
    an estimator's own estimate instead of the empirical moments. Values can be negative
    (the raw estimate is not constrained to the simplex). A pair table is ``n_i n_j``
    rows of one-hot evidence, a projected moment ``prod_m r_m`` rows whose evidence
    vectors are the rows of the projections; each request is evaluated on the paths of
    the tree between its columns, many requests together in chunks of rows
    (:class:`_MarginalisedMessages`), so time and memory grow with the requests, not
    with the columns times the requests.

    Parameters
    ----------
    params : SpectralParams
    n_states : array-like of int
    """

    def __init__(self, params, n_states):
        self.params = params
        self.n_states = np.asarray(n_states, dtype=np.int64)
        self._pairs = {}
        self._messages = None

    def _evaluate(self, blocks):
        """``blocks``: an iterable of ``[(column, evidence), ...]`` sharing their rows
        (evidence: vectors or category codes, see :meth:`_MarginalisedMessages.values`);
        returns one value array per block (evaluated together, in chunks of rows)."""
        if self._messages is None:
            self._messages = _MarginalisedMessages(self.params)
        return [sign * np.exp(logabs) for sign, logabs in self._messages.values(list(blocks))]

    def singletons(self):
        return self._evaluate([(j, np.arange(int(n)))] for j, n in enumerate(self.n_states))

    def pairs(self, pairs):
        todo = sorted({(i, j) for i, j in pairs if (i, j) not in self._pairs})
        if todo:
            blocks = (
                [
                    (i, np.repeat(np.arange(int(self.n_states[i])), int(self.n_states[j]))),
                    (j, np.tile(np.arange(int(self.n_states[j])), int(self.n_states[i]))),
                ]
                for i, j in todo
            )
            for (i, j), v in zip(todo, self._evaluate(blocks)):
                self._pairs[(i, j)] = v.reshape(int(self.n_states[i]), int(self.n_states[j]))
        return {(i, j): self._pairs[(i, j)] for i, j in pairs}

    def pair(self, i, j):
        if i > j:
            return self.pairs([(j, i)])[(j, i)].T
        return self.pairs([(i, j)])[(i, j)]

    def projected(self, requests):
        blocks, shapes = [], []
        for variables, projections in requests:
            shape = [B.shape[0] for B in projections]
            grid = np.indices(shape).reshape(len(shape), -1)
            blocks.append([(v, B[g]) for v, B, g in zip(variables, projections, grid)])
            shapes.append(shape)
        return [v.reshape(shape) for v, shape in zip(self._evaluate(blocks), shapes)]


def raw_representation(tree, moments, n_hidden_states, unseen_proba, fit_raw):
    """The raw observable representation of a moment-based estimator on ``tree``:
    ``fit_raw(tree, moments, k, unseen_proba) -> SpectralParams`` on
    ``tree.with_observed_leaves()``, or ``None`` for a tree without hidden nodes (which
    has no representation)."""
    if not tree.hidden_nodes:
        return None
    return fit_raw(tree.with_observed_leaves(), moments, n_hidden_states, unseen_proba)


def explicit_from_representation(tree, moments, n_hidden_states, unseen_proba, fit_raw, rng):
    """Explicit parameters of a moment-based estimator on ``tree``.

    ``fit_raw(tree, moments, k, unseen_proba) -> SpectralParams`` fits the raw observable
    representation on ``tree.with_observed_leaves()``; the three-view decompositions of
    :func:`~ltm_sklearn.tensor.tensor_cpts` read the marginals of that estimate
    (:class:`RepresentationMoments`), which turns it into a normalised model with
    conditional tables on the simplex. With exact moments and ``k' = k`` both are the
    true model. A tree without hidden nodes needs no representation: its tables are the
    empirical pair tables.

    Returns
    -------
    root_marginal, cpts, extras : ``extras`` holds ``{"raw_estimate_": SpectralParams}``.
    """
    raw = raw_representation(tree, moments, n_hidden_states, unseen_proba, fit_raw)
    if raw is None:
        return (*tensor_cpts(tree, moments, n_hidden_states, random_state=rng), {})
    rep = RepresentationMoments(raw, moments.n_states)
    root, cpts = tensor_cpts(tree, rep, n_hidden_states, random_state=rng)
    return root, cpts, {"raw_estimate_": raw}
