"""Tensor algebra, whitening and the robust tensor power method (papers/004).

Functions first:

* :func:`whiten` - ``W`` with ``W^T M2 W = I_k`` (papers/004 Theorem 2.4);
* :func:`tensor_power_method` - eigenpairs of a symmetric orthogonally decomposable
  tensor by power iterations ``theta <- T(I, theta, theta) / ||.||`` (eq. (6)) with random
  restarts and deflation (section 2.3);
* :func:`three_view_decomposition` - the mixing weights ``P(h)`` and the conditional means
  ``E[x_3 | h]`` of a three-view model from pair and triple moments, through the
  symmetrisation of Theorem 2.3 and the orthogonalisation of Theorem 2.4;
* :func:`tensor_cpts` - an explicit latent tree model: three views through three
  neighbours of every hidden node, aligned across nodes into consistent CPTs (the
  starting point of ``LatentTreeEM(init="tensor")``).
"""

from __future__ import annotations

import numpy as np
from sklearn.utils import check_random_state

__all__ = [
    "whiten",
    "tensor_power_method",
    "three_view_decomposition",
    "tensor_cpts",
]

_EPS = 1e-9  # floor of clipped (non-positive) estimates


def whiten(M2, n_components):
    """Whitening matrix ``W = U_k D_k^{-1/2}`` of a symmetric PSD matrix (Theorem 2.4).

    Returns ``W`` of shape ``(n, k)`` with ``W^T M2 W = I_k`` over the top ``k``
    eigenpairs; raises ``ValueError`` when ``M2`` has fewer than ``k`` positive eigenvalues.

    Examples
    --------
    >>> import numpy as np
    >>> A = np.array([[2.0, 0.5], [0.5, 1.0]])
    >>> W = whiten(A, 2)
    >>> np.allclose(W.T @ A @ W, np.eye(2))
    True
    """
    M2 = 0.5 * (np.asarray(M2, dtype=float) + np.asarray(M2, dtype=float).T)
    vals, vecs = np.linalg.eigh(M2)
    order = np.argsort(vals)[::-1][:n_components]
    vals, vecs = vals[order], vecs[:, order]
    if vals.shape[0] < n_components or vals[-1] <= 1e-12 * max(vals[0], 1e-300):
        raise ValueError(
            f"The second moment has fewer than {n_components} positive eigenvalues: the "
            "views cannot separate that many hidden states."
        )
    return vecs / np.sqrt(vals)


def _apply(T, theta):
    """``T(I, theta, theta)``."""
    return np.einsum("ijk,j,k->i", T, theta, theta)


def tensor_power_method(
    T, n_components=None, *, n_restarts=10, n_iter=100, tol=1e-12, random_state=None
):
    """Robust tensor power method with restarts and deflation (papers/004 section 2.3).

    For each component: ``n_restarts`` random unit starts, each iterated
    ``theta <- T(I, theta, theta) / ||T(I, theta, theta)||`` (eq. (6)) up to ``n_iter``
    times; the start with the largest ``T(theta, theta, theta)`` is iterated ``n_iter``
    more times, its eigenvalue ``lambda = T(theta, theta, theta)`` recorded, and
    ``lambda theta^{x3}`` subtracted from ``T``.

    Parameters
    ----------
    T : ndarray of shape (k, k, k)
        Symmetric tensor.
    n_components : int, default=None
        Number of eigenpairs (default ``k``).

    Returns
    -------
    eigenvalues : ndarray of shape (n_components,)
    eigenvectors : ndarray of shape (k, n_components)

    Examples
    --------
    >>> import numpy as np
    >>> V = np.linalg.qr(np.random.RandomState(0).randn(3, 3))[0]
    >>> T = np.einsum("r,ir,jr,kr->ijk", [3.0, 2.0, 1.0], V, V, V)
    >>> lam, U = tensor_power_method(T, random_state=0)
    >>> np.round(lam, 6).tolist()
    [3.0, 2.0, 1.0]
    """
    T = np.array(T, dtype=float)
    if T.ndim != 3 or len(set(T.shape)) != 1:
        raise ValueError(f"T must be a cubic 3-way tensor, got shape {T.shape}.")
    k = T.shape[0]
    n_components = k if n_components is None else int(n_components)
    rng = check_random_state(random_state)
    lams, vecs = [], []
    for _ in range(n_components):
        best, best_val = None, -np.inf
        for _ in range(n_restarts):
            theta = _iterate(T, _unit(rng.randn(k)), n_iter, tol)
            val = float(np.einsum("ijk,i,j,k->", T, theta, theta, theta))
            if val > best_val:
                best, best_val = theta, val
        theta = _iterate(T, best, n_iter, tol)
        lam = float(np.einsum("ijk,i,j,k->", T, theta, theta, theta))
        lams.append(lam)
        vecs.append(theta)
        T = T - lam * np.einsum("i,j,k->ijk", theta, theta, theta)
    return np.asarray(lams), np.column_stack(vecs)


