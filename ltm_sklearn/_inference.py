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


def observed_evidence(tree, n_states, codes, unseen_proba=None):
    """One-hot evidence ``(N, n_u)`` of every observed node (all ones where missing)."""
    ev = {}
    for u in range(tree.n_observed):
        miss = 0.0 if unseen_proba is None else unseen_proba[u]
        ev[u] = leaf_evidence(codes[u], n_states[u], miss)
    return ev


def node_sizes(tree, root_marginal, cpts):
    """Number of states of every node, read from the CPT shapes."""
    size = {u: c.shape[1] for u, c in cpts.items()}
    size[tree.root] = root_marginal.shape[0]
    return size


def upward_pass(tree, root_marginal, cpts, evidence, keep=True):
    """Upward message passing (papers/003 eq. (9)), vectorised over rows.

    ``beta_u = evidence(u) * prod_children msg_c`` and ``msg_u = beta_u @ cpt_u^T``
    rescaled to unit row sums, the scales accumulated per row in ``log_scale``.

    Parameters
    ----------
    evidence : dict node -> ndarray of shape (N, n_u), or callable node -> ndarray
        Evidence of the observed nodes; hidden nodes have none.
    keep : bool, default=True
        Keep every ``beta`` and ``msg`` (needed by a downward pass); ``False`` frees each
        message once its parent has used it.

    Returns
    -------
    dict with ``lik`` (N,) the root sum (``P(x) = lik * exp(log_scale)``), ``log_scale``,
    and with ``keep=True`` the dicts ``ev``, ``beta``, ``msg``.
    """
    get = evidence if callable(evidence) else evidence.get
    ev, beta, msg = {}, {}, {}
    log_scale = None
    for u in tree.postorder:
        e = get(u) if u < tree.n_observed else None
        children = tree.children[u]
        if children:
            first = msg[children[0]] if keep else msg.pop(children[0])
            b = first * e if e is not None else first.copy()
            for c in children[1:]:
                b *= msg[c] if keep else msg.pop(c)
        elif e is None:
            raise ValueError(f"Hidden node {u} is a leaf: it carries no information.")
        else:
            b = e
        if log_scale is None:
            log_scale = np.zeros(b.shape[0])
        if keep:
            ev[u], beta[u] = e, b
        if u != tree.root:
            m = b @ cpts[u].T
            s = m @ np.ones(m.shape[1])  # messages are non-negative: row sums, via BLAS
            s = np.where(s > 0, s, 1.0)
            msg[u] = m / s[:, None]
            log_scale += np.log(s)
        else:
            lik = b @ root_marginal
    out = {"lik": lik, "log_scale": log_scale}
    if keep:
        out.update(ev=ev, beta=beta, msg=msg)
    return out


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
    size = node_sizes(tree, root_marginal, cpts)

    def evidence(u):  # built lazily, one column at a time
        up = 0.0 if unseen_proba is None else unseen_proba[u]
        return leaf_evidence(codes[u], size[u], up)

    out = upward_pass(tree, root_marginal, cpts, evidence, keep=False)
    with np.errstate(divide="ignore"):
        return np.log(out["lik"]) + out["log_scale"]
