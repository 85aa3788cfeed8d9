"""Tree search under balanced minimum evolution (functions first).

Distance-based joins are only a start: long distances are noisy (they saturate), and
one early wrong join is never repaired. Phylogenetics improves such a start by local
rearrangements under the *balanced minimum evolution* (BME) criterion (Desper & Gascuel,
"Fast and Accurate Phylogeny Reconstruction Algorithms Based on the Minimum-Evolution
Principle", Journal of Computational Biology, 2002; FastME: Lefort, Desper & Gascuel,
"FastME 2.0: A Comprehensive, Accurate, and Fast Distance-Based Phylogeny Inference
Program", Molecular Biology and Evolution, 2015): the length of a binary tree ``T``
estimated from a distance matrix ``D`` is Pauplin's

    L(T) = sum_{i < j} 2^(1 - tau_ij) D_ij,                  (tau_ij: edges on the path)

which weighs each distance by ``2^-tau``: a long (saturated, noisy) distance between far
apart leaves counts little. The tree of smallest ``L`` is a consistent estimate of the
topology for any tree metric, and BME is the criterion the neighbor-joining Q-criterion
optimises greedily.

* :func:`bionj` - BIONJ (Gascuel, "BIONJ: An Improved Version of the NJ Algorithm Based
  on a Simple Model of Sequence Data", Molecular Biology and Evolution, 1997): neighbor
  joining whose reduction step weighs the
  two joined nodes by the inverse variance of their distances (variance of an estimated
  spectral distance grows like ``exp(2 d)`` - the default), so noisy long distances
  contribute less to the new node's distances.
* :func:`bme_length` - ``L(T)`` above.
* :func:`minimum_evolution_search` - nearest-neighbour interchanges (NNI) under BME: for
  every internal edge with subtrees ``A, B`` on one side and ``C, D`` on the other, the
  swap of ``B`` and ``C`` changes the length by
  ``1/4 [(D_AC + D_BD) - (D_AB + D_CD)]`` where ``D_XY`` is the balanced average distance
  between two subtrees (leaves weighted by ``2^-depth``); the averages of all pairs of
  subtrees follow from two dynamic programmes over the ``4 d`` directed subtrees, so one
  round evaluates every NNI of the tree in ``O(d^2)``. Improving interchanges on edges
  that share no node are applied together when the exact length confirms the gain,
  otherwise the best one alone, until no interchange shortens the tree.
* subtree pruning and regrafting (SPR) under BME, the move of FastME 2.0 (Lefort et al.
  2015) that escapes NNI optima: prune the subtree ``S`` hanging at ``p`` (whose other
  neighbours root ``A`` and ``B``) and regraft it onto an edge whose two sides in the
  pruned tree are ``X`` and ``Y``; the length of the result is a constant plus

      (D_SX + D_SY - D_XY) / 2,

  and walking from ``p`` into ``A``, the side ``Y`` of each next edge is the previous
  ``Y`` and a sibling subtree joined at one node, whose averages are half-sums of averages
  the NNI step already holds - every regraft within ``spr_radius`` edges is scored without
  touching the distances again.
"""

from __future__ import annotations

import numpy as np

from ..._engine.checks import check_latent_tree
from ..._engine.tree import LatentTree
from .distances import check_distance_matrix
from .nj import _join

__all__ = [
    "bionj",
    "bme_length",
    "minimum_evolution_search",
    "spectral_variance",
    "binary_leaf_tree",
]


def spectral_variance(D):
    """Relative sampling variance of spectral (information) distances: ``exp(2 D)``
    (distances beyond 300 read as 300, so that the variances stay finite).

    A distance ``d = -log s`` estimated from ``N`` rows has variance about
    ``var(s) / s^2 ~ exp(2 d) / N`` (delta method): the longer the distance, the noisier.
    Only ratios matter to :func:`bionj`, so ``N`` is left out.

    Parameters
    ----------
    D : ndarray of shape (n, n)
        Distances.

    Returns
    -------
    ndarray of shape (n, n)
        ``exp(2 min(D, 300))``, the variances :func:`bionj` weighs by.
    """
    D = check_distance_matrix(D)
    return np.exp(2.0 * np.minimum(D, 300.0))


