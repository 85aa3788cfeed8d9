"""Chow-Liu grouping (Choi, Tan, Anandkumar & Willsky, JMLR 2011, section 5).

1. The minimum spanning tree of the tree metric over the observed variables (the Chow-Liu
   tree for information distances) fixes which variables are close.
2. For every internal node ``i`` of the spanning tree, the closed neighbourhood of ``i`` in
   the current tree is replaced by a latent tree learned on it alone, by recursive grouping
   (CLRG) or neighbor joining (CLNJ).

Each local problem sees only a handful of nearby nodes, so it relies on short, accurately
estimated distances instead of the long, noisy ones a global method needs. Distances
involving hidden nodes created by earlier steps are estimated from the observed nodes
nearest to them (see :func:`_node_distance`).
"""

from __future__ import annotations

import heapq

import numpy as np

from ..._engine.checks import check_real
from ..._engine.tree import LatentTree
from .distances import check_distance_matrix
from .nj import neighbor_joining
from .rg import recursive_grouping, suppress_degree_two_hidden

__all__ = ["spanning_tree_edges", "chow_liu", "clrg", "clnj"]

#: observed nodes used to estimate the distance of a hidden node (the nearest ones)
_N_NEAREST = 4


def spanning_tree_edges(D):
    """Edges ``(i, j)`` of the minimum spanning tree of a distance matrix.

    For information distances ``-log`` of a dependence measure this is the Chow-Liu
    (maximum dependence) tree over the observed variables; :func:`chow_liu` builds that
    tree, as a :class:`~ltm_sklearn.tree.LatentTree`, from mutual information.

    Parameters
    ----------
    D : ndarray of shape (n, n)
        Symmetric distances, zero diagonal.

    Returns
    -------
    list of tuple of int
        ``n - 1`` edges ``(i, j)``, ``i < j``, sorted.

    Examples
    --------
    >>> import numpy as np
    >>> D = np.array([[0, 1, 3], [1, 0, 2], [3, 2, 0]], float)
    >>> spanning_tree_edges(D)
    [(0, 1), (1, 2)]
    """
    D = check_distance_matrix(D, distances=False)  # edge weights: the diagonal is not read
    return minimum_spanning_edges(D)


def minimum_spanning_edges(D):
    """Prim's minimum spanning tree of a dense distance matrix, ``O(d^2)`` in ``d`` vector
    steps (ties go to the lowest node index): :func:`spanning_tree_edges` without its
    validation, for a symmetric float matrix built by the caller (EM of a mixture of
    Gaussian Chow-Liu trees builds one every M-step: over the 2,190 trees of a fit on
    magic the checks took 0.36 s and finding the trees 0.42 s)."""
    d = len(D)
    if d == 0:
        return []
    in_tree = np.zeros(d, dtype=bool)
    in_tree[0] = True
    best, link = D[0].copy(), np.zeros(d, dtype=np.int64)
    edges = []
    for _ in range(d - 1):
        v = int(np.argmin(np.where(in_tree, np.inf, best)))
        u = int(link[v])
        edges.append((min(u, v), max(u, v)))
        in_tree[v] = True
        closer = D[v] < best
        best = np.where(closer, D[v], best)
        link[closer] = v
    return sorted(edges)


def chow_liu(mutual_info, feature_names=None):
    """The Chow-Liu tree over the observed columns, no hidden nodes (Chow & Liu,
    "Approximating Discrete Probability Distributions with Dependence Trees", IEEE
    Transactions on Information Theory, 1968).

    The maximum-weight spanning tree of the pairwise mutual information: among all trees
    over the columns, the one of maximum likelihood. Every column is an observed node;
    the inner ones are observed internal nodes.

    Parameters
    ----------
    mutual_info : array-like of shape (d, d)
        Pairwise mutual information (:func:`~ltm_sklearn.structure.mutual_information`).
    feature_names : sequence of str, default=None
        Names of the observed variables, kept on the returned tree.

    Returns
    -------
    LatentTree

    Examples
    --------
    >>> import numpy as np
    >>> M = np.array([[0, 0.5, 0.1], [0.5, 0, 0.3], [0.1, 0.3, 0]])
    >>> chow_liu(M).edges
    [(0, 1), (1, 2)]
    """
    M = check_distance_matrix(mutual_info, "mutual_info", distances=False)
    d = M.shape[0]
    if d == 1:
        return LatentTree([], 1, feature_names=feature_names)
    edges = spanning_tree_edges(M.max() - M)
    return LatentTree(edges, d, feature_names=feature_names)