def _unit(v):
    n = np.linalg.norm(v)
    return v / n if n > 0 else v


def _iterate(T, theta, n_iter, tol):
    for _ in range(n_iter):
        new = _apply(T, theta)
        norm = np.linalg.norm(new)
        if norm == 0:
            return theta
        new /= norm
        if np.linalg.norm(new - theta) < tol:
            return new
        theta = new
    return theta


def _pinv(M, k):
    """Rank-``k`` pseudo-inverse."""
    U, s, Vt = np.linalg.svd(M, full_matrices=False)
    k = min(k, int(np.sum(s > 1e-12 * s[0])) if s.size and s[0] > 0 else 0)
    if k == 0:
        return np.zeros(M.T.shape)
    return (Vt[:k].T / s[:k]) @ U[:, :k].T


def three_view_decomposition(P12, P13, P23, triple, n_components, random_state=None):
    """Mixing weights and conditional means of view 3 in a three-view model.

    ``x_1, x_2, x_3`` (one-hot) are independent given a hidden ``h`` with ``k`` states.
    With ``A_1 = P_32 P_12^+`` and ``A_2 = P_31 P_21^+`` the symmetrised views
    ``A_1 x_1``, ``A_2 x_2`` (papers/004 Theorem 2.3) give
    ``M_2 = sum_h w_h c_h c_h^T`` and ``M_3 = sum_h w_h c_h^{x3}`` with
    ``c_h = E[x_3 | h]``; whitening (Theorem 2.4) makes ``M_3(W, W, W)`` orthogonally
    decomposable with eigenvalues ``1 / sqrt(w_h)`` and eigenvectors ``sqrt(w_h) W^T c_h``.

    Parameters
    ----------
    P12, P13, P23 : ndarray
        Pair moments ``E[x_a x_b^T]``, shapes ``(n_1, n_2)``, ``(n_1, n_3)``, ``(n_2, n_3)``.
    triple : callable or ndarray
        Either the dense ``(n_1, n_2, n_3)`` moment or a function ``(B1, B2, B3) -> E[B1 x_1
        (x) B2 x_2 (x) B3 x_3]`` returning a ``(k, k, k)`` projected moment.
    n_components : int

    Returns
    -------
    weights : ndarray of shape (k,)
        ``P(h)``.
    means : ndarray of shape (n_3, k)
        Columns ``E[x_3 | h]``.
    """
    k = int(n_components)
    A1 = P23.T @ _pinv(P12, k)  # (n3, n1)
    A2 = P13.T @ _pinv(P12.T, k)  # (n3, n2)
    M2 = A1 @ P12 @ A2.T
    W = whiten(M2, k)
    B1, B2, B3 = W.T @ A1, W.T @ A2, W.T
    if callable(triple):
        T = triple(B1, B2, B3)
    else:
        T = np.einsum("abc,ia,jb,kc->ijk", triple, B1, B2, B3)
    T = _symmetrise(T)
    lam, V = tensor_power_method(T, k, random_state=random_state)
    lam = np.where(np.abs(lam) > 1e-12, lam, 1e-12)
    means = np.linalg.pinv(W.T) @ V * lam
    weights = 1.0 / lam**2
    return weights / weights.sum(), means


def _symmetrise(T):
    perms = [(0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)]
    return sum(np.transpose(T, p) for p in perms) / 6.0


def _normalise_columns(O):
    O = np.maximum(O, _EPS)
    return O / O.sum(axis=0, keepdims=True)


def _normalise_rows(C):
    C = np.maximum(C, _EPS)
    return C / C.sum(axis=1, keepdims=True)


