"""Metrics for latent trees: structure distances and joint-probability error."""

from __future__ import annotations

import numpy as np

from ._engine.checks import check_latent_tree

__all__ = ["tree_splits", "robinson_foulds", "hop_error", "relative_joint_error"]


def tree_splits(tree):
    """Non-trivial bipartitions of the observed variables induced by the tree's edges.

    Each split is a ``frozenset`` of observed ids on the side that does not hold node 0;
    splits with fewer than two observed variables on a side are trivial and left out, and
    edges that induce the same split (chains of degree-2 hidden nodes) count once.

    Parameters
    ----------
    tree : LatentTree

    Returns
    -------
    set of frozenset of int
    """
    check_latent_tree(tree)
    d = tree.n_observed
    rooted = tree if tree.root == 0 or tree.n_nodes == 1 else tree.rooted_at(0)
    below = {}
    for u in rooted.postorder:
        s = {int(u)} if u < d else set()
        for c in rooted.children[u]:
            s |= below[c]
        below[u] = s
    out = set()
    for u in range(rooted.n_nodes):
        if u == rooted.root:
            continue
        side = below[u]
        if 2 <= len(side) <= d - 2:
            out.add(frozenset(side))
    return out


def robinson_foulds(tree_a, tree_b, normalize=False):
    """Robinson-Foulds distance: splits in one tree but not the other.

    Parameters
    ----------
    tree_a, tree_b : LatentTree
        Trees over the same observed variables (``n_observed``); hidden nodes may differ.
    normalize : bool, default=False
        Divide the count by the number of non-trivial splits of both trees (0 = the same
        topology, 1 = no split in common).

    Returns
    -------
    int or float
        The number of non-trivial splits (:func:`tree_splits`) in exactly one of the
        trees; a float in [0, 1] with ``normalize=True``.

    Examples
    --------
    >>> from ltm_sklearn.datasets import balanced_binary_tree
    >>> t = balanced_binary_tree(8)
    >>> robinson_foulds(t, t)
    0
    """
    for t in (tree_a, tree_b):
        if not hasattr(t, "n_observed"):
            raise TypeError(
                f"robinson_foulds compares two LatentTree objects, got {type(t).__name__}: "
                "build one with LatentTree(edges, n_observed)."
            )
    if tree_a.n_observed != tree_b.n_observed:
        raise ValueError(
            f"The trees have {tree_a.n_observed} and {tree_b.n_observed} observed variables."
        )
    a, b = tree_splits(tree_a), tree_splits(tree_b)
    rf = len(a ^ b)
    if normalize:
        total = len(a) + len(b)
        return rf / total if total else 0.0
    return rf


def _leaf_hops(tree):
    d = tree.n_observed
    return tree.hop_distances()[:d, :d]


def hop_error(true_tree, estimated_tree, average=False):
    """Hop error of Song, Parikh & Xing ("Kernel Embeddings of Latent Tree Graphical Models",
    NIPS 2011, section 6): ``sum_{i<j} |hops*(i, j) - hops(i, j)| / hops*(i, j)`` over the
    pairs of observed variables, ``hops*`` counted in the true tree.

    Parameters
    ----------
    true_tree, estimated_tree : LatentTree
        Trees over the same observed variables.
    average : bool, default=False
        Divide by the number of pairs.

    Returns
    -------
    float
    """
    check_latent_tree(true_tree, "true_tree")
    check_latent_tree(estimated_tree, "estimated_tree")
    if true_tree.n_observed != estimated_tree.n_observed:
        raise ValueError("The trees must have the same observed variables.")
    if true_tree.n_observed < 2:
        raise ValueError("The hop error compares pairs of observed variables: it needs two.")
    h_true, h_est = _leaf_hops(true_tree), _leaf_hops(estimated_tree)
    iu = np.triu_indices(true_tree.n_observed, k=1)
    err = np.abs(h_true[iu] - h_est[iu]) / h_true[iu]
    return float(err.mean() if average else err.sum())


def relative_joint_error(log_p_true, log_p_estimated):
    """Per-row relative error ``|P_hat(x) - P(x)| / P(x)`` from log-probabilities, the error
    measure of Parikh, Song & Xing ("A Spectral Algorithm for Latent Tree Graphical
    Models", ICML 2011) and Song, Ishteva, Parikh, Xing & Park ("Hierarchical Tensor
    Decomposition of Latent Tree Graphical Models", ICML 2013).

    Parameters
    ----------
    log_p_true : array-like of shape (n_samples,)
        ``log P(x)`` of every row under the true model.
    log_p_estimated : array-like of shape (n_samples,)
        ``log P_hat(x)`` under the estimate.

    Returns
    -------
    ndarray of shape (n_samples,)

    Examples
    --------
    >>> import numpy as np
    >>> relative_joint_error(np.log([0.5, 0.2]), np.log([0.25, 0.2]))
    array([0.5, 0. ])
    """
    log_p_true = np.asarray(log_p_true, dtype=float)
    log_p_estimated = np.asarray(log_p_estimated, dtype=float)
    if log_p_true.ndim != 1 or log_p_estimated.shape != log_p_true.shape:
        raise ValueError(
            f"log_p_true and log_p_estimated must be 1-D of one length, got shapes "
            f"{log_p_true.shape} and {log_p_estimated.shape}."
        )
    if not np.all(np.isfinite(log_p_true)):
        raise ValueError("log_p_true must be finite: the error is relative to P(x) > 0.")
    if np.any(np.isnan(log_p_estimated) | (log_p_estimated == np.inf)):
        raise ValueError("log_p_estimated holds NaN or +inf.")
    return np.abs(np.expm1(log_p_estimated - log_p_true))