def bionj(D, V=None, feature_names=None):
    """BIONJ: neighbor joining with variance-weighted reductions (Gascuel, "BIONJ: An
    Improved Version of the NJ Algorithm Based on a Simple Model of Sequence Data",
    Molecular Biology and Evolution, 1997).

    Joins the pair ``i, j`` of minimum Q-criterion as neighbor joining does, with branch
    lengths ``d_iu = D_ij / 2 + (R_i - R_j) / (2 (r - 2))`` and ``d_ju = D_ij - d_iu``;
    the new node's distances are ``D_uk = l (D_ik - d_iu) + (1 - l)(D_jk - d_ju)`` with the
    weight ``l = 1/2 + sum_k (V_jk - V_ik) / (2 (r - 2) V_ij)`` (clipped to [0, 1]) that
    minimises their variance, and ``V_uk = l V_ik + (1 - l) V_jk - l (1 - l) V_ij``
    (Gascuel 1997; ``l = 1/2`` is neighbor joining's reduction).

    Parameters
    ----------
    D : array-like of shape (d, d)
    V : array-like of shape (d, d), default=None
        Variances of the distances (``None``: :func:`spectral_variance` of ``D``).
    feature_names : sequence of str, default=None
        Names of the observed variables, kept on the returned tree.

    Returns
    -------
    LatentTree
        Binary, every observed variable at a leaf.

    Examples
    --------
    >>> import numpy as np
    >>> D = np.array([[0, 2, 5, 5], [2, 0, 5, 5], [5, 5, 0, 2], [5, 5, 2, 0]], float)
    >>> bionj(D).to_newick()
    '(0,1,(2,3));'
    """
    D = check_distance_matrix(D)
    d = D.shape[0]
    if d <= 3:
        return LatentTree.star(d, feature_names=feature_names)
    if V is None:
        V = spectral_variance(D)
    else:
        V = check_distance_matrix(V, "V", distances=False)
        if V.shape != D.shape or np.any(V < 0):
            raise ValueError(
                f"V must hold a non-negative variance for each distance of D {D.shape}, "
                f"got shape {V.shape}."
            )
    return LatentTree(_join(D, V), d, feature_names=feature_names)


def bme_length(tree, D):
    """Balanced minimum-evolution length ``sum_{i<j} 2^(1 - tau_ij) D_ij`` (Pauplin).

    Parameters
    ----------
    tree : LatentTree
        A tree whose observed variables are its leaves (:func:`binary_leaf_tree`).
    D : ndarray of shape (n_observed, n_observed)
        Distances between the observed variables.

    Returns
    -------
    float
    """
    check_latent_tree(tree)
    D = check_distance_matrix(D)
    d = tree.n_observed
    if D.shape[0] != d:
        raise ValueError(f"D is {D.shape[0]} x {D.shape[0]}; the tree has {d} observed nodes.")
    tau = tree.hop_distances()[:d, :d].astype(float)
    W = np.exp2(1.0 - tau)
    np.fill_diagonal(W, 0.0)
    return float(0.5 * np.sum(W * D))


