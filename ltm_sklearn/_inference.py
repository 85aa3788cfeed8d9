"""Message passing with explicit conditional probability tables (CPTs).

One upward pass (papers/003 eq. (9): ``m_i(x_parent) = sum_x P(x | x_parent) prod_j m_j(x)``),
vectorised over rows, with per-node rescaling so that trees with hundreds of leaves do
not underflow. Missing entries (code ``-1``) send an all-ones message; unseen categories
(code ``-2``) send a constant small likelihood ``unseen_proba``.
"""

from __future__ import annotations

import numpy as np

MISSING = -1
UNSEEN = -2


def leaf_evidence(codes_j, n_states, unseen_proba=0.0):
    """One-hot evidence rows, ``(N, n_states)``; missing rows are all ones."""
    n = codes_j.shape[0]
    ev = np.zeros((n, n_states))
    seen = codes_j >= 0
    ev[np.flatnonzero(seen), codes_j[seen]] = 1.0
    ev[codes_j == MISSING] = 1.0
    ev[codes_j == UNSEEN] = unseen_proba
    return ev


def cpt_log_likelihood(tree, root_marginal, cpts, codes, unseen_proba=None):
    """Exact ``log P(x_observed)`` of each row under a latent tree with explicit CPTs.

    Parameters
    ----------
    tree : LatentTree
        Rooted tree; observed nodes may be internal.
    root_marginal : ndarray of shape (k_root,)
    cpts : dict node -> ndarray of shape (n_states[parent], n_states[node])
        Row-stochastic ``P(X_node | X_parent)`` for every non-root node.
    codes : ndarray of shape (n_observed, N)
        Category codes per observed column, ``-1`` for missing, ``-2`` for unseen.
    unseen_proba : array-like of shape (n_observed,), default=None
        Likelihood ``P(unseen value | parent)`` used for code ``-2``.

    Returns
    -------
    ndarray of shape (N,)
    """
    n = codes.shape[1]
    log_scale = np.zeros(n)
    messages = {}

    def belief(u, size):
        # product of the children's messages and, at an observed node, its evidence
        ev = _product(messages, tree.children[u], n, size)
        if u < tree.n_observed:
            up = 0.0 if unseen_proba is None else unseen_proba[u]
            ev *= leaf_evidence(codes[u], size, up)
        return ev

    for u in tree.postorder:
        if u == tree.root:
            continue
        cpt = cpts[u]
        msg, log_scale = _rescale(belief(u, cpt.shape[1]) @ cpt.T, log_scale)
        messages[u] = msg
    total = belief(tree.root, root_marginal.shape[0]) @ root_marginal
    with np.errstate(divide="ignore"):
        return np.log(total) + log_scale


def _product(messages, children, n, size):
    out = np.ones((n, size))
    for c in children:
        out *= messages.pop(c)
    return out


def _rescale(msg, log_scale):
    s = msg @ np.ones(msg.shape[1])  # messages are non-negative: row sums, via BLAS
    s = np.where(s > 0, s, 1.0)
    return msg / s[:, None], log_scale + np.log(s)