def tensor_cpts(tree, moments, n_hidden_states, random_state=None):
    """Explicit CPTs on ``tree`` from three-view tensor decompositions (papers/004).

    For every hidden node ``h`` with at least three neighbours, three observed variables in
    three different neighbour directions (the nearest ones) are conditionally independent
    given ``h``: :func:`three_view_decomposition` gives ``P(h)`` and ``P(x | h)`` for them,
    and pairs with a view in another direction give ``P(y | h)`` for every observed ``y``.
    CPTs follow with consistent hidden-state labels: ``P(y | h)`` directly for an observed
    child; for a hidden edge ``p -> c`` the matrix ``P(c | p)`` solves
    ``P(y | p) = P(y | c) P(c | p)`` in least squares over the observed ``y`` below ``c``.
    Hidden nodes with fewer than three neighbours copy a neighbour (identity CPT); nodes
    whose decomposition fails get random tables. Negative entries are clipped, rows
    renormalised.

    Parameters
    ----------
    tree : LatentTree
        Rooted; observed nodes may be internal.
    moments : MomentEstimator
    n_hidden_states : int

    Returns
    -------
    root_marginal : ndarray
    cpts : dict node -> ndarray of shape (k_parent, k_node)
    """
    rng = check_random_state(random_state)
    k = int(n_hidden_states)
    d = tree.n_observed
    n_obs = moments.n_states
    hops = tree.hop_distances()
    singles = moments.singletons()
    results = {}
    for h in tree.hidden_nodes:
        try:
            results[h] = _decompose_node(tree, moments, h, k, hops, rng)
        except (ValueError, np.linalg.LinAlgError):
            continue
    # nodes without a decomposition copy the nearest decomposed hidden node
    for h in tree.hidden_nodes:
        if h not in results:
            done = [g for g in results if g != h]
            if done:
                results[h] = results[min(done, key=lambda g: hops[h, g])]
            else:
                w = rng.dirichlet(np.ones(k))
                results[h] = (w, {y: rng.dirichlet(np.ones(n_obs[y]), size=k).T for y in range(d)})

    def cond(u):  # P(y | u) for every observed y, columns over u's states
        return results[u][1]

    root = tree.root
    if root >= d:
        root_marginal = results[root][0]
    else:
        root_marginal = singles[root]
    cpts = {}
    for c in tree.preorder[1:]:
        p = tree.parent[c]
        if p >= d and c < d:
            cpts[c] = _normalise_rows(cond(p)[c].T)
        elif p >= d:
            below = tree.subtree_leaves(c)
            Oc = np.vstack([cond(c)[y] for y in below])
            Op = np.vstack([cond(p)[y] for y in below])
            A = np.linalg.lstsq(Oc, Op, rcond=None)[0]  # A[j, i] = P(c = j | p = i)
            cpts[c] = _normalise_rows(A.T)
        elif c >= d:  # observed parent, hidden child: Bayes from P(p | c) and P(c)
            w, O = results[c]
            joint = O[p] * w[None, :]  # P(p = v, c = j)
            cpts[c] = _normalise_rows(joint / np.maximum(joint.sum(axis=1, keepdims=True), _EPS))
        else:
            P = moments.pair(p, c)
            cpts[c] = _normalise_rows(P)
    return np.asarray(root_marginal, dtype=float), cpts


def _decompose_node(tree, moments, h, k, hops, rng):
    """Three-view decomposition at hidden node ``h``: ``(P(h), {y: P(y | h)})``."""
    d = tree.n_observed
    rooted = tree.rooted_at(h)
    directions = []
    for g in rooted.children[h]:
        obs = rooted.subtree_leaves(g)  # every observed node on that side
        if obs:
            directions.append(sorted(obs, key=lambda y: (hops[h, y], -moments.n_states[y])))
    if len(directions) < 3:
        raise ValueError("fewer than three directions")
    directions.sort(key=lambda obs: hops[h, obs[0]])
    views = [obs[0] for obs in directions[:3]]
    x1, x2, x3 = views

    pair = moments.pair

    def triple(B1, B2, B3):
        return moments.projected([((x1, x2, x3), (B1, B2, B3))])[0]

    w, C = three_view_decomposition(pair(x1, x2), pair(x1, x3), pair(x2, x3), triple, k, rng)
    w = np.maximum(w, _EPS)
    w = w / w.sum()
    C = _normalise_columns(C)
    side = {y: t for t, obs in enumerate(directions) for y in obs}
    # the conditional means of x1 from pairs with x3 (another direction)
    G3 = _pinv(w[:, None] * C.T, k)  # (n3, k)
    O1 = _normalise_columns(pair(x1, x3) @ G3)
    G1 = _pinv(w[:, None] * O1.T, k)
    out = {}
    for y in range(d):
        if y == x3:
            out[y] = C
        elif side.get(y) != side[x3]:
            out[y] = _normalise_columns(pair(y, x3) @ G3)
        else:
            out[y] = _normalise_columns(pair(y, x1) @ G1)
    return w, out