class _Subtrees:
    """Directed subtrees of a binary tree and the balanced averages a move reads.

    Every edge ``(p, c)`` in both directions is a subtree (``c`` and everything beyond it
    from ``p``). With the tree rooted at its first hidden node, the subtree of an edge
    pointing away from the root ("down") holds a contiguous range of the leaves in
    depth-first order, leaf ``i`` weighted ``2^-(depth_i - depth_c)``; two disjoint
    subtrees never both point up (they would share the root). The table ``M[e, i]`` of
    balanced average distances from leaf ``i`` to every subtree ``e`` takes one vector step
    per level (children before parents, ``O(d)`` per subtree), and the average between two
    disjoint subtrees is the weighted sum of ``M`` over the leaves of the down one (the
    smaller when both are):

        D_XY = sum_{i in X} 2^-(depth_i - depth_X) M[Y, i].

    Memory is ``4 d x d`` floats (the dense table of all pairs of subtrees, ``16 d^2``,
    needs 2 GB at 4,096 leaves), and only the pairs a move reads are summed.
    """

    _CHUNK = 1 << 22  # leaf terms summed at once (bounds the temporary arrays)

    def __init__(self, adjacency, d, D, out=None):
        n_nodes = len(adjacency)
        heads, tails, index = [], [], {}
        for p, nbrs in enumerate(adjacency):
            for c in nbrs:
                index[(p, c)] = len(heads)
                tails.append(p)
                heads.append(c)
        n_edges = len(heads)
        # root at the first hidden node: parents, preorder, depths, leaf ranges
        root = d
        parent = np.full(n_nodes, -1)
        depth = np.zeros(n_nodes, dtype=np.int64)
        preorder, stack = [], [root]
        while stack:
            u = stack.pop()
            preorder.append(u)
            for c in adjacency[u]:
                if c != parent[u]:
                    parent[c] = u
                    depth[c] = depth[u] + 1
                    stack.append(c)
        leaf_order = np.array([u for u in preorder if u < d])
        position = np.empty(d, dtype=np.int64)
        position[leaf_order] = np.arange(d)
        lo = np.full(n_nodes, d)
        hi = np.zeros(n_nodes, dtype=np.int64)
        lo[:d], hi[:d] = position, position + 1
        height = np.zeros(n_nodes, dtype=np.int64)
        for u in reversed(preorder):  # children before parents
            p = parent[u]
            if p >= 0:
                lo[p] = min(lo[p], lo[u])
                hi[p] = max(hi[p], hi[u])
                height[p] = max(height[p], height[u] + 1)
        tails_a, heads_a = np.asarray(tails), np.asarray(heads)
        down = parent[heads_a] == tails_a
        children = np.full((n_edges, 2), -1, dtype=np.int64)
        for e in range(n_edges):
            p, c = tails[e], heads[e]
            if c >= d:
                children[e] = [index[(c, x)] for x in adjacency[c] if x != p]
        # levels: down subtrees by height (postorder), then up subtrees by depth (preorder)
        down_ids = np.flatnonzero(down & (heads_a >= d))
        up_ids = np.flatnonzero(~down)
        levels = _group(down_ids, height[heads_a[down_ids]])
        levels += _group(up_ids, depth[tails_a[up_ids]])
        # a buffer of an earlier round is reused: a fresh 4 d x d table costs page faults
        # on first touch (a third of the time at 4,096 leaves)
        M = out if out is not None and out.shape == (n_edges, d) else np.empty((n_edges, d))
        leaves = np.flatnonzero(heads_a < d)
        M[leaves] = D[heads_a[leaves]]
        for level in levels:
            M[level] = 0.5 * (M[children[level, 0]] + M[children[level, 1]])
        self.index, self.d, self.M = index, d, M
        self.down, self.leaf_order, self.leaf_depth = down, leaf_order, depth[leaf_order]
        self.lo, self.hi, self.head_depth = lo[heads_a], hi[heads_a], depth[heads_a]
        self.size = self.hi - self.lo

    def averages(self, X, Y):
        """Balanced average distances ``D_XY`` of disjoint subtree pairs (arrays of ids)."""
        X, Y = np.asarray(X, dtype=np.int64), np.asarray(Y, dtype=np.int64)
        if X.size == 0:
            return np.zeros(0)
        big = np.iinfo(np.int64).max
        size_x = np.where(self.down[X], self.size[X], big)
        size_y = np.where(self.down[Y], self.size[Y], big)
        swap = size_y < size_x
        X, Y = np.where(swap, Y, X), np.where(swap, X, Y)
        n = self.size[X]
        out = np.empty(len(X))
        ends = np.cumsum(n)
        start = 0
        while start < len(X):
            stop = int(np.searchsorted(ends, ends[start] - n[start] + self._CHUNK, "right"))
            stop = max(stop, start + 1)
            sl = slice(start, stop)
            nn = n[sl]
            pair = np.repeat(np.arange(stop - start), nn)
            offset = np.arange(int(nn.sum())) - np.repeat(np.cumsum(nn) - nn, nn)
            t = self.lo[X[sl]][pair] + offset
            w = np.exp2(self.head_depth[X[sl]][pair] - self.leaf_depth[t])
            values = self.M[Y[sl][pair], self.leaf_order[t]] * w
            out[sl] = np.bincount(pair, weights=values, minlength=stop - start)
            start = stop
        return out

    def length(self, adjacency):
        """BME length as the sum of balanced edge lengths (Desper & Gascuel 2002):
        ``(D_AC + D_AD + D_BC + D_BD) / 4 - (D_AB + D_CD) / 2`` for an internal edge,
        ``(D_iB + D_iC - D_BC) / 2`` for the edge of leaf ``i``."""
        index, d = self.index, self.d
        leaf_edges, internal = [], []
        for u in range(d, len(adjacency)):
            nbrs = adjacency[u]
            for v in nbrs:
                if v < d:  # the edge of leaf v (u is its internal neighbour)
                    b, c = [x for x in nbrs if x != v]
                    leaf_edges.append((index[(u, v)], index[(u, b)], index[(u, c)]))
                elif u < v:
                    internal.append(_quartet(adjacency, index, u, v))
        total = 0.0
        if leaf_edges:
            i, B, C = np.array(leaf_edges).T
            total += 0.5 * np.sum(
                self.averages(np.r_[i, i], np.r_[B, C]).reshape(2, -1).sum(0) - self.averages(B, C)
            )
        if internal:
            A, B, C, E = np.array(internal).T
            cross = self.averages(np.r_[A, A, B, B], np.r_[C, E, C, E])
            same = self.averages(np.r_[A, C], np.r_[B, E])
            total += 0.25 * cross.sum() - 0.5 * same.sum()
        return float(total)


