"""Latent trees with a hidden node over every column or group of columns, linked along the
Chow-Liu tree.

A *hidden Chow-Liu tree* (HCLT; Liu & Van den Broeck, "Tractable regularization of
probabilistic circuits", NeurIPS 2021, section 4) puts one hidden node above each column
and links the hidden nodes along the Chow-Liu tree of the columns: the dependence between
two columns flows through their hidden nodes, which, with enough states, carry more than
the one observed bit a plain Chow-Liu edge can. :func:`grouped_chow_liu` contracts the
strongest Chow-Liu edges first, so that columns that depend most on each other share one
hidden node (a local latent class model), and links the groups along the contracted
Chow-Liu tree - fewer hidden nodes, each over a group of strongly dependent columns.
"""

from __future__ import annotations

import numpy as np

from ..._engine.checks import check_whole
from ..._engine.tree import LatentTree
from .chow_liu import spanning_tree_edges
from .distances import check_distance_matrix

__all__ = ["hidden_chow_liu", "grouped_chow_liu"]


def _chow_liu_edges(mutual_info):
    M = check_distance_matrix(mutual_info, "mutual_info", distances=False)
    if M.shape[0] == 1:
        return M, []
    return M, spanning_tree_edges(M.max() - M)


def hidden_chow_liu(mutual_info, feature_names=None):
    """Hidden Chow-Liu tree: a hidden node per column, linked along the Chow-Liu tree.

    Column ``j`` hangs from hidden node ``d + j``; hidden nodes ``d + i`` and ``d + j``
    are linked when columns ``i`` and ``j`` are in the Chow-Liu tree (the maximum spanning
    tree of the mutual information).

    Parameters
    ----------
    mutual_info : array-like of shape (d, d)
        Pairwise mutual information (:func:`~ltm_sklearn.structure.mutual_information`).
    feature_names : list of str, default=None

    Returns
    -------
    LatentTree

    Examples
    --------
    >>> import numpy as np
    >>> M = np.array([[0, 0.5, 0.1], [0.5, 0, 0.3], [0.1, 0.3, 0]])
    >>> hidden_chow_liu(M).edges
    [(0, 3), (1, 4), (2, 5), (3, 4), (4, 5)]
    """
    return grouped_chow_liu(mutual_info, max_group=1, feature_names=feature_names)


def grouped_chow_liu(mutual_info, max_group=2, feature_names=None):
    """Hidden nodes over groups of strongly dependent columns, linked along the Chow-Liu
    tree.

    The Chow-Liu edges are visited by decreasing mutual information; an edge merges the
    groups of its two columns while the merged group has at most ``max_group`` columns.
    Contracting edges of a tree leaves a tree: the groups, linked by the remaining
    Chow-Liu edges, are the hidden nodes of the result, each with its columns as leaves.
    ``max_group=1`` is :func:`hidden_chow_liu`.

    Parameters
    ----------
    mutual_info : array-like of shape (d, d)
    max_group : int, default=2
        Largest number of columns under one hidden node.
    feature_names : list of str, default=None

    Returns
    -------
    LatentTree
        Hidden nodes ``d, d + 1, ...`` in the order of their smallest column.

    Examples
    --------
    >>> import numpy as np
    >>> M = np.array([[0, 0.9, 0.1, 0.1], [0.9, 0, 0.3, 0.1], [0.1, 0.3, 0, 0.8],
    ...               [0.1, 0.1, 0.8, 0]])
    >>> grouped_chow_liu(M).edges
    [(0, 4), (1, 4), (2, 5), (3, 5), (4, 5)]
    """
    max_group = check_whole(max_group, "max_group", 1)
    M, edges = _chow_liu_edges(mutual_info)
    d = M.shape[0]
    group = np.arange(d)  # union-find parents
    size = np.ones(d, dtype=int)

    def find(i):
        while group[i] != i:
            group[i] = group[group[i]]
            i = group[i]
        return i

    for i, j in sorted(edges, key=lambda e: (-M[e[0], e[1]], e)):
        a, b = find(i), find(j)
        if a != b and size[a] + size[b] <= max_group:
            small, large = (a, b) if a > b else (b, a)
            group[small] = large
            size[large] += size[small]
    roots = [find(j) for j in range(d)]
    order = {}
    for j in range(d):  # hidden ids follow the smallest column of each group
        order.setdefault(roots[j], d + len(order))
    hidden = [order[r] for r in roots]
    out = [(j, hidden[j]) for j in range(d)]
    links = {tuple(sorted((hidden[i], hidden[j]))) for i, j in edges if hidden[i] != hidden[j]}
    out += sorted(links)
    return LatentTree(out, d, feature_names=feature_names)
