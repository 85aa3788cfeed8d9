"""Spectral learning of latent tree models (papers/003, Parikh, Song & Xing 2011).

Observable representation
-------------------------
Root the tree at a hidden node. For every non-root node ``i`` with parent ``p`` pick a
*representative* observed leaf ``rep(i)`` inside the subtree ``T_i`` and a *reference*
observed leaf ``ref(i)`` outside it, and take the thin SVD of their pair marginal
``P[X_rep(i), X_ref(i)] = U_i diag(s_i) V_i^T`` (top ``k'`` singular triplets; papers/003
Algorithm 1 step 3). The transformed message of ``T_i`` is

    n_i(x_{T_i}) = diag(s_i)^-1 V_i^T P[X_ref(i), x_{T_i}]   (a k'-vector).

Writing ``m_i = P[x_{T_i} | X_p]`` (the true message, papers/003 eq. (9)) this is
``n_i = F_i m_i`` with ``F_i = diag(s_i)^-1 V_i^T O_{ref(i)|p} diag(P[X_p])`` invertible, and
``F_i^-1 = (U_i^T O_{rep(i)|p})^T`` because ``U_i^T P[X_rep, X_ref] V_i = diag(s_i)``: the
sandwich ``R L^-1 = I`` of papers/003 section 5.1, realised with the same singular vectors
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
and "adopted" children of papers/003 section 5.2 and keeps every moment at order <= 3.
Representative and reference leaves are chosen among the nearest leaves to maximise the
``k'``-th singular value of their pair marginal (papers/003 section 5.3, Theorem 1).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ._base import BaseLatentTree
from .moments import MISSING

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
    are grouped pairwise under virtual copies of their parent.
    """
    nodes = []

    def new(host, children):
        leaves = tuple(sorted(v for c in children for v in nodes[c].leaves))
        nodes.append(_Node(host=host, children=list(children), leaves=leaves))
        return len(nodes) - 1

    def expand(u, is_root):
        if u < tree.n_observed and not tree.children[u]:
            nodes.append(_Node(host=u, leaves=(u,)))
            return len(nodes) - 1
        kids = [expand(c, False) for c in tree.children[u]]
        limit = 3 if is_root else 2
        while len(kids) > limit:
            grouped = [new(u, kids[i : i + 2]) for i in range(0, len(kids) - 1, 2)]
            if len(kids) % 2:
                grouped.append(kids[-1])
            kids = grouped
        return new(u, kids)

    expand(tree.root, True)
    return nodes


