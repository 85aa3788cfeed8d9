"""Neighbor joining (Saitou & Nei 1987) returning a latent tree."""

from __future__ import annotations

import numpy as np

from ..tree import LatentTree

__all__ = ["neighbor_joining"]


def neighbor_joining(D, feature_names=None):
    """Reconstruct a binary latent tree from a distance matrix between observed variables.

    Every join creates a hidden node; observed variables end up at the leaves. With fewer
    than four variables the result is a star around one hidden node.

    Parameters
    ----------
    D : array-like of shape (d, d)
        Symmetric distances.

    Returns
    -------
    LatentTree

    Examples
    --------
    >>> import numpy as np
    >>> D = np.array([[0, 2, 5, 5], [2, 0, 5, 5], [5, 5, 0, 2], [5, 5, 2, 0]], float)
    >>> neighbor_joining(D).to_newick()
    '(0,1,(2,3));'
    """
    D = np.array(D, dtype=float)
    if D.ndim != 2 or D.shape[0] != D.shape[1]:
        raise ValueError(f"D must be a square matrix, got shape {D.shape}.")
    if not np.all(np.isfinite(D)):
        raise ValueError("D holds non-finite distances.")
    d = D.shape[0]
    if d <= 3:
        return LatentTree([(i, d) for i in range(d)], d, feature_names=feature_names)
    active = list(range(d))
    nxt = d
    edges = []
    while len(active) > 3:
        m = len(active)
        r = D.sum(axis=1)
        Q = (m - 2) * D - r[:, None] - r[None, :]
        np.fill_diagonal(Q, np.inf)
        i, j = np.unravel_index(np.argmin(Q), Q.shape)
        if i > j:
            i, j = j, i
        u = nxt
        nxt += 1
        edges += [(active[i], u), (active[j], u)]
        new_row = 0.5 * (D[i] + D[j] - D[i, j])
        keep = [t for t in range(m) if t not in (i, j)]
        D = np.vstack(
            [
                np.hstack([D[np.ix_(keep, keep)], new_row[keep][:, None]]),
                np.hstack([new_row[keep], [0.0]])[None, :],
            ]
        )
        active = [active[t] for t in keep] + [u]
    u = nxt
    edges += [(a, u) for a in active]
    return LatentTree(edges, d, feature_names=feature_names)
