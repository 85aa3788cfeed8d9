"""Hierarchical low-rank tensor decomposition of latent tree models (Song, Ishteva, Parikh, Xing &
Park (ICML 2013)).

Song, Ishteva, Parikh, Xing & Park (ICML 2013) view the joint table ``P`` of the observed
variables as a tensor and the latent tree as a hierarchy of low-rank unfoldings: cutting
the edge above a subtree splits the observed variables into ``S1`` (inside) and ``S2``
(outside), and the unfolding ``P_{S1;S2}`` has rank at most ``k`` (Theorem 1). Algorithm 1
decomposes every such unfolding as

    P_{S1;S2} ~ (P B) M (A^T P),                                       (Song, Ishteva, Parikh, Xing
    & Park (ICML 2013) eq. (2))

where ``B`` marginalises the outside down to one *linker* variable ``X_ref`` and ``A`` the
inside down to ``X_rep``, so ``P B = P[x_S1, X_ref]`` and ``A^T P = P[X_rep, x_S2]``.

* Correctly specified (``k' = k``), Theorem 3: ``M = (A^T P B)^-1`` after projecting on the
  top singular vectors of the pair ``P[X_rep, X_ref]`` (section 4.1). This is exactly the
  spectral algorithm of Parikh, Song & Xing (ICML 2011) (eq. (4)),
  :func:`~ltm_sklearn._algorithms.spectral.inverse_linker`.
* Misspecified (``k' < k``): the rank-``k'`` linker of eq. (5)-(6),

      M* = argmin_{rank M <= k'} ||P - (P B) M (A^T P)||_F
         = (P B)^+ (U_B U_B^T P V_A V_A^T)_(k') (A^T P)^+,

  computed as in section 5.2 through the factorisations ``P B = Q_B R_B`` and
  ``A^T P = R_A^T Q_A^T``: ``M* = R_B^-1 (Q_B^T P Q_A)_(k') R_A^-T``. Only three small
  matrices of the *sparse* empirical unfolding are needed (:func:`unfolding_moments`):
  ``R_B^T R_B = (P B)^T (P B)``, ``R_A^T R_A = (A^T P)(A^T P)^T`` and
  ``(P B)^T P (A^T P)^T``; each is a sum over the observed rows grouped by their inside
  and outside configurations, so no ``n^O`` table is ever formed.

The splits are taken top-down (:func:`local_splits`): because ``A`` and ``B`` only
marginalise, both factors of a split are again marginal tables of observed variables
(``P[x_S1, X_ref]`` and ``P[X_rep, x_S2]``), so the table a deeper edge is fitted to
holds the leaves of its subtree plus a few linker variables, not every column. What is
left at a hidden node after its children are split off is the third-order table
``P[X_ref(h), X_rep(c1), X_rep(c2)]``. Writing ``M* = head @ tail.T`` (rank ``k'``), the
message of a subtree is ``head^T P[X_ref, x_S1]`` and the outside sees
``tail^T e(X_rep)``: the factors are the leaf tables and projected third-order moments of
the spectral representation with every linker replaced by ``M*``, so scoring, missing
values, unseen categories and renormalisation are those of
:func:`~ltm_sklearn._algorithms.spectral.spectral_log_abs`.
"""

from __future__ import annotations

import numpy as np

from .spectral import (
    best_linker_pair,
    fit_spectral,
    inverse_linker,
    nearest_candidates,
)

__all__ = [
    "fit_hierarchical",
    "optimal_linker",
    "rank_constrained_linker",
    "UnfoldingMoments",
    "LINKERS",
]

# Relative eigenvalue cutoff of the Gram matrices R^T R (singular values at 1e-6).
_GRAM_RCOND = 1e-12
LINKERS = ("optimal", "inverse")


def rank_constrained_linker(P, PB, AP, k):
    """Dense reference of Song, Ishteva, Parikh, Xing & Park (ICML 2013) eq. (6): the rank-``k``
    minimiser of
    ``||P - PB M AP||_F``.

    Parameters
    ----------
    P : ndarray of shape (l, m)
    PB : ndarray of shape (l, a)
    AP : ndarray of shape (b, m)
    k : int

    Returns
    -------
    ndarray of shape (a, b)
    """
    Ub, sb, _ = np.linalg.svd(PB, full_matrices=False)
    _, sa, Vat = np.linalg.svd(AP, full_matrices=False)
    Ub = Ub[:, sb > _svd_tol(sb)]
    Va = Vat[sa > _svd_tol(sa)].T
    core = Ub @ (Ub.T @ P @ Va) @ Va.T
    U, s, Vt = np.linalg.svd(core, full_matrices=False)
    truncated = (U[:, :k] * s[:k]) @ Vt[:k]
    return np.linalg.pinv(PB) @ truncated @ np.linalg.pinv(AP)