def _choose_rep_ref(tree, nodes, moments, k):
    """Pick ``rep``/``ref`` of every non-root computation node (papers/003 section 5.3).

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
    value (papers/003 Theorem 1: the error bound grows with its inverse)."""
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
    """Linker of the correctly specified decomposition (papers/000 Theorem 3, eq. (4)).

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
    """Estimate the observable representation of papers/003 Algorithm 1.

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
        :func:`inverse_linker`, the default, which is papers/003). The hierarchical
        decomposition of papers/000 passes its rank-``k`` optimal linker here.
    select : callable, default=None
        ``select(tree, nodes, moments, k)`` sets ``rep``/``ref`` of the computation nodes
        (default: papers/003's choice, any outside leaf as ``ref``).

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
    """Sign and ``log |P_hat(x)|`` of every row (papers/003 eqs. (33)-(34)).

    ``codes`` has shape ``(n_features, N)``, or is an object with a ``shape`` and a method
    ``leaf_messages(j, table) -> (r, N)`` that evaluates the leaf tables on other feature
    maps (kernel features, :mod:`ltm_sklearn._kernel`); rows ``-2`` / ``-1`` of a leaf table
    are the messages of a missing / unseen entry. Messages are held feature-major, ``(r, N)``.
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
            if hasattr(codes, "leaf_messages"):
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


__all__ = [
    "SpectralLatentTree",
    "fit_spectral",
    "inverse_linker",
    "spectral_log_abs",
    "computation_tree",
    "SpectralParams",
]


# ---------------------------------------------------------------------- estimator


class SpectralLatentTree(BaseLatentTree):
    """Latent tree model learned by the spectral algorithm of papers/003 (Algorithm 1).

    The joint distribution of the observed variables is recovered from empirical pair and
    projected triple marginals through thin SVDs, without EM and without local optima.
    Fitted with ``y``, one model per class (on one shared tree) plus the class prior gives
    a classifier by per-class likelihoods.

    Parameters
    ----------
    n_hidden_states : int, default=2
        ``k'``: number of states of every hidden variable (rank of every edge SVD). An edge
        whose pair marginal has lower numerical rank uses that rank.
    tree : LatentTree, edge list, Newick string or networkx graph, default=None
        The latent tree. Observed columns are nodes ``0..n_features-1`` (or feature names
        in a Newick string / graph), hidden nodes follow. ``None`` learns it from the data
        with ``structure``.
    structure : {"nj", "rg", "clrg", "clnj", "star", "quartet"}, default="nj"
        Structure learning when ``tree=None``, on the spectral tree metric (papers/002
        eq. (12)) of the same moments the parameters use: neighbor joining, recursive
        grouping, Chow-Liu recursive grouping or Chow-Liu neighbor joining (Choi et al.
        2011; the last three may place columns at internal nodes, with test tolerance
        ``2 / sqrt(n_samples)``), a single hidden node joined to every column, or quartet
        tests on 4-way moments (papers/001, see :class:`QuartetTreeLearner`).
        ``"clnj"`` is the most accurate on trees with long hidden chains.
    n_jobs : int, default=None
        Row chunks processed in parallel when counting moments.
    random_state : int, RandomState instance or None, default=None
        Unused by this deterministic algorithm; kept for a uniform API.
    verbose : int, default=0

    Attributes
    ----------
    tree_ : LatentTree
        The tree used (given or learned), rooted at a central hidden node.
    categories_ : list of list
        Categories of every column, in code order.
    classes_ : ndarray of shape (n_classes,)
        Class labels (only when fitted with ``y``).
    class_prior_ : ndarray of shape (n_classes,)
        Class frequencies (only when fitted with ``y``).
    components_ : list
        Fitted observable representations, one per class (one without ``y``).
    n_floored_ : int
        Rows floored by the non-positive-estimate policy in the last ``score_samples``.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` has feature names.

    Notes
    -----
    Non-positive estimates are floored at ``1e-3`` times the smoothed independence model
    (see :mod:`ltm_sklearn._base`); ``P_hat`` is renormalised so that it sums to exactly one
    over all configurations before the floor.

    References
    ----------
    A. P. Parikh, L. Song, E. P. Xing. A Spectral Algorithm for Latent Tree Graphical Models.
    ICML 2011 (papers/003), Algorithm 1 and eqs. (29)-(34).

    Examples
    --------
    >>> from ltm_sklearn import SpectralLatentTree
    >>> from ltm_sklearn.datasets import LatentTreeModel, balanced_binary_tree
    >>> truth = LatentTreeModel.random(balanced_binary_tree(8), n_hidden_states=2,
    ...                                n_observed_states=3, random_state=0)
    >>> X = truth.sample(20000, random_state=1)
    >>> est = SpectralLatentTree(n_hidden_states=2, tree=truth.tree).fit(X)
    >>> X_test = truth.sample(1000, random_state=2)
    >>> gap = truth.log_likelihood(X_test).mean() - est.score(X_test)
    >>> bool(abs(gap) < 0.05)
    True
    """

    def _fit_component(self, tree, moments, unseen_proba):
        return fit_spectral(tree, moments, self.n_hidden_states, unseen_proba)

    def _component_log_abs(self, params, codes):
        return spectral_log_abs(params, codes)
