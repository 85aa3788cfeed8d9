"""Tree metrics between observed variables."""

from __future__ import annotations

import numpy as np

__all__ = ["spectral_distance"]

_TINY = 1e-300


def spectral_distance(moments, n_hidden_states):
    """Spectral tree metric of papers/002 eq. (12) on one-hot features.

    ``d(i, j) = -log pdet_k P[X_i, X_j] + (log pdet_k diag P[X_i] + log pdet_k diag P[X_j]) / 2``
    where ``pdet_k`` is the product of the top ``k = min(k', n_i, n_j)`` singular values.
    On one-hot features this is the information distance of Choi et al. (2011), additive
    along the paths of a latent tree whose hidden nodes have ``k'`` states.

    Parameters
    ----------
    moments : MomentEstimator
    n_hidden_states : int

    Returns
    -------
    ndarray of shape (n_features, n_features)
    """
    singles = moments.singletons()
    d = len(singles)
    pairs = moments.all_pairs()
    D = np.zeros((d, d))
    for (i, j), P in pairs.items():
        k = min(n_hidden_states, P.shape[0], P.shape[1])
        s = np.linalg.svd(P, compute_uv=False)[:k]
        si = np.sort(singles[i])[::-1][:k]
        sj = np.sort(singles[j])[::-1][:k]
        val = -np.sum(np.log(np.maximum(s, _TINY)))
        val += 0.5 * (np.sum(np.log(np.maximum(si, _TINY))) + np.sum(np.log(np.maximum(sj, _TINY))))
        D[i, j] = D[j, i] = max(val, 0.0)
    return D