def _svd_tol(s):
    return np.sqrt(_GRAM_RCOND) * (s[0] if s.size else 0.0)


def _inverse_root(G):
    """``R^-1`` for ``G = R^T R`` (symmetric PSD), restricted to the numerical range."""
    lam, W = np.linalg.eigh(G)
    keep = lam > _GRAM_RCOND * max(lam[-1], 0.0) if lam.size else lam > 0
    if not np.any(keep):
        keep = lam >= lam.max()
    return W[:, keep] / np.sqrt(np.maximum(lam[keep], np.finfo(float).tiny))


def optimal_linker(gram_b, gram_a, cross, k):
    """Rank-``k`` linker ``M* = head @ tail.T`` of Song, Ishteva, Parikh, Xing & Park (ICML 2013)
    eq. (6) via section 5.2.

    Parameters
    ----------
    gram_b : ndarray of shape (a, a)
        ``(P B)^T (P B)`` (``= R_B^T R_B``).
    gram_a : ndarray of shape (b, b)
        ``(A^T P)(A^T P)^T`` (``= R_A^T R_A``).
    cross : ndarray of shape (a, b)
        ``(P B)^T P (A^T P)^T``.
    k : int

    Returns
    -------
    head : ndarray of shape (a, r)
    tail : ndarray of shape (b, r)
        ``r = min(k, numerical rank)``; ``M* = head @ tail.T``.
    """
    Rb_inv = _inverse_root(gram_b)  # R_B^-1: P B R_B^-1 = Q_B
    Ra_inv = _inverse_root(gram_a)
    core = Rb_inv.T @ cross @ Ra_inv  # Q_B^T P Q_A
    U, s, Vt = np.linalg.svd(core, full_matrices=False)
    r = int(min(k, max(1, np.sum(s > np.sqrt(_GRAM_RCOND) * (s[0] if s.size else 0.0)))))
    return Rb_inv @ (U[:, :r] * s[:r]), Ra_inv @ Vt[:r].T


class UnfoldingMoments:
    """Sparse edge unfoldings of empirical joint tables (Song, Ishteva, Parikh, Xing & Park (ICML
    2013) section 5.2).

    A configuration of a set of columns is identified by a 64-bit random linear hash of
    its codes (collision probability about ``N^2 / 2^64``). The table of an edge is over
    the rows that observe every column it involves (rows with a missing entry there are
    left out).

    Parameters
    ----------
    moments : MomentEstimator
    random_state : int, default=0
        Seed of the hash multipliers.
    """

    def __init__(self, moments, random_state=0):
        self.codes = moments.codes
        self.weights = moments.sample_weight
        self.n_states = moments.n_states
        rng = np.random.default_rng(random_state)
        mult = rng.integers(1, 2**62, size=self.codes.shape[0], dtype=np.uint64)
        self._mult = mult * np.uint64(2) + np.uint64(1)

    def edge(self, inside, outside, rep, ref):
        """``((P B)^T P B, (A^T P)(A^T P)^T, (P B)^T P (A^T P)^T)`` of one unfolding.

        ``P`` is the empirical joint table of ``inside + outside`` unfolded as
        ``P_{inside; outside}``; ``rep`` is one of ``inside`` and ``ref`` one of
        ``outside``, so ``P B = P[x_inside, X_ref]`` and ``A^T P = P[X_rep, x_outside]``.
        """
        inside, outside = list(inside), list(outside)
        columns = inside + outside
        block = self.codes[columns]  # only the columns of this table
        rows = np.all(block >= 0, axis=0) & (self.weights > 0)
        p = self.weights[rows]
        if p.sum() <= 0:
            raise ValueError("no row observes every column of the unfolding")
        p = p / p.sum()
        block = block[:, rows].astype(np.int64)
        row_of = {v: i for i, v in enumerate(columns)}
        n_in = len(inside)
        key_in = self._key(block[:n_in], inside)
        key_out = self._key(block[n_in:], outside)
        PB, g_in = _grouped_table(key_in, block[row_of[ref]], self.n_states[ref], p)
        AP, g_out = _grouped_table(key_out, block[row_of[rep]], self.n_states[rep], p)
        cross = (PB[g_in] * p[:, None]).T @ AP[g_out]
        return PB.T @ PB, AP.T @ AP, cross

    def _key(self, block, columns):
        terms = block.astype(np.uint64) * self._mult[columns, None]
        return terms.sum(axis=0, dtype=np.uint64)


