"""Tensor algebra, whitening and the robust tensor power method (Anandkumar et al. (JMLR 2014)).

Functions first:

* :func:`whiten` - ``W`` with ``W^T M2 W = I_k`` (Anandkumar et al. (JMLR 2014) Theorem 2.4);
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

import itertools

import numpy as np
from scipy.sparse.linalg import ArpackNoConvergence, eigsh
from sklearn.utils import check_random_state

from .._engine.checks import check_finite, check_latent_tree, check_moments, check_real, check_whole

__all__ = [
    "whiten",
    "tensor_power_method",
    "three_view_decomposition",
    "tensor_cpts",
    "expand_states",
]

_EPS = 1e-9  # floor of clipped (non-positive) estimates
#: restarts, iterations and step tolerance of the tensor power method (the defaults of
#: :func:`tensor_power_method`, and the decompositions of :func:`tensor_cpts`)
_RESTARTS, _POWER_ITERATIONS, _POWER_TOL = 10, 100, 1e-12
#: :func:`whiten` reads the top ``k`` eigenpairs of a second moment of at least this many
#: rows (and ``k`` at most an eighth of them) by Lanczos iterations instead of a full
#: eigendecomposition: the view of a column of 2,000 categories took 1.3 s a
#: decomposition against 0.12 s (5,000 categories: 24.6 s against 0.8 s), the same
#: eigenpairs to 1e-14
_LANCZOS_MIN_ROWS = 512


def whiten(M2, n_components):
    """Whitening matrix ``W = U_k D_k^{-1/2}`` of a symmetric PSD matrix (Theorem 2.4).

    Returns ``W`` of shape ``(n, k)`` with ``W^T M2 W = I_k`` over the top ``k``
    eigenpairs; raises ``ValueError`` when ``M2`` has fewer than ``k`` positive eigenvalues.

    Parameters
    ----------
    M2 : ndarray of shape (n, n)
        Symmetric positive semi-definite matrix.
    n_components : int
        ``k``, at most ``n``.

    Returns
    -------
    ndarray of shape (n, k)

    Examples
    --------
    >>> import numpy as np
    >>> A = np.array([[2.0, 0.5], [0.5, 1.0]])
    >>> W = whiten(A, 2)
    >>> np.allclose(W.T @ A @ W, np.eye(2))
    True
    """
    M2 = check_finite(M2, "The second moment M2")
    if M2.ndim != 2 or M2.shape[0] != M2.shape[1]:
        raise ValueError(f"M2 must be a square matrix, got shape {M2.shape}.")
    n_components = check_whole(n_components, "n_components", 1)
    M2 = 0.5 * (M2 + M2.T)
    vals = None
    n = M2.shape[0]
    if n >= _LANCZOS_MIN_ROWS and n_components <= n // 8:
        start = np.random.RandomState(0).uniform(0.5, 1.5, n)  # the same result every call
        try:
            vals, vecs = eigsh(M2, k=n_components, which="LA", v0=start, tol=0)
        except ArpackNoConvergence:
            vals = None
    if vals is None:
        vals, vecs = np.linalg.eigh(M2)
    order = np.argsort(vals)[::-1][:n_components]
    vals, vecs = vals[order], vecs[:, order]
    if vals.shape[0] < n_components or vals[-1] <= 1e-12 * max(vals[0], 1e-300):
        raise ValueError(
            f"The second moment has fewer than {n_components} positive eigenvalues: the "
            "views cannot separate that many hidden states."
        )
    return vecs / np.sqrt(vals)


def tensor_power_method(
    T,
    n_components=None,
    *,
    n_restarts=_RESTARTS,
    n_iter=_POWER_ITERATIONS,
    tol=_POWER_TOL,
    random_state=None,
):
    """Robust tensor power method with restarts and deflation (Anandkumar et al. (JMLR 2014) section
    2.3).

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
    n_restarts : int, default=10
        Random unit starts per component.
    n_iter : int, default=100
        Power iterations of every start, and of the best start once more.
    tol : float, default=1e-12
        A start stops iterating once its vector moves by less than this.
    random_state : int, RandomState instance or None, default=None
        Seeds the starts.

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
    T = check_finite(T, "T")
    k = T.shape[0]
    n_components = k if n_components is None else check_whole(n_components, "n_components", 1)
    if n_components > k:
        raise ValueError(
            f"n_components={n_components}: a {k} x {k} x {k} tensor has at most {k} "
            "orthogonal eigenvectors."
        )
    rng = check_random_state(random_state)
    n_restarts = check_whole(n_restarts, "n_restarts", 1)
    n_iter = check_whole(n_iter, "n_iter", 1)
    tol = check_real(tol, "tol", 0.0)
    starts = _power_starts(rng, 1, n_components, k, n_restarts)
    lams, vecs = _power_method_stacked(T[None], starts, n_iter, tol)
    return lams[0], vecs[0]


