"""Recursive grouping (Choi, Tan, Anandkumar & Willsky, JMLR 2011, Algorithm 1).

Works on an additive tree metric between observed variables. For two active nodes i, j
let ``Phi_ijk = d(i, k) - d(j, k)`` over the other active nodes k:

* ``Phi_ijk`` constant over k  <=>  i and j belong to one family (siblings, or parent and child);
* ``Phi_ijk = d(i, j)`` for every k  <=>  j is the parent of i (so observed variables can
  end up at internal nodes);
* otherwise constant with ``|Phi| < d(i, j)``: siblings under a new hidden node ``h`` with
  ``d(i, h) = (d(i, j) + Phi_ij) / 2`` and ``d(h, k) = mean_i (d(i, k) - d(i, h))``.

Families are grouped, parents found or hidden nodes created, and the procedure repeats on
the new active set until at most two nodes remain.
"""

from __future__ import annotations

import numpy as np

from ..._engine.checks import check_real
from ..._engine.tree import LatentTree
from .distances import check_distance_matrix

__all__ = ["recursive_grouping"]


def recursive_grouping(D, threshold=1e-8, feature_names=None):
    """Learn a latent tree from distances by recursive grouping.

    Parameters
    ----------
    D : array-like of shape (d, d)
        Symmetric additive (or estimated) tree distances between observed variables.
    threshold : float, default=1e-8
        Tolerance of the family and parent tests: ``max_k Phi_ijk - min_k Phi_ijk`` and
        ``|mean_k Phi_ijk - d(i, j)|`` below it count as equal. Use ``0+`` for exact
        distances; for estimated distances it should scale like their standard error
        (the estimators derive it from the sample size).
    feature_names : sequence of str, default=None
        Names of the observed variables, kept on the returned tree.

    Returns
    -------
    LatentTree
        Hidden nodes are numbered after the observed ones; observed variables may be
        internal nodes.

    Examples
    --------
    >>> import numpy as np
    >>> D = np.array([[0, 2, 3, 3], [2, 0, 3, 3], [3, 3, 0, 2], [3, 3, 2, 0]], float)
    >>> recursive_grouping(D).to_newick()
    '(0,1,(2,3));'
    """
    threshold = check_real(threshold, "threshold", 0.0)
    D = check_distance_matrix(D)
    d = D.shape[0]
    if d <= 2:
        return LatentTree.star(d, feature_names=feature_names)
    size = 2 * d
    dist = np.full((size, size), np.nan)
    dist[:d, :d] = D
    active = list(range(d))
    edges = []
    nxt = d
    while len(active) > 2:
        groups, phi_mean = _families(dist, active, threshold)
        if all(len(g) == 1 for g in groups):
            groups = _force_pair(dist, active)
        new_active, created = [], []
        for group in groups:
            if len(group) == 1:
                new_active.append(group[0])
                continue
            parent = _find_parent(dist, group, phi_mean, threshold)
            if parent is not None:
                edges += [(parent, i) for i in group if i != parent]
                new_active.append(parent)
                continue
            h = nxt
            nxt += 1
            for i in group:
                others = [j for j in group if j != i]
                dih = np.mean([0.5 * (dist[i, j] + phi_mean[(i, j)]) for j in others])
                dist[i, h] = dist[h, i] = max(dih, 0.0)
            for k in active:
                if k not in group:
                    val = np.mean([dist[i, k] - dist[i, h] for i in group])
                    dist[h, k] = dist[k, h] = max(val, 0.0)
            edges += [(h, i) for i in group]
            created.append((h, group))
            new_active.append(h)
        for a, (h1, g1) in enumerate(created):
            for h2, g2 in created[a + 1 :]:
                val = np.mean([dist[i, j] - dist[i, h1] - dist[j, h2] for i in g1 for j in g2])
                dist[h1, h2] = dist[h2, h1] = max(val, 0.0)
        active = new_active
    if len(active) == 2:
        edges.append((active[0], active[1]))
    tree = LatentTree(edges, d, feature_names=feature_names)
    return suppress_degree_two_hidden(tree, feature_names)


def _families(dist, active, threshold):
    """Group the active nodes whose ``Phi_ijk`` is constant over the other nodes k."""
    idx = np.asarray(active)
    A = dist[np.ix_(idx, idx)]
    m = len(active)
    parent = list(range(m))

    def find(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    phi_mean = {}
    for a in range(m):
        phi = A[a][None, :] - A[a + 1 :]  # rows: j > a; Phi_ajk = d(a,k) - d(j,k)
        for off, row in enumerate(phi):
            b = a + 1 + off
            mask = np.ones(m, dtype=bool)
            mask[[a, b]] = False
            vals = row[mask]
            phi_mean[(active[a], active[b])] = vals.mean()
            phi_mean[(active[b], active[a])] = -vals.mean()
            if vals.max() - vals.min() <= threshold:
                parent[find(a)] = find(b)
    groups = {}
    for a in range(m):
        groups.setdefault(find(a), []).append(active[a])
    return list(groups.values()), phi_mean


def _force_pair(dist, active):
    """No family passed the test: join the closest pair so that the procedure advances."""
    idx = np.asarray(active)
    A = dist[np.ix_(idx, idx)].copy()
    np.fill_diagonal(A, np.inf)
    a, b = np.unravel_index(np.argmin(A), A.shape)
    pair = [active[a], active[b]]
    return [pair] + [[u] for u in active if u not in pair]


def _find_parent(dist, group, phi_mean, threshold):
    """A member j with ``Phi_ijk = d(i, j)`` for every other member i, if any."""
    best, best_err = None, np.inf
    for j in group:
        errs = [abs(phi_mean[(i, j)] - dist[i, j]) for i in group if i != j]
        err = max(errs)
        if err <= threshold and err < best_err:
            best, best_err = j, err
    return best


def suppress_degree_two_hidden(tree, feature_names):
    """Remove hidden nodes with exactly two neighbours (they carry no split)."""
    adj = [set(n) for n in tree.neighbors]
    d = tree.n_observed
    changed = True
    while changed:
        changed = False
        for h in range(d, tree.n_nodes):
            if len(adj[h]) == 2:
                u, v = adj[h]
                adj[u].discard(h)
                adj[v].discard(h)
                adj[u].add(v)
                adj[v].add(u)
                adj[h] = set()
                changed = True
    keep = [u for u in range(tree.n_nodes) if u < d or adj[u]]
    new_id = {u: i for i, u in enumerate(keep)}
    edges = {(min(new_id[u], new_id[v]), max(new_id[u], new_id[v])) for u in keep for v in adj[u]}
    return LatentTree(sorted(edges), d, feature_names=feature_names)