def _group(ids, keys):
    """``ids`` split by ``keys``, in increasing key order."""
    if ids.size == 0:
        return []
    order = np.argsort(keys, kind="stable")
    ids, keys = ids[order], keys[order]
    cuts = np.flatnonzero(np.diff(keys)) + 1
    return np.split(ids, cuts)


def _quartet(adjacency, index, u, v):
    """Subtrees ``A, B`` at ``u`` and ``C, E`` at ``v`` around the internal edge ``(u, v)``."""
    a, b = [x for x in adjacency[u] if x != v]
    c, e = [x for x in adjacency[v] if x != u]
    return index[(u, a)], index[(u, b)], index[(v, c)], index[(v, e)]


def _adjacency(tree):
    return [list(nb) for nb in tree.neighbors]


def _nni_gains(adjacency, d, sub, tol=-np.inf):
    """Every NNI of the tree with its length gain (positive: shorter), above ``tol``."""
    edges = [(u, v) for u in range(d, len(adjacency)) for v in adjacency[u] if v > u and v >= d]
    if not edges:
        return []
    A, B, C, E = np.array([_quartet(adjacency, sub.index, u, v) for u, v in edges]).T
    AB, CE, AC, BE, AE, BC = sub.averages(np.r_[A, C, A, B, A, B], np.r_[B, E, C, E, E, C]).reshape(
        6, -1
    )
    current = AB + CE
    moves = []
    # swap b <-> c (AC|BE) and b <-> e (AE|BC)
    for alt, which in ((AC + BE, 0), (AE + BC, 1)):
        gain = 0.25 * (current - alt)
        for t in np.flatnonzero(gain > tol):
            u, v = edges[t]
            b = [x for x in adjacency[u] if x != v][1]
            other = [x for x in adjacency[v] if x != u][which]
            moves.append((float(gain[t]), u, v, b, other))
    return moves


def _apply_nni(adjacency, u, v, b, c):
    """Swap the subtree ``b`` (a neighbour of ``u``) with ``c`` (a neighbour of ``v``)."""
    adjacency[u][adjacency[u].index(b)] = c
    adjacency[v][adjacency[v].index(c)] = b
    adjacency[b][adjacency[b].index(u)] = v
    adjacency[c][adjacency[c].index(v)] = u