def _grouped_table(keys, column, n_col, p):
    """Weighted counts of ``column`` per group of equal ``keys``: ``(n_groups, n_col)``."""
    _, groups = np.unique(keys, return_inverse=True)
    groups = groups.ravel()
    n_groups = int(groups.max()) + 1 if groups.size else 0
    flat = np.bincount(groups * n_col + column, weights=p, minlength=n_groups * n_col)
    return flat.reshape(n_groups, n_col), groups


def local_splits(tree, nodes, moments, k):
    """Top-down primary-edge splits of Algorithm 1; sets ``rep``/``ref`` of every node.

    The factor decomposed at computation node ``i`` is the joint table of the leaves of
    its subtree plus its own linker ``ref(i)`` (a real observed variable: with the
    marginalising ``A``, ``B`` of section 4.2 every factor is a marginal table). Its
    children are split off largest first (ties: smallest column first); splitting child
    ``c`` unfolds the current table into ``S1 = leaves(c)`` and ``S2`` = the rest of the
    current table, takes ``rep(c)`` in ``S1`` and ``ref(c)`` in ``S2`` (nearest
    candidates, largest ``k``-th singular value of their pair), and replaces ``S1`` by
    ``rep(c)`` in the current table. What remains at the end is the third-order core
    ``P[ref(i), rep(c1), rep(c2)]``.

    Returns
    -------
    dict
        Computation node -> ``(S1, S2)`` of the unfolding at its edge.
    """
    hops = tree.hop_distances()
    splits = {}
    root = len(nodes) - 1
    stack = [root]
    while stack:
        i = stack.pop()
        node = nodes[i]
        current = set(node.leaves) | ({node.ref} if i != root else set())
        for c in sorted(node.children, key=lambda c: (-len(nodes[c].leaves), nodes[c].leaves[0])):
            child = nodes[c]
            inside = set(child.leaves)
            outside = sorted(current - inside)
            if not outside:
                continue
            cands = nearest_candidates(hops[child.host], sorted(inside), outside)
            child.rep, child.ref = best_linker_pair(moments, cands, k)
            splits[c] = (tuple(sorted(inside)), tuple(outside))
            current = (current - inside) | {child.rep}
            stack.append(c)
    return splits


def fit_hierarchical(tree, moments, n_hidden_states, unseen_proba, linker="optimal"):
    """Hierarchical rank-``k'`` decomposition of Song, Ishteva, Parikh, Xing & Park (ICML 2013)
    Algorithm 1.

    Parameters
    ----------
    tree : LatentTree
        Rooted at a hidden node; observed variables at the leaves.
    moments : MomentEstimator
    n_hidden_states : int
        ``k'``.
    unseen_proba : ndarray of shape (n_features,)
    linker : {"optimal", "inverse"}
        ``"optimal"``: the rank-``k'`` linker ``M*`` of eq. (6) on every edge;
        ``"inverse"``: Theorem 3's ``(A^T P B)^-1`` on the top-``k'`` singular subspace of
        the linker pair (section 4.1).

    Returns
    -------
    SpectralParams
    """
    splits = {}

    def select(tree, nodes, moments, k):
        splits.update(local_splits(tree, nodes, moments, k))

    if linker == "inverse":
        return fit_spectral(tree, moments, n_hidden_states, unseen_proba, select=select)
    unfold = UnfoldingMoments(moments)

    def edge_linker(nid, node, pair, k):
        inside, outside = splits[nid]
        try:
            stats = unfold.edge(inside, outside, node.rep, node.ref)
        except ValueError:  # no complete row on this table: Theorem 3's linker
            return inverse_linker(pair, k)
        return optimal_linker(*stats, k)

    return fit_spectral(
        tree, moments, n_hidden_states, unseen_proba, linker=edge_linker, select=select
    )