def clrg(D, threshold=1e-8, feature_names=None):
    """Chow-Liu recursive grouping: :func:`recursive_grouping` on each MST neighbourhood.

    Parameters
    ----------
    D : array-like of shape (d, d)
        Tree distances between observed variables.
    threshold : float, default=1e-8
        Tolerance of the recursive-grouping tests, as in :func:`recursive_grouping`.
    feature_names : sequence of str, default=None
        Names of the observed variables, kept on the returned tree.

    Returns
    -------
    LatentTree
        Observed variables may be internal nodes.

    Examples
    --------
    >>> import numpy as np
    >>> D = np.array([[0, 2, 3, 3], [2, 0, 3, 3], [3, 3, 0, 2], [3, 3, 2, 0]], float)
    >>> clrg(D).to_newick()
    '(0,1,(2,3));'
    """
    threshold = check_real(threshold, "threshold", 0.0)
    return _chow_liu_local(
        D, lambda Dv: recursive_grouping(Dv, threshold=threshold), threshold, feature_names
    )


def clnj(D, threshold=1e-8, feature_names=None):
    """Chow-Liu neighbor joining: :func:`neighbor_joining` on each MST neighbourhood.

    Hidden nodes joined to an observed node by an edge shorter than ``threshold`` are merged
    into it, so observed variables can be internal nodes.

    Parameters
    ----------
    D : ndarray of shape (n, n)
        Symmetric tree-metric estimate over the observed variables, zero diagonal.
    threshold : float, default=1e-8
        Hidden nodes closer than this to an observed neighbour are merged into it
        (:func:`sample_threshold` gives the usual tolerance for ``N`` rows).
    feature_names : sequence of str, default=None
        Names of the observed variables, kept on the tree.

    Returns
    -------
    LatentTree

    Examples
    --------
    >>> import numpy as np
    >>> D = np.array([[0, 2, 3, 3], [2, 0, 3, 3], [3, 3, 0, 2], [3, 3, 2, 0]], float)
    >>> clnj(D).to_newick()
    '(0,1,(2,3));'
    """
    threshold = check_real(threshold, "threshold", 0.0)
    return _chow_liu_local(D, neighbor_joining, threshold, feature_names)


def _chow_liu_local(D, local, threshold, feature_names):
    D = check_distance_matrix(D)
    d = D.shape[0]
    if d <= 2:
        return LatentTree.star(d, feature_names=feature_names)
    adj = [set() for _ in range(d)]
    length = {}
    for u, v in spanning_tree_edges(D):
        _link(adj, length, u, v, D[u, v])
    # internal nodes, in order of decreasing spanning-tree degree
    internal = sorted((i for i in range(d) if len(adj[i]) > 1), key=lambda i: -len(adj[i]))
    for i in internal:
        V = [i] + sorted(adj[i])
        m = len(V)
        Dv = np.zeros((m, m))
        for a in range(m):
            for b in range(a + 1, m):
                Dv[a, b] = Dv[b, a] = _node_distance(D, adj, length, V[a], V[b])
        sub = local(Dv)
        sub_len = fit_edge_lengths(sub, Dv)
        for v in V[1:]:
            _unlink(adj, length, i, v)
        ids = V + [len(adj) + t for t in range(sub.n_nodes - m)]
        adj += [set() for _ in range(sub.n_nodes - m)]
        for (u, v), w in zip(sub.edges, sub_len):
            _link(adj, length, ids[u], ids[v], w)
        _merge_short_edges(adj, length, d, threshold, set(ids))
    edges = [(u, v) for u in range(len(adj)) for v in adj[u] if u < v]
    used = sorted({u for e in edges for u in e} | set(range(d)))
    new_id = {u: t for t, u in enumerate(used)}
    tree = LatentTree([(new_id[u], new_id[v]) for u, v in edges], d, feature_names=feature_names)
    return suppress_degree_two_hidden(tree, feature_names)


def _link(adj, length, u, v, w):
    adj[u].add(v)
    adj[v].add(u)
    length[(min(u, v), max(u, v))] = max(float(w), 0.0)


def _unlink(adj, length, u, v):
    adj[u].discard(v)
    adj[v].discard(u)
    length.pop((min(u, v), max(u, v)), None)