def _tree(adjacency, d, feature_names=None):
    edges = [(u, v) for u, nb in enumerate(adjacency) for v in nb if u < v]
    return LatentTree(edges, d, feature_names=feature_names)


def _spr_moves(adjacency, d, sub, radius=4):
    """Improving subtree prune-and-regraft moves within ``radius`` edges, best first.

    Parameters
    ----------
    adjacency : list of lists
        Neighbours of every node of a binary tree (observed nodes ``0..d-1`` at leaves).
    d : int
        Observed variables.
    sub : _Subtrees
        Balanced averages of the directed subtrees of this tree.
    radius : int, default=4
        Farthest regraft, in edges from the pruned subtree's attachment.

    Returns
    -------
    list of tuple
        ``(gain, p, s, x, c, path)``: pruning the subtree ``s`` hanging at ``p`` and
        regrafting it onto the edge ``(x, c)`` shortens the tree by ``gain > 0``; ``path``
        holds the nodes walked from ``p`` to ``x``.

    Notes
    -----
    The side ``Y`` of the regraft edge ``(c, z)`` is a weighted set of subtrees (the
    sibling of ``z`` at weight 1/2, then the previous ``Y`` halved), so the gain
    ``here - (D_SZ + D_SY - D_ZY) / 2`` is a weighted sum of subtree averages: the walk
    lists the pairs first and all averages are summed in one batch.
    """
    index = sub.index
    prunes = []  # (S, A, B) of every pruned subtree
    moves = []  # (prune id, Z, p, s, c, z, path)
    elem_move, elem_y, elem_w = [], [], []
    for p in range(d, len(adjacency)):
        for s in adjacency[p]:
            S = index[(p, s)]
            a, b = [x for x in adjacency[p] if x != s]
            A, B = index[(p, a)], index[(p, b)]
            prune = len(prunes)
            prunes.append((S, A, B))
            for start, other in ((a, B), (b, A)):
                stack = [(p, start, (other,), (1.0,), (p,))]
                while stack:
                    x, c, y_idx, y_w, path = stack.pop()
                    if len(path) > radius or c < d:
                        continue
                    path = path + (c,)
                    kids = [z for z in adjacency[c] if z != x]
                    for z, sib in ((kids[0], kids[1]), (kids[1], kids[0])):
                        Z, Sib = index[(c, z)], index[(c, sib)]
                        y_z = (Sib,) + y_idx
                        w_z = (0.5,) + tuple(0.5 * v for v in y_w)
                        m = len(moves)
                        moves.append((prune, Z, p, s, c, z, path))
                        elem_move += [m] * len(y_z)
                        elem_y += y_z
                        elem_w += w_z
                        stack.append((c, z, y_z, w_z, path))
    if not moves:
        return []
    S, A, B = np.array(prunes).T
    SA, SB, AB = sub.averages(np.r_[S, S, A], np.r_[A, B, B]).reshape(3, -1)
    here = 0.5 * (SA + SB - AB)
    prune = np.array([m[0] for m in moves])
    Z = np.array([m[1] for m in moves])
    elem_move = np.array(elem_move)
    elem_y, elem_w = np.array(elem_y), np.array(elem_w)
    Sm = S[prune]
    SZ = sub.averages(Sm, Z)
    SY, ZY = sub.averages(np.r_[Sm[elem_move], Z[elem_move]], np.r_[elem_y, elem_y]).reshape(2, -1)
    n = len(moves)
    d_sy = np.bincount(elem_move, weights=elem_w * SY, minlength=n)
    d_zy = np.bincount(elem_move, weights=elem_w * ZY, minlength=n)
    gain = here[prune] - 0.5 * (SZ + d_sy - d_zy)
    found = [(float(gain[t]), *moves[t][2:]) for t in np.flatnonzero(gain > 0)]
    found.sort(reverse=True)
    return found