def _power_starts(rng, n_tensors, n_components, k, n_restarts):
    """The random starts of :func:`_power_method_stacked` for ``n_tensors`` tensors,
    ``(n_tensors, n_components, k, n_restarts)`` unit columns, drawn tensor after tensor
    and component after component (as many calls of :func:`tensor_power_method` one
    after another would draw them)."""
    n_restarts = max(int(n_restarts), 1)
    starts = np.empty((n_tensors, n_components, k, n_restarts))
    for i in range(n_tensors):
        for c in range(n_components):
            starts[i, c] = rng.randn(n_restarts, k).T
    norms = np.linalg.norm(starts, axis=2, keepdims=True)
    return np.divide(starts, norms, out=starts, where=norms > 0)


def _power_method_stacked(T, starts, n_iter, tol):
    """:func:`tensor_power_method` of each tensor of a stack ``(N, k, k, k)`` from the
    starts ``(N, n_components, k, n_restarts)`` (:func:`_power_starts`), all tensors
    iterated side by side: a step costs a few NumPy calls whatever the number of
    tensors and restarts (a model's hidden nodes have many small decompositions).

    Returns
    -------
    eigenvalues : ndarray of shape (N, n_components)
    eigenvectors : ndarray of shape (N, k, n_components)
    """
    T = np.array(T, dtype=float)
    n, n_components = starts.shape[:2]
    lams = np.empty((n, n_components))
    vecs = np.empty((n, T.shape[1], n_components))
    rows = np.arange(n)
    for c in range(n_components):
        thetas = _iterate(T, starts[:, c], n_iter, tol)
        values = np.einsum("nir,nir->nr", thetas, _apply(T, thetas))
        best = thetas[rows, :, np.argmax(values, axis=1)]
        theta = _iterate(T, best[:, :, None], n_iter, tol)[:, :, 0]
        lam = np.einsum("nijk,ni,nj,nk->n", T, theta, theta, theta)
        lams[:, c], vecs[:, :, c] = lam, theta
        T = T - lam[:, None, None, None] * np.einsum("ni,nj,nk->nijk", theta, theta, theta)
    return lams, vecs


def _apply(T, theta):
    """``T(I, theta, theta)`` for each column of each ``(k, R)`` matrix of ``theta``
    ``(N, k, R)``, with ``T`` a stack ``(N, k, k, k)``: the form that ranks the
    restarts and reads the eigenvalues, as it always did (:func:`_step` rounds
    differently, and on a tensor far from decomposable the rounding of the ranking
    picks the eigenpair)."""
    return np.einsum("nijk,njr,nkr->nir", T, theta, theta)


def _step(T, theta):
    """``T(I, theta, theta)`` as :func:`_apply`, by one batched product of the unfolded
    tensors with the columns' outer products (the power iterations' form: a step of
    every restart of every tensor in one call)."""
    n, k, r = theta.shape
    outer = (theta[:, :, None, :] * theta[:, None, :, :]).reshape(n, k * k, r)
    return T.reshape(n, k, k * k) @ outer