def _side(adj, length, a, away, d):
    """Observed nodes ``o`` with ``a`` on the path from ``o`` to ``away``, nearest first,
    with their path lengths to ``a`` (``a`` itself at 0 when it is observed).

    A shortest-path walk from ``a`` that stops once ``_N_NEAREST`` observed nodes are
    found and nothing left to visit is nearer (the cost grows with the neighbourhood
    walked, not with the tree).
    """
    found = []
    seen = {a, away}
    heap = [(0.0, a)]
    while heap:
        dist, u = heapq.heappop(heap)
        if len(found) >= _N_NEAREST and dist > found[_N_NEAREST - 1][0]:
            break
        if u < d:
            found.append((dist, u))
        for v in adj[u]:
            if v not in seen:
                seen.add(v)
                heapq.heappush(heap, (dist + length[(min(u, v), max(u, v))], v))
    found.sort()
    return found[:_N_NEAREST]


def _node_distance(D, adj, length, a, b):
    """Estimated distance between two nodes of the current tree.

    Observed pairs use ``D``. A hidden node ``a`` is represented by its nearest observed
    nodes ``o`` on the far side from ``b``: ``d(a, b) = mean_o [d(o, b) - d(o, a)]``, with
    ``d(o, a)`` the path length through already-fitted edges (additivity of the metric).
    """
    d = D.shape[0]
    if a < d and b < d:
        return D[a, b]
    first = _first_step(adj, a, b)
    Sa = [(0.0, a)] if a < d else _side(adj, length, a, first[0], d)
    Sb = [(0.0, b)] if b < d else _side(adj, length, b, first[1], d)
    vals = [D[o, p] - la - lb for la, o in Sa for lb, p in Sb]
    return max(float(np.mean(vals)), 0.0)


def _first_step(adj, a, b):
    """Neighbour of ``a`` towards ``b`` and neighbour of ``b`` towards ``a`` (the blocked
    directions of :func:`_side`); ``-1`` when ``a`` and ``b`` are not connected."""
    prev = {a: None}
    queue = [a]
    for u in queue:
        if u == b:
            break
        for v in adj[u]:
            if v not in prev:
                prev[v] = u
                queue.append(v)
    if b not in prev:
        return -1, -1
    path = [b]
    while prev[path[-1]] is not None:
        path.append(prev[path[-1]])
    path.reverse()
    return path[1], path[-2]


def fit_edge_lengths(tree, D):
    """Least-squares edge lengths of ``tree`` from distances ``D`` between its observed nodes.

    Solves ``sum_{e on path(i, j)} l_e = D_ij`` over all observed pairs (clipped at 0);
    exact when ``D`` is additive on ``tree``.

    Returns
    -------
    ndarray of shape (n_edges,), aligned with ``tree.edges``.
    """
    d = tree.n_observed
    edge_id = {(min(u, v), max(u, v)): t for t, (u, v) in enumerate(tree.edges)}
    rows, rhs = [], []
    for i in range(d):
        prev = tree.rooted_at(i).parent
        for j in range(i + 1, d):
            row = np.zeros(len(tree.edges))
            u = j
            while u != i:
                p = prev[u]
                row[edge_id[(min(u, p), max(u, p))]] = 1.0
                u = p
            rows.append(row)
            rhs.append(D[i, j])
    if not rows:
        return np.zeros(len(tree.edges))
    sol = np.linalg.lstsq(np.asarray(rows), np.asarray(rhs), rcond=None)[0]
    return np.maximum(sol, 0.0)


def _merge_short_edges(adj, length, d, threshold, nodes):
    """Merge hidden nodes into observed neighbours closer than ``threshold``, shortest
    edge first, until no such edge is left.

    Only edges at ``nodes`` (those just linked) are looked at: every other edge was
    checked when it was linked and has not changed since. A merge links the observed node
    to the hidden node's other neighbours, so it joins ``nodes``.
    """
    while True:
        short = [
            (length[(min(u, v), max(u, v))], min(u, v), max(u, v))
            for u in nodes
            for v in adj[u]
            if (u < d) != (v < d)
        ]
        short = [edge for edge in short if edge[0] <= threshold]
        if not short:
            return
        _, u, v = min(short)
        obs, hid = (u, v) if u < d else (v, u)
        w = length[(min(u, v), max(u, v))]
        for x in list(adj[hid]):
            if x != obs:
                w_x = length[(min(hid, x), max(hid, x))]
                _unlink(adj, length, hid, x)
                _link(adj, length, obs, x, w_x + w)
        _unlink(adj, length, hid, obs)
        nodes.add(obs)
