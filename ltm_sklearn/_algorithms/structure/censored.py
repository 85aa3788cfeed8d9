"""Comparing trees without trusting saturated distances.

An information distance estimated from ``N`` rows has a standard error of about
``exp(d) / sqrt(N)`` (delta method, :func:`~ltm_sklearn.structure.spectral_variance`);
once that error is of the order of the signal the estimate stops growing with the true
distance and sits at a floor near ``0.5 log N`` whatever the truth (measured on the
general Markov trees of ``bench_structure.py``: the estimate reads about 5.2 at 1e5 rows
where the true distance is 6 to 15). A long estimated distance is then not a noisy value
but a *lower bound*: censored data. Balanced minimum evolution still sums such distances,
and on random trees with weak edges it prefers wrong trees.

:func:`censored_residual` scores a tree by weighted least squares on the reliable
distances and one-sided squares on the censored ones (a tree path may exceed a censored
distance freely, it is penalised only for being shorter):

    R(T) = min_{l >= 0} sum_{reliable} w_ij (t_ij - D_ij)^2
                      + sum_{censored} w_ij min(0, t_ij - D_ij)^2,

with ``t_ij`` the path length of ``T`` under edge lengths ``l``, ``w_ij = N exp(-2 D_ij)``
(inverse variances, capped at the censoring level) and ``D_ij`` censored when
``D_ij > 0.5 log N - delta``. :func:`~ltm_sklearn.structure.learn_tree` with ``"me"``
keeps the searched tree unless the Chow-Liu neighbor-joining tree - built from short
distances only - has a residual smaller by more than one and a balanced minimum-evolution
length at most 3% above the searched tree's.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.optimize import minimize, nnls
from scipy.sparse.csgraph import dijkstra

from ..._engine.checks import check_latent_tree, check_real
from .distances import check_distance_matrix
from .search import bme_length

__all__ = ["censored_residual", "one_sided_nnls", "prefer_censored_fit", "saturation_level"]

#: the censored check runs up to this many columns (beyond, its ``d^2`` rounds of
#: all-pairs paths cost more than the search it checks); ``"me"``'s neighbor joining tree
#: competes with the searched ones up to the same size (``d^3``)
CENSORED_CHECK_MAX = 512
#: the alternative tree replaces the searched one when its censored residual is smaller
#: by more than this ...
CENSORED_MARGIN = 1.0
#: ... and its balanced minimum-evolution length is at most this share above the searched
#: one's: the residual reads only the reliable distances, and a CLNJ tree much longer
#: under all of them was the wrong tree on the structure benchmark's balanced trees (the
#: value's sweep is in the user guide, "Structure")
CENSORED_MAX_EXCESS = 0.03

#: the edge lengths are fitted by :func:`one_sided_nnls` while the dense path incidence
#: (pairs x edges) has at most this many entries (128 columns), by L-BFGS-B on the sparse
#: one beyond. Same optimum; on the digits demo's 60 columns 0.01-0.05 s a tree against
#: 0.4-1.7 s, at 256 columns 1.8-10.8 s against 2.2-2.3 s
_DENSE_ENTRIES = 1 << 21

#: distances above ``0.5 log N - _DELTA`` are censored (their standard error exceeds
#: ``exp(-_DELTA)``); chosen on bench_structure.py (docs/architecture.md, "Tuning
#: constants")
_DELTA = 1.75


def saturation_level(n_samples, delta=_DELTA):
    """Estimated distances above this are lower bounds: ``0.5 log N - delta``."""
    return 0.5 * np.log(max(float(n_samples), 1.0)) - delta


def censored_residual(tree, D, n_samples, delta=_DELTA):
    """Weighted least-squares misfit of ``tree`` to ``D`` with saturated distances censored.

    Parameters
    ----------
    tree : LatentTree
    D : ndarray of shape (d, d)
        Estimated distances between the observed variables.
    n_samples : int
        Rows behind ``D`` (sets the censoring level and the weights).
    delta : float, default=1.75

    Returns
    -------
    float
        ``R(T)`` of the module docstring (non-negative edge lengths fitted exactly by
        :func:`one_sided_nnls`, or by L-BFGS-B on large trees).
        Censored pairs enter only when the fitted tree makes them too short: the fit
        starts from the reliable pairs and adds the violated censored ones until none
        is left (exact, and ``O(d m)`` pairs for sensible trees).
    """
    check_latent_tree(tree)
    D = check_distance_matrix(D)
    d, parent, m = tree.n_observed, tree.parent, tree.n_nodes
    if D.shape[0] != d:
        raise ValueError(f"D is {D.shape[0]} x {D.shape[0]}; the tree has {d} observed nodes.")
    check_real(n_samples, "n_samples", 0.0, low_open=True)
    level = saturation_level(n_samples, delta)
    rows_i, cols_e = [], []  # observed i and the edges (u, parent u) above it
    for i in range(d):
        u = i
        while parent[u] >= 0:
            rows_i.append(i)
            cols_e.append(u)
            u = parent[u]
    above = sp.csr_matrix((np.ones(len(rows_i)), (rows_i, cols_e)), shape=(d, m))
    child = np.flatnonzero(parent >= 0)
    upper = np.triu(np.ones((d, d), dtype=bool), 1)
    censored, used = (D > level) & upper, (D <= level) & upper
    bounds = [(0.0, 0.0) if u == tree.root else (0.0, None) for u in range(m)]
    lengths = np.zeros(m)
    not_root = np.arange(m) != tree.root
    value = 0.0
    for _ in range(d * d):
        I, J = np.nonzero(used)
        # path incidence: edges above i or above j, not both
        A = (above[I] + above[J] - 2 * above[I].multiply(above[J])).tocsr()
        y, one_sided = D[I, J], censored[I, J]
        w = float(n_samples) * np.exp(-2.0 * np.minimum(y, level))

        def objective(x, A=A, y=y, one_sided=one_sided, w=w):
            r = A @ x - y
            r[one_sided] = np.minimum(r[one_sided], 0.0)
            wr = w * r
            return float(r @ wr), 2.0 * (A.T @ wr)

        fitted = None
        if A.shape[0] * (m - 1) <= _DENSE_ENTRIES:
            fitted = one_sided_nnls(A[:, not_root].toarray(), y, one_sided, w)
        if fitted is None:
            res = minimize(
                objective,
                lengths,
                jac=True,
                method="L-BFGS-B",
                bounds=bounds,
                options={"maxiter": 20_000, "maxcor": 20, "ftol": 1e-14, "gtol": 1e-10},
            )
            lengths, value = res.x, float(res.fun)
        else:
            lengths = np.zeros(m)
            lengths[not_root] = fitted
            value = objective(lengths)[0]
        # edges on no used path are free: long, so they shorten no censored pair
        free = (np.asarray(abs(A).sum(axis=0)).ravel() == 0) & (parent >= 0)
        lengths[free] = D.max()
        G = sp.coo_matrix((lengths[child] + 1e-300, (child, parent[child])), shape=(m, m))
        paths = np.vstack(
            [
                dijkstra(G.tocsr(), directed=False, indices=np.arange(s, min(s + 512, d)))[:, :d]
                for s in range(0, d, 512)
            ]
        )
        violated = censored & ~used & (paths < D - 1e-9)
        if not violated.any():
            break
        used |= violated
    return value


def one_sided_nnls(A, y, one_sided, w, max_iter=100):
    """``argmin_{x >= 0} sum_i w_i r_i^2`` with ``r = A x - y`` and, for the rows
    ``one_sided``, ``r_i`` replaced by ``min(r_i, 0)`` (a row that may be too long for
    free); ``None`` when ``max_iter`` steps did not settle.

    A semismooth Newton method: each step solves the non-negative least squares
    (:func:`scipy.optimize.nnls`) of the two-sided rows and the one-sided rows that the
    current ``x`` makes too short, then moves towards that solution as far as the
    objective (convex, piecewise quadratic) decreases. A solution whose own too-short
    rows are those it was solved with is the optimum: the two objectives have the same
    gradient there, and the Karush-Kuhn-Tucker conditions of the one are those of the
    other. Rows within ``1e-9 (1 + |y|)`` of zero count either way (they add nothing).
    """
    A, y, w = np.asarray(A, float), np.asarray(y, float), np.asarray(w, float)
    one_sided = np.asarray(one_sided, bool)
    x = np.zeros(A.shape[1])
    r = -y
    tol = 1e-9 * (1.0 + np.abs(y))
    sw = np.sqrt(w)
    for _ in range(max_iter):
        kept = ~one_sided | (r < 0)
        try:
            step, _ = nnls(A[kept] * sw[kept, None], y[kept] * sw[kept])
        except RuntimeError:  # its iteration limit
            return None
        r_step = A @ step - y
        wrong = (r_step < -tol) & ~kept | (r_step > tol) & kept
        if not np.any(one_sided & wrong):
            return step
        delta = r_step - r
        t = _line_search(r, delta, one_sided, w)
        x += t * (step - x)
        r = A @ x - y
    return None


def _line_search(r, delta, one_sided, w):
    """The ``t`` in ``[0, 1]`` that minimises the objective of :func:`one_sided_nnls` at
    the residuals ``r + t delta``: where its slope (increasing: the objective is convex)
    turns positive, by bisection."""

    def slope(t):
        rt = r + t * delta
        return float((w * delta) @ np.where(one_sided, np.minimum(rt, 0.0), rt))

    if slope(1.0) <= 0:
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if slope(mid) > 0 else (mid, hi)
    return hi


def prefer_censored_fit(
    searched, alternative, D, n_samples, max_excess=CENSORED_MAX_EXCESS, verbose=0,
    labels=("search", "CLNJ"),
):  # fmt: skip
    """``alternative`` when it fits ``D`` with the saturated distances censored clearly
    better than the tree a balanced minimum-evolution search found (a residual smaller
    by more than ``CENSORED_MARGIN``) and is at most ``max_excess`` longer under
    balanced minimum evolution (``None``: the residual alone decides); else
    ``searched``. Beyond ``CENSORED_CHECK_MAX`` columns: ``searched``.

    Balanced minimum evolution sums saturated distances, and on trees with weak edges
    prefers wrong trees; a tree built from reliable distances (Chow-Liu neighbor
    joining's, or the quartet tests') is the check."""
    if D.shape[0] > CENSORED_CHECK_MAX:
        return searched
    r_searched = censored_residual(searched, D, n_samples)
    r_alternative = censored_residual(alternative, D, n_samples)
    l_searched, l_alternative = bme_length(searched, D), bme_length(alternative, D)
    if verbose:
        print(
            f"censored residuals: {labels[0]} {r_searched:.3f}, {labels[1]} "
            f"{r_alternative:.3f}; lengths {labels[0]} {l_searched:.4f}, {labels[1]} "
            f"{l_alternative:.4f}"
        )
    excess = np.inf if max_excess is None else max_excess
    fits_better = r_alternative < r_searched - CENSORED_MARGIN
    return alternative if fits_better and l_alternative <= (1.0 + excess) * l_searched else searched