def _apply_spr(adjacency, p, s, x, c):
    """Prune the subtree ``s`` at ``p`` and regraft it (with ``p``) onto the edge ``(x, c)``."""
    a, b = [z for z in adjacency[p] if z != s]
    adjacency[a][adjacency[a].index(p)] = b
    adjacency[b][adjacency[b].index(p)] = a
    adjacency[x][adjacency[x].index(c)] = p
    adjacency[c][adjacency[c].index(x)] = p
    adjacency[p] = [s, x, c]


def minimum_evolution_search(
    D,
    start=None,
    max_rounds=None,
    tol=1e-12,
    spr_radius=4,
    verbose=0,
    feature_names=None,
):
    """Improve a tree by NNIs and SPRs under balanced minimum evolution (module docstring).

    Rounds of nearest-neighbour interchanges run until none shortens the tree; then the
    best subtree prune-and-regraft moves within ``spr_radius`` edges are applied (those on
    disjoint paths together when the exact length confirms the gain), and the interchanges
    resume, until neither kind of move shortens the tree.

    Parameters
    ----------
    D : array-like of shape (d, d)
        Distances between the observed variables (a tree metric up to noise).
    start : LatentTree, default=None
        A binary tree with every observed variable at a leaf (``None``: :func:`bionj`).
    max_rounds : int, default=None
        Rounds of moves (``None``: ``4 d``); every round applies at least one.
    tol : float, default=1e-12
        Smallest length gain that counts.
    spr_radius : int, default=4
        Farthest regraft in edges (0: interchanges only).
    verbose : int, default=0
        Print the length after every round.
    feature_names : list of str, default=None
        Names of the observed variables (``None``: those of ``start``, if any).

    Returns
    -------
    LatentTree
        A tree no single NNI, nor SPR within ``spr_radius``, shortens (unless
        ``max_rounds`` ran out).

    Raises
    ------
    ValueError
        If ``start`` has another number of observed variables than ``D`` has rows.

    Examples
    --------
    >>> import numpy as np
    >>> from ltm_sklearn.tree import LatentTree
    >>> D = np.array([[0, 2, 5, 5], [2, 0, 5, 5], [5, 5, 0, 2], [5, 5, 2, 0]], float)
    >>> wrong = LatentTree([(0, 4), (2, 4), (1, 5), (3, 5), (4, 5)], 4)
    >>> minimum_evolution_search(D, wrong).to_newick()
    '(0,1,(2,3));'
    """
    D = check_distance_matrix(D)
    d = D.shape[0]
    if start is None:
        start = bionj(D, feature_names=feature_names)
    elif check_latent_tree(start, "start").n_observed != d:
        raise ValueError(
            f"start has {start.n_observed} observed nodes but D is {d} x {d}: the start "
            "tree's leaves must be D's rows."
        )
    if feature_names is None:
        feature_names = start.feature_names
    if d <= 3:
        return start
    _check_binary(start)
    adjacency = _adjacency(start)
    max_rounds = 4 * d if max_rounds is None else int(max_rounds)
    sub = _Subtrees(adjacency, d, D)
    spare = None  # the table of the previous round, reused by the next
    length = sub.length(adjacency)
    if verbose:
        print(f"minimum_evolution_search: {d} leaves, start length {length:.6f}")
    for round_ in range(max_rounds):
        moves = _nni_gains(adjacency, d, sub, tol)
        kind = "NNI"
        if moves:
            moves.sort(reverse=True)
            apply = _apply_nni
            batch = _disjoint(moves, adjacency, _nni_nodes)
        elif spr_radius > 0:
            moves = [m for m in _spr_moves(adjacency, d, sub, spr_radius) if m[0] > tol]
            if not moves:
                break
            kind = "SPR"
            apply = _apply_spr
            batch = _disjoint(moves, adjacency, _spr_nodes)
        else:
            break
        # improving moves that share no node, applied together ...
        trial = [list(nb) for nb in adjacency]
        for move in batch:
            apply(trial, *move[1:5])
        trial_sub = _Subtrees(trial, d, D, out=spare)
        trial_length = trial_sub.length(trial)
        if len(batch) > 1 and trial_length >= length - tol:
            # ... or the best one alone when they interfere
            batch = batch[:1]
            trial = [list(nb) for nb in adjacency]
            apply(trial, *moves[0][1:5])
            trial_sub = _Subtrees(trial, d, D, out=trial_sub.M)
            trial_length = trial_sub.length(trial)
        spare = sub.M
        adjacency, sub, length = trial, trial_sub, trial_length
        if verbose:
            print(f"  round {round_ + 1}: {len(batch)} {kind} move(s), length {length:.6f}")
    return _tree(adjacency, d, feature_names)