def _iterate(T, theta, n_iter, tol):
    """Power iterations ``theta <- T(I, theta, theta) / ||.||`` of every unit column of
    ``theta`` ``(N, k, R)`` under its tensor of the stack ``T`` ``(N, k, k, k)``: a
    column stops at its first step that moves it by less than ``tol``, or before a step
    that maps it to zero. ``T(I, theta, theta)`` of every column is one batched product
    of the unfolded tensors with the columns' outer products."""
    theta = theta.copy()
    moving = np.ones((theta.shape[0], theta.shape[2]), dtype=bool)
    for _ in range(n_iter):
        new = _step(T, theta)
        norm = np.sqrt(np.einsum("nir,nir->nr", new, new))
        moving &= norm > 0  # a step to zero: the column stays where it is
        new /= np.where(norm > 0, norm, 1.0)[:, None, :]
        step = new - theta
        done = np.einsum("nir,nir->nr", step, step) < tol * tol
        theta = np.where(moving[:, None, :], new, theta)
        moving &= ~done
        if not moving.any():
            break
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
    ``A_1 x_1``, ``A_2 x_2`` (Anandkumar et al. (JMLR 2014) Theorem 2.3) give
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
    random_state : int, RandomState instance or None, default=None
        Seeds the tensor power method's starts (:func:`tensor_power_method`).

    Returns
    -------
    weights : ndarray of shape (k,)
        ``P(h)``.
    means : ndarray of shape (n_3, k)
        Columns ``E[x_3 | h]``.
    """
    k = check_whole(n_components, "n_components", 1)
    P12, P13, P23 = (check_finite(P, n) for P, n in ((P12, "P12"), (P13, "P13"), (P23, "P23")))
    if P12.ndim != 2 or P13.ndim != 2 or P23.ndim != 2:
        raise ValueError("P12, P13 and P23 must be matrices.")
    n1, n2, n3 = P12.shape[0], P12.shape[1], P13.shape[1]
    if P13.shape[0] != n1 or P23.shape != (n2, n3):
        raise ValueError(
            f"The pair moments' shapes disagree: P12 {P12.shape}, P13 {P13.shape} and P23 "
            f"{P23.shape} must be (n1, n2), (n1, n3) and (n2, n3)."
        )
    if not callable(triple):
        triple = check_finite(triple, "triple")
        if triple.shape != (n1, n2, n3):
            raise ValueError(f"triple has shape {triple.shape}; expected {(n1, n2, n3)}.")
    W, projections = _three_view_projections(P12, P13, P23, k)
    if callable(triple):
        T = triple(*projections)
    else:
        B1, B2, B3 = projections
        T = np.einsum("abc,ia,jb,kc->ijk", triple, B1, B2, B3)
    lam, V = tensor_power_method(_symmetrise(T), k, random_state=random_state)
    return _three_view_result(W, lam, V)


def _three_view_projections(P12, P13, P23, k):
    """The whitening ``W`` of :func:`three_view_decomposition` and the projections
    ``(B1, B2, B3)`` of the three views that its triple moment is read through."""
    A1 = P23.T @ _pinv(P12, k)  # (n3, n1)
    A2 = P13.T @ _pinv(P12.T, k)  # (n3, n2)
    M2 = A1 @ P12 @ A2.T
    W = whiten(M2, k)
    return W, (W.T @ A1, W.T @ A2, W.T)


def _three_view_result(W, lam, V):
    """Mixing weights and conditional means from the eigenpairs ``lam, V`` of the
    whitened triple (:func:`three_view_decomposition`)."""
    lam = np.where(np.abs(lam) > 1e-12, lam, 1e-12)
    means = np.linalg.pinv(W.T) @ V * lam
    weights = 1.0 / lam**2
    return weights / weights.sum(), means


def _symmetrise(T):
    perms = [(0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)]
    return sum(np.transpose(T, p) for p in perms) / 6.0


def _normalise_columns(O):
    """Project every column onto the probability simplex (clip, renormalise)."""
    O = np.maximum(O, _EPS)
    return O / O.sum(axis=0, keepdims=True)


def _normalise_rows(C):
    C = np.maximum(C, _EPS)
    return C / C.sum(axis=1, keepdims=True)


class _NodePlan:
    """Structural choices at one hidden node: its three views and the side of every
    observed node (which neighbour of the node leads to it).

    A view is a group of observed variables on one side of the node, its feature the
    concatenation of their one-hot vectors: variables on one side are conditionally
    independent of the other sides given the node, so a group is a valid view whose
    conditional means ``E[x | h]`` stack the conditionals ``P(y | h)`` of its members -
    better separated than those of any single member, which keeps the decomposition
    well conditioned when the nearest variable in a direction is far from the node.
    """

    def __init__(self, node, views, side):
        self.node = node
        self.views = views  # three tuples of observed nodes, in three directions
        self.side = side  # observed node -> index of the neighbour towards it
        self.weights = None  # P(h), filled by the decomposition
        self.conditionals = {}  # observed y -> P(y | h), columns over the states of h

    def view_for(self, y):
        """A view in another direction than ``y`` (the third preferred: its conditional
        comes straight from the power method)."""
        v1, v2, v3 = self.views
        for view in (v3, v1, v2):
            if self.side[view[0]] != self.side[y]:
                return view
        raise AssertionError("three views lie in three directions")

    def members(self):
        return {y for view in self.views for y in view}


def _plan_node(tree, h, hops, n_states, view_size):
    """Views of hidden node ``h``: in each of the three directions whose nearest
    informative observed node (at least two categories) is closest, the ``view_size``
    nearest such nodes (``None`` with fewer than three directions). Ties are broken by the
    columns of the views, so the plan does not depend on node ids."""
    d = tree.n_observed
    obs_h = hops[h, :d]
    informative = np.asarray(n_states) >= 2
    side = np.full(d, -1)
    groups = []
    for t, g in enumerate(tree.neighbors[h]):
        mask = hops[g, :d] < obs_h
        side[mask] = t
        members = np.flatnonzero(mask & informative)
        if members.size:
            order = sorted(members, key=lambda y: (obs_h[y], -n_states[y], y))
            groups.append((obs_h[order[0]], t, tuple(int(y) for y in order[:view_size])))
    if len(groups) < 3:
        return None
    groups.sort(key=lambda g: (g[0], g[2]))  # ties by the columns, not the neighbour ids
    views = tuple(group for _, _, group in groups[:3])
    return _NodePlan(h, views, {int(y): int(side[y]) for y in range(d)})


def _block(pairs, rows, cols):
    """The pair tables of two groups of variables side by side: ``P[x_rows, x_cols]``."""
    return np.vstack([np.hstack([_pair(pairs, a, b) for b in cols]) for a in rows])


def _split(M, view, n_states):
    """Split the rows of a stacked conditional over the members of ``view``."""
    bounds = np.cumsum([0] + [int(n_states[y]) for y in view])
    return {y: _normalise_columns(M[bounds[i] : bounds[i + 1]]) for i, y in enumerate(view)}


def _decompose_all(plans, pairs, moments, k, rng):
    """Three-view decomposition (Anandkumar et al. (JMLR 2014)) at every node of
    ``plans`` (a dict node -> :class:`_NodePlan`) with as many components as its views
    support (at most ``k``): sets each plan's ``weights`` and its views' conditionals,
    and returns the nodes whose decomposition failed.

    The nodes are decomposed together: their projected triples in one request to
    ``moments``, their tensor power methods side by side (:func:`_power_method_stacked`,
    with the random starts drawn node after node, as one decomposition after another
    draws them). The batched products round differently from one tensor's own: on a
    node far from an orthogonally decomposable triple (no restart converges, e.g. at a
    ``k'`` above the rank the data support) that can change its eigenpairs as another
    seed would."""
    n = moments.n_states
    failed, ready = set(), []  # ready: (node, its view blocks, components, whitening, projections)
    for g, plan in plans.items():
        blocks = _view_blocks(plan, pairs)
        prepared = _node_projections(blocks, k)
        if prepared is None:
            failed.add(g)
        else:
            ready.append((g, blocks, *prepared))
    requests, spans = [], []
    for g, _, _, _, projections in ready:
        first = len(requests)
        requests += _triple_requests(projections, plans[g].views, n)
        spans.append((first, len(requests)))
    triples = moments.projected(requests) if requests else []
    tensors = [_symmetrise(sum(triples[a:b])) for a, b in spans]
    ranks = [r for _, _, r, _, _ in ready]
    starts = [_power_starts(rng, 1, r, r, _RESTARTS)[0] for r in ranks]
    eigen = [None] * len(ready)
    for r in sorted(set(ranks)):
        group = [i for i, ri in enumerate(ranks) if ri == r]
        lams, vecs = _power_method_stacked(
            np.stack([tensors[i] for i in group]),
            np.stack([starts[i] for i in group]),
            _POWER_ITERATIONS,
            _POWER_TOL,
        )
        for j, i in enumerate(group):
            eigen[i] = lams[j], vecs[j]
    for (g, blocks, r, W, _), (lam, V) in zip(ready, eigen):
        try:
            _set_conditionals(plans[g], *_three_view_result(W, lam, V), r, blocks, n)
        except (ValueError, np.linalg.LinAlgError):
            # (rare) the node alone with fewer components; its starts are drawn after
            # every node's, where one decomposition after another drew them next
            if not _decompose_alone(plans[g], blocks, moments, r - 1, rng):
                failed.add(g)
    return failed


def _view_blocks(plan, pairs):
    """The pair tables ``(P12, P13, P23)`` of the three views of ``plan``'s node."""
    v1, v2, v3 = plan.views
    return _block(pairs, v1, v2), _block(pairs, v1, v3), _block(pairs, v2, v3)


def _node_projections(blocks, k):
    """``(r, W, projections)`` of :func:`_three_view_projections` at a node with view
    blocks ``blocks`` (:func:`_view_blocks`) with as many components ``r <= k`` as its
    second moment separates, or ``None`` when it separates none."""
    P12, P13, P23 = blocks
    most = max(int(min(k, np.linalg.matrix_rank(P12), P13.shape[1])), 1)
    for r in range(most, 0, -1):
        try:
            return (r, *_three_view_projections(P12, P13, P23, r))
        except (ValueError, np.linalg.LinAlgError):
            continue
    return None


def _decompose_alone(plan, blocks, moments, r, rng):
    """The node of ``plan`` (view blocks ``blocks``) decomposed on its own
    (:func:`three_view_decomposition`) with at most ``r`` components, fewer while it
    fails: whether one succeeded."""
    n = moments.n_states

    def triple(*projections):
        return sum(moments.projected(_triple_requests(projections, plan.views, n)))

    for fewer in range(r, 0, -1):
        try:
            w, C = three_view_decomposition(*blocks, triple, fewer, random_state=rng)
            _set_conditionals(plan, w, C, fewer, blocks, n)
            return True
        except (ValueError, np.linalg.LinAlgError):
            continue
    return False


def _triple_requests(projections, views, n_states):
    """The projected-moment requests whose sum is the triple moment of three stacked
    one-hot views read through ``projections`` (one per view): a projected triple of
    every choice of a member from each view."""
    parts = (_columns_of(B, v, n_states) for B, v in zip(projections, views))
    return [
        (tuple(y for y, _ in blocks), tuple(b for _, b in blocks))
        for blocks in itertools.product(*parts)
    ]


def _set_conditionals(plan, w, C, r, blocks, n_states):
    """``plan.weights`` and the conditionals of its views' members from a decomposition
    ``w, C`` (:func:`three_view_decomposition`) with ``r`` components (view blocks
    ``blocks``, :func:`_view_blocks`)."""
    v1, v2, v3 = plan.views
    _, P13, P23 = blocks
    w = np.maximum(w, _EPS)
    weights = w / w.sum()
    third = _split(C, v3, n_states)
    G3 = _pinv(weights[:, None] * np.vstack(list(third.values())).T, r)
    plan.weights = weights
    plan.conditionals = {
        **third,
        **_split(P13 @ G3, v1, n_states),
        **_split(P23 @ G3, v2, n_states),
    }


def _constant_hidden_cpts(tree, moments):
    """:func:`tensor_cpts` with one state per hidden node: every hidden node is
    constant, so a column below one has its marginal as table and one below another
    column the pair table normalised - the maximum-likelihood tables on the tree, with
    no decomposition to run."""
    d = tree.n_observed
    singletons = moments.singletons()
    edges = [(int(tree.parent[c]), int(c)) for c in tree.preorder[1:]]
    wanted = sorted({(min(p, c), max(p, c)) for p, c in edges if p < d and c < d})
    pairs = moments.pairs(wanted) if wanted else {}
    root = int(tree.root)
    root_marginal = singletons[root] if root < d else np.ones(1)
    cpts = {}
    for p, c in edges:
        if c >= d:  # a hidden child: one state whatever its parent's
            table = np.ones((int(moments.n_states[p]) if p < d else 1, 1))
        elif p < d:
            table = _pair(pairs, p, c)
        else:
            table = np.asarray(singletons[c], dtype=float)[None, :]
        cpts[c] = _normalise_rows(np.asarray(table, dtype=float))
    return np.asarray(root_marginal, dtype=float), cpts


def _columns_of(B, view, n_states):
    """Split the columns of a projection acting on a stacked view over its members."""
    bounds = np.cumsum([0] + [int(n_states[y]) for y in view])
    return [(y, B[:, bounds[i] : bounds[i + 1]]) for i, y in enumerate(view)]


def _conditional(plan, y, pairs):
    """``P(y | h)`` for any observed ``y`` from its pairs with a view in another
    direction: ``P[y, V] = O_y diag(P(h)) O_V^T``."""
    if y not in plan.conditionals:
        view = plan.view_for(y)
        Ov = np.vstack([plan.conditionals[v] for v in view])
        G = _pinv(plan.weights[:, None] * Ov.T, Ov.shape[1])
        plan.conditionals[y] = _normalise_columns(_block(pairs, (y,), view) @ G)
    return plan.conditionals[y]


def _pair(pairs, i, j):
    return pairs[(i, j)] if (i, j) in pairs else pairs[(j, i)].T


def tensor_cpts(tree, moments, n_hidden_states, random_state=None, n_anchors=4, view_size=3):
    """Explicit CPTs on ``tree`` from three-view tensor decompositions (Anandkumar et al. (JMLR
    2014)).

    For every hidden node ``h`` with at least three neighbours, groups of observed
    variables in three different neighbour directions (the ``view_size`` nearest in each)
    are conditionally independent given ``h``: :func:`three_view_decomposition` of their
    stacked one-hot features gives ``P(h)`` and ``P(x | h)`` for every member (with as
    many states as the views support, at most ``n_hidden_states``), and the pairs of any
    other observed ``y`` with a view in another direction give ``P(y | h)``. The CPTs
    follow with consistent hidden-state labels:

    * hidden ``p`` -> observed ``c``: ``P(c | p)``;
    * observed ``p`` -> hidden ``c``: Bayes' rule from ``P(p | c)`` and ``P(c)``;
    * observed ``p`` -> observed ``c``: the pair table ``P(p, c)`` normalised;
    * hidden ``p`` -> hidden ``c``: ``P(c | p)`` solves ``P(y | p) = P(y | c) P(c | p)`` in
      least squares over the ``n_anchors`` observed ``y`` nearest to ``c`` on its side.

    A hidden node with fewer than three neighbours (e.g. the end of a chain) is a copy of
    the nearest decomposed hidden node, joined to it by an identity table. Entries are
    projected onto the simplex (clipped, renormalised). Hidden nodes end up with
    ``min(n_hidden_states, rank the views support)`` states; :func:`expand_states` brings
    them to ``n_hidden_states``. With ``n_hidden_states=1`` every hidden node is
    constant, and the tables are the columns' marginals and normalised pair tables
    (the maximum-likelihood ones; no decomposition runs).

    Every statistic comes from ``moments`` through two batched requests: ``pairs(list)``
    and ``projected(list)`` (one triple per hidden node), so any object with the interface
    of :class:`~ltm_sklearn.moments.MomentEstimator` - empirical moments, or the marginals
    of a fitted observable representation - can be turned into explicit parameters.

    Parameters
    ----------
    tree : LatentTree
        Rooted; observed nodes may be internal.
    moments : MomentEstimator or compatible
    n_hidden_states : int
    random_state : int, RandomState instance or None
        Starts of the tensor power method; tables of a node whose decomposition fails.
    n_anchors : int, default=4
    view_size : int, default=3
        Observed variables per view (``1``: the single nearest variable per direction).

    Returns
    -------
    root_marginal : ndarray
    cpts : dict node -> ndarray of shape (k_parent, k_node)
    """
    rng = check_random_state(random_state)
    check_latent_tree(tree)
    check_moments(moments)
    k = check_whole(n_hidden_states, "n_hidden_states", 1)
    n_anchors = check_whole(n_anchors, "n_anchors", 1)
    view_size = check_whole(view_size, "view_size", 1)
    d = tree.n_observed
    n_obs = moments.n_states
    if len(n_obs) != d:
        raise ValueError(
            f"The tree has {d} observed nodes and the moments {len(n_obs)} columns: one "
            "observed node a column."
        )
    if k == 1:
        return _constant_hidden_cpts(tree, moments)
    hops = tree.hop_distances()
    # hidden nodes in a canonical order (by their distances to the columns), so that the
    # result does not depend on the node ids of the tree
    position = {h: tuple(hops[h, :d].tolist()) for h in tree.hidden_nodes}
    hidden = sorted(tree.hidden_nodes, key=position.__getitem__)
    plans = {}
    for h in hidden:
        plan = _plan_node(tree, h, hops, n_obs, view_size)
        if plan is not None:
            plans[h] = plan
    # hidden nodes without three directions copy the nearest planned hidden node
    proxy = {}
    for h in hidden:
        if h in plans:
            proxy[h] = h
        elif plans:
            proxy[h] = min(plans, key=lambda g: (hops[h, g], position[g]))
    # the pairs every later step reads, requested in one batch
    wanted = set()
    for plan in plans.values():
        v1, v2, v3 = plan.views
        for a, b in (
            *itertools.product(v1, v2),
            *itertools.product(v1, v3),
            *itertools.product(v2, v3),
        ):
            wanted.add((min(a, b), max(a, b)))
    needs = []  # (hidden node, observed y) conditionals the CPTs use
    for c in tree.preorder[1:]:
        p = int(tree.parent[c])
        if p >= d and c < d:
            needs.append((p, c))
        elif p < d and c >= d:
            needs.append((c, p))
        elif p < d:
            wanted.add((min(p, c), max(p, c)))
        elif proxy.get(p) != proxy.get(c):
            for y in _anchors(tree, hops, p, c, n_anchors):
                needs += [(p, y), (c, y)]
    needs = [(proxy[h], y) for h, y in needs if h in proxy]
    for g, y in needs:
        if y not in plans[g].members():
            for v in plans[g].view_for(y):
                wanted.add((min(y, v), max(y, v)))
    pairs = moments.pairs(sorted(wanted)) if wanted else {}
    failed = _decompose_all(plans, pairs, moments, k, rng)

    def weights(h):
        return plans[proxy[h]].weights if proxy.get(h) not in (None, *failed) else None

    def cond(h, y):
        g = proxy.get(h)
        if g is None or g in failed:
            return None
        return _conditional(plans[g], y, pairs)

    root = tree.root
    if root >= d:
        root_marginal = weights(root)
        if root_marginal is None:
            root_marginal = rng.dirichlet(np.ones(k))
    else:
        root_marginal = moments.singletons()[root]
    size = {root: len(root_marginal)}
    cpts = {}
    for c in tree.preorder[1:]:
        c = int(c)
        p = int(tree.parent[c])
        table = None
        if p >= d and c < d:
            O = cond(p, c)
            table = None if O is None else O.T
        elif p < d and c >= d:
            O, w = cond(c, p), weights(c)
            table = None if O is None else O * w[None, :]
        elif p < d:
            table = _pair(pairs, p, c)
        elif proxy.get(p) == proxy.get(c) and p in proxy and proxy[p] not in failed:
            table = np.eye(len(weights(p)))
        else:
            ys = _anchors(tree, hops, p, c, n_anchors)
            Op = [cond(p, y) for y in ys]
            Oc = [cond(c, y) for y in ys]
            if ys and all(o is not None for o in Op + Oc):
                A = np.linalg.lstsq(np.vstack(Oc), np.vstack(Op), rcond=None)[0]
                table = A.T
        if table is None:  # a failed decomposition: random tables, EM takes it from here
            kc = int(n_obs[c]) if c < d else (len(weights(c)) if weights(c) is not None else k)
            table = rng.dirichlet(np.ones(kc), size=size[p])
        table = _normalise_rows(np.asarray(table, dtype=float))
        if table.shape[0] != size[p]:
            raise AssertionError(f"state mismatch on edge {p} -> {c}")
        cpts[c] = table
        size[c] = table.shape[1]
    return np.asarray(root_marginal, dtype=float), cpts


def _anchors(tree, hops, p, c, n):
    """The ``n`` observed nodes nearest to ``c`` on its side of the edge ``(p, c)``."""
    d = tree.n_observed
    below = np.flatnonzero(hops[c, :d] < hops[p, :d])
    return [int(y) for y in below[np.argsort(hops[c, below], kind="stable")[:n]]]


def expand_states(tree, root_marginal, cpts, n_states, random_state=None, noise=0.0):
    """Give every hidden node ``n_states`` states without changing the distribution.

    A hidden node with ``r < n_states`` states gets copies of its states (state ``s``
    copies state ``s mod r``): the probability of each original state is shared equally
    by its copies, and the copies send the same tables to the node's children. The
    observed distribution is unchanged (exactly, with ``noise=0``); ``noise > 0``
    perturbs the copied rows multiplicatively by up to ``noise`` so that EM can tell the
    copies apart.

    Parameters
    ----------
    tree : LatentTree
    root_marginal : ndarray of shape (k_root,)
    cpts : dict node -> ndarray of shape (k_parent, k_node)
        A table for every non-root node.
    n_states : int
        States of every hidden node with fewer afterwards (a node with as many or more
        keeps its own).
    random_state : int, RandomState instance or None, default=None
        Seeds the perturbation (``noise > 0``).
    noise : float in [0, 1), default=0.0
        Relative perturbation of the copied rows.

    Returns
    -------
    root_marginal, cpts : the expanded parameters (new arrays).
    """
    rng = check_random_state(random_state)
    check_latent_tree(tree)
    k = check_whole(n_states, "n_states", 1)
    noise = check_real(noise, "noise", 0.0, 1.0, high_open=True)
    missing = [u for u in range(tree.n_nodes) if u != tree.root and u not in cpts]
    if missing:
        raise ValueError(f"cpts has no table for the non-root nodes {missing[:10]}.")
    cpts = {u: np.array(t, dtype=float) for u, t in cpts.items()}
    root_marginal = np.array(root_marginal, dtype=float)
    for u in tree.preorder[1:]:
        p = tree.parent[u]
        rows = len(root_marginal) if p == tree.root else cpts[p].shape[1]
        if cpts[u].ndim != 2 or cpts[u].shape[0] != rows:
            raise ValueError(
                f"The table of node {u} has shape {cpts[u].shape}; its parent {p} has "
                f"{rows} states (root_marginal's length at the root)."
            )
    for h in tree.hidden_nodes:
        r = len(root_marginal) if h == tree.root else cpts[h].shape[1]
        if r >= k:
            continue
        source = np.arange(k) % r
        share = 1.0 / np.bincount(source, minlength=r)[source]
        if h == tree.root:
            root_marginal = root_marginal[source] * share
        else:
            cpts[h] = cpts[h][:, source] * share[None, :]
        for c in tree.children[h]:
            rows = cpts[c][source]
            if noise > 0:
                rows = rows * (1.0 + noise * rng.uniform(-1.0, 1.0, size=rows.shape))
                rows /= rows.sum(axis=1, keepdims=True)
            cpts[c] = rows
    return root_marginal, cpts