def _disjoint(moves, adjacency, touched):
    """Moves (best first) whose touched nodes overlap no earlier chosen move's."""
    used, batch = set(), []
    for move in moves:
        nodes = touched(adjacency, move)
        if used.isdisjoint(nodes):
            batch.append(move)
            used.update(nodes)
    return batch


def _nni_nodes(adjacency, move):
    """The two ends of an interchange's edge and their neighbours."""
    _gain, u, v = move[:3]
    return adjacency[u] + adjacency[v] + [u, v]


def _spr_nodes(adjacency, move):
    """The pruned node, the regraft edge, the path between them and their neighbours."""
    _gain, p, s, x, c, path = move
    return [p, s, x, c, *path] + adjacency[p] + adjacency[x] + adjacency[c]


def binary_leaf_tree(tree):
    """An equivalent binary tree with every observed variable at a leaf.

    Observed internal nodes hand their edges to a new hidden node and hang below it;
    hidden nodes with more than three neighbours are split into chains of degree-3 nodes
    (zero-length edges, an arbitrary resolution the search can rearrange); hidden nodes
    with two neighbours are removed.

    Parameters
    ----------
    tree : LatentTree

    Returns
    -------
    LatentTree
        A new tree with every observed variable a leaf and every hidden node of degree
        three; ``tree`` itself when it has at most three observed variables (whatever its
        shape: no search rearranges so few).
    """
    if not isinstance(tree, LatentTree):
        raise TypeError(
            f"binary_leaf_tree takes a LatentTree, got {type(tree).__name__}: build one with "
            "LatentTree(edges, n_observed)."
        )
    d = tree.n_observed
    if d <= 3:
        return tree
    adjacency = [set(nb) for nb in tree.neighbors]

    def new_node():
        adjacency.append(set())
        return len(adjacency) - 1

    for o in range(d):
        if len(adjacency[o]) > 1:
            h = new_node()
            for x in list(adjacency[o]):
                adjacency[x].discard(o)
                adjacency[x].add(h)
                adjacency[h].add(x)
            adjacency[o] = {h}
            adjacency[h].add(o)
    changed = True
    while changed:
        changed = False
        for h in range(d, len(adjacency)):
            nb = adjacency[h]
            if len(nb) == 2:  # suppress
                a, b = nb
                adjacency[a].discard(h)
                adjacency[b].discard(h)
                adjacency[a].add(b)
                adjacency[b].add(a)
                adjacency[h] = set()
                changed = True
            elif len(nb) > 3:  # split off all but two neighbours
                keep = sorted(nb)[:2]
                g = new_node()
                for x in sorted(nb)[2:]:
                    adjacency[x].discard(h)
                    adjacency[x].add(g)
                    adjacency[g].add(x)
                adjacency[h] = set(keep) | {g}
                adjacency[g].add(h)
                changed = True
    used = [u for u in range(len(adjacency)) if u < d or adjacency[u]]
    new_id = {u: t for t, u in enumerate(used)}
    edges = [(new_id[u], new_id[v]) for u in used for v in adjacency[u] if u < v]
    return LatentTree(edges, d, feature_names=tree.feature_names)


def _check_binary(tree):
    d = tree.n_observed
    bad_obs = [u for u in range(d) if tree.degree(u) != 1]
    bad_hid = [u for u in tree.hidden_nodes if tree.degree(u) != 3]
    if bad_obs or bad_hid:
        raise ValueError(
            "minimum_evolution_search needs a binary tree with every observed variable at a "
            f"leaf (observed nodes {bad_obs[:5]} are internal, hidden nodes {bad_hid[:5]} "
            "do not have degree 3); start from neighbor_joining or bionj."
        )
