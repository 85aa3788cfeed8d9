"""Gaussian latent trees and mixtures of them: linear-Gaussian nodes on a tree.

One concept - the linear-Gaussian tree and the mixture of such trees under a discrete
root - with everything that reads its parameters: joint moments, densities with missing
entries, EM, the moment start, conditioning and sampling.

Every node ``v`` of the tree (observed column or continuous hidden variable) is linear
in its parent ``u``::

    x_v = a_v x_u + b_v + e_v,    e_v ~ N(0, s_v),    x_root ~ N(b_root, s_root),

the Gaussian graphical model on a tree of Choi et al. (2011), section 2.2 (Parikh, Song & Xing (ICML
2011)):
the correlation of two nodes is the product of the edge correlations along their path, so
``-log |corr|`` is a tree metric (:func:`~ltm_sklearn.structure.gaussian_distance`). A
*mixture* puts one discrete hidden variable above ``K`` such trees (one structure, their
own coefficients): its states switch between linear-Gaussian regimes, so clusters and
linear dependence are both followed.

The joint law of all nodes of one component is Gaussian; :func:`joint_moments` builds its
mean and covariance in one preorder pass. Densities, missing entries (marginalised
exactly, by dropping them from the observed block), posteriors of the hidden variables
and the expected statistics of EM are then Gaussian conditioning, done once per pattern
of missing entries (:func:`component_statistics`). The M-step is one least-squares
regression of each node on its parent (:func:`m_step`); hidden variables are then
rescaled to mean 0 and variance 1, which changes no likelihood and fixes the
parametrisation (:func:`standardise_hidden`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numpy.linalg import LinAlgError
from scipy.linalg import cholesky, solve_triangular
from scipy.optimize import lsq_linear
from scipy.sparse import csr_matrix
from scipy.special import logsumexp

from .._engine.threads import single_threaded
from .._engine.tree import LatentTree
from .structure.chow_liu import minimum_spanning_edges, spanning_tree_edges
from .structure.distances import pairwise_correlation

__all__ = [
    "GaussianTreeParameters",
    "joint_moments",
    "missing_patterns",
    "component_statistics",
    "m_step",
    "standardise_hidden",
    "moment_start",
    "fit_gaussian_tree",
    "mixture_log_density",
    "n_free_parameters",
    "chow_liu_from_statistics",
    "leaf_groups",
    "group_noise",
    "sample_nodes",
    "component_conditionals",
    "cluster_correlations",
]

_LOG_2PI = np.log(2.0 * np.pi)
#: smallest edge correlation of the moment start (``-log 0.01``: an edge of length 4.6)
_MIN_CORRELATION = 0.01
#: largest edge correlation of the moment start (keeps every noise variance positive)
_MAX_CORRELATION = 0.99
#: largest over-relaxation of an EM step
_MAX_STEP = 16.0
#: floor of a hidden variable's noise variance (relative to its unit variance)
_HIDDEN_NOISE_FLOOR = 1e-6
#: most row products EM keeps for a whole fit (64 MB); beyond, each pass reads the rows
#: with matrix products instead (:func:`_row_blocks`)
_CACHED_PRODUCTS = 1 << 23
#: numbers in one block of rows read with matrix products (rows x observed columns)
_BLOCK_ELEMENTS = 1 << 21


@dataclass
class GaussianTreeParameters:
    """Coefficients of ``K`` linear-Gaussian trees over one structure.

    Attributes
    ----------
    weight : ndarray of shape (K, n_nodes)
        ``a_v``, coefficient of the parent (0 at the root).
    offset : ndarray of shape (K, n_nodes)
        ``b_v`` (the mean at the root).
    noise : ndarray of shape (K, n_nodes)
        ``s_v``, variance of ``e_v`` (the variance at the root).
    log_weights : ndarray of shape (K,)
        Log mixing proportions of the discrete root.
    trees : list of LatentTree or None
        One structure per component (a mixture of trees), or ``None``: every component
        on the tree given beside the parameters.
    groups : list of ndarray or None
        Multivariate leaves: groups of columns that share a parent and whose noises are
        correlated (a full covariance within the group), or ``None``: every column its
        own leaf (:func:`leaf_groups`).
    noise_corr : ndarray of shape (K, n_nodes, n_nodes) or None
        Correlations of the noises ``e_v`` (the identity outside the groups).
    """

    weight: np.ndarray
    offset: np.ndarray
    noise: np.ndarray
    log_weights: np.ndarray
    trees: list | None = None
    groups: list | None = None
    noise_corr: np.ndarray | None = None

    @property
    def n_components(self):
        return self.weight.shape[0]

    def component(self, k):
        """``(weight, offset, noise, noise_corr)`` of component ``k`` (the arguments of
        :func:`joint_moments`; ``noise_corr`` is ``None`` without groups)."""
        corr = None if self.noise_corr is None else self.noise_corr[k]
        return self.weight[k], self.offset[k], self.noise[k], corr

    def trees_or(self, tree):
        """The structure of every component (``tree`` when they share it)."""
        return list(self.trees) if self.trees is not None else [tree] * self.n_components

    def copy(self):
        return GaussianTreeParameters(
            self.weight.copy(),
            self.offset.copy(),
            self.noise.copy(),
            self.log_weights.copy(),
            None if self.trees is None else list(self.trees),
            self.groups,
            None if self.noise_corr is None else self.noise_corr.copy(),
        )


def joint_moments(tree, weight, offset, noise, noise_corr=None):
    """Mean and covariance of all nodes of one linear-Gaussian tree, or of a stack of them.

    Listing the nodes in preorder, ``x = B x + b + e`` with ``B`` (the coefficients
    ``a_v`` at (v, parent)) strictly lower triangular, so ``x = (I - B)^-1 (b + e)``:
    mean ``(I - B)^-1 b`` and covariance ``(I - B)^-1 S (I - B)^-T``, with ``S`` the
    covariance of the noises: ``diag(s)``, or ``diag(s)^1/2 R diag(s)^1/2`` with the
    correlations ``R = noise_corr`` of multivariate leaves. The coefficients may carry
    leading dimensions (the components of a mixture over one structure, or ``tree`` a
    list of trees over the same nodes, one per row): the moments then carry them too.

    Returns
    -------
    mean : ndarray of shape (..., n_nodes)
    cov : ndarray of shape (..., n_nodes, n_nodes)

    Examples
    --------
    >>> from ltm_sklearn import LatentTree
    >>> t = LatentTree([(0, 2), (1, 2)], n_observed=2)
    >>> mean, cov = joint_moments(t, np.array([0.5, -1.0, 0.0]), np.zeros(3),
    ...                           np.array([0.75, 1.0, 1.0]))
    >>> cov
    array([[ 1. , -0.5,  0.5],
           [-0.5,  2. , -1. ],
           [ 0.5, -1. ,  1. ]])
    """
    inv = _tree_inverse(tree, weight)
    mean = np.einsum("...ij,...j->...i", inv, offset)
    if noise_corr is None:
        cov = (inv * noise[..., None, :]) @ np.swapaxes(inv, -1, -2)
    else:
        sd = np.sqrt(noise)
        scaled = noise_corr * sd[..., :, None] * sd[..., None, :]
        cov = inv @ scaled @ np.swapaxes(inv, -1, -2)
    return mean, cov


def _tree_inverse(tree, weight):
    """``(I - B)^-1`` in node coordinates (``x = B x + b + e``), for coefficients with
    any leading dimensions, or for a list of trees with one row of ``weight`` each.

    Row ``v`` of the inverse is ``e_v + a_v`` times its parent's row (``x_v = a_v x_u +
    b_v + e_v``), so the rows fill in from the root down, one depth of the tree at a
    time. Trees of their own (whose depths differ) invert ``I - B`` as a stack.
    """
    if isinstance(tree, (list, tuple)):
        parent = _parents(tree)
        K, n = parent.shape
        L = np.zeros((K, n, n))
        L[:, np.arange(n), np.arange(n)] = 1.0
        k, v = np.nonzero(parent >= 0)
        L[k, v, parent[k, v]] = -weight[k, v]
        return np.linalg.inv(L)
    n = tree.n_nodes
    inv = np.zeros(weight.shape[:-1] + (n, n))
    inv[..., np.arange(n), np.arange(n)] = 1.0
    for nodes, parents in tree.depth_levels():
        inv[..., nodes, :] += weight[..., nodes, None] * inv[..., parents, :]
    return inv


def missing_patterns(X):
    """Group the rows of ``X`` by which entries are NaN.

    Returns
    -------
    list of (observed, rows)
        ``observed``: boolean mask of the observed columns; ``rows``: row indices.
    """
    mask = ~np.isnan(X)
    if mask.all():
        return [(mask[0] if len(X) else np.ones(X.shape[1], bool), np.arange(len(X)))]
    keys, inverse = np.unique(mask, axis=0, return_inverse=True)
    inverse = np.ravel(inverse)
    order = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[order], np.arange(len(keys) + 1))
    return [(keys[i], order[bounds[i] : bounds[i + 1]]) for i in range(len(keys))]


class _Pattern(NamedTuple):
    """The rows of one pattern of missing entries, with what EM reads of them.

    ``products`` holds ``x_i x_j`` of every row for the pairs ``i <= j`` of observed
    columns (``pairs``), or ``None`` when the rows are read with matrix products.
    """

    observed: np.ndarray
    rows: np.ndarray
    obs: np.ndarray
    values: np.ndarray
    pairs: tuple
    products: np.ndarray | None


def _designs(X, patterns, cache=False):
    """:class:`_Pattern` of each ``(observed, rows)`` of :func:`missing_patterns`; with
    ``cache``, the row products of the patterns are kept while they fit in
    ``_CACHED_PRODUCTS`` numbers."""
    if patterns and isinstance(patterns[0], _Pattern):
        return patterns
    out, budget = [], _CACHED_PRODUCTS if cache else 0
    for observed, rows in patterns:
        obs = np.flatnonzero(observed)
        values = X if len(rows) == len(X) else X[rows]  # rows ascending: all is X
        if len(obs) < X.shape[1]:
            values = values[:, obs]
        pairs = np.triu_indices(len(obs))
        products = None
        if len(rows) * len(pairs[0]) <= budget:
            products = values[:, pairs[0]] * values[:, pairs[1]]
            budget -= products.size
        out.append(_Pattern(observed, rows, obs, values, pairs, products))
    return out


def _row_blocks(pattern):
    """``(rows, x)`` by blocks of rows of one pattern whose row products are not kept."""
    step = max(64, _BLOCK_ELEMENTS // max(len(pattern.obs), 1))
    for a in range(0, len(pattern.rows), step):
        yield slice(a, a + step), pattern.values[a : a + step]


def _weighted_scatter(pattern, r):
    """``(sum r x, sum r x x^T)`` of a pattern's rows for each row of weights ``r``
    (``(K, rows)``): ``(K, m)`` and ``(K, m, m)``. With the row products kept, one
    product of the weights with them; else a product of the weighted rows with the rows
    per weight: for many columns the row products (``m (m + 1) / 2`` a row) cost more
    to form at every pass than the ``K`` products cost (on 2,000 rows x 100 columns
    they took half of a fit)."""
    K, m = len(r), len(pattern.obs)
    if pattern.products is not None:
        i, j = pattern.pairs
        packed = r @ pattern.products
        C = np.empty((K, m, m))
        C[:, i, j] = packed
        C[:, j, i] = packed
        return r @ pattern.values, C
    ax, C = np.zeros((K, m)), np.zeros((K, m, m))
    for part, x in _row_blocks(pattern):
        rp = r[:, part]
        ax += rp @ x
        for k in range(K):
            C[k] += (x * rp[k][:, None]).T @ x
    return ax, C


def _observed_factors(cov, obs):
    """Inverse Cholesky factors ``L^-1`` and log-determinants of the observed blocks
    ``L L^T = cov[obs, obs]`` of a stack of covariances (:func:`_cholesky`)."""
    block = cov[:, obs[:, None], obs]
    try:
        chol = np.linalg.cholesky(block)
    except np.linalg.LinAlgError:  # a near-singular block: jitter the ones that need it
        chol = np.stack([_cholesky(b) for b in block])
    logdet = 2.0 * np.log(np.diagonal(chol, axis1=-2, axis2=-1)).sum(axis=-1)
    return np.linalg.inv(chol), logdet


def _pattern_factors(patterns, cov):
    """Per pattern (:class:`_Pattern`), :func:`_observed_factors` of the stacked
    covariances ``cov``, or ``None`` for a pattern without observed entries: computed once
    an EM iteration, for the densities and then the expected statistics."""
    return [_observed_factors(cov, p.obs) if p.obs.size else None for p in patterns]


def _stacked(mean, cov):
    """``mean`` and ``cov`` with their leading dimensions flattened into one."""
    n = mean.shape[-1]
    return mean.reshape(-1, n), cov.reshape(-1, n, n)


def _logsumexp_rows(a):
    """``log sum exp`` of each row of a 2-D array of finite or ``-inf`` entries (scipy's
    is 3-4x slower on the few columns of a mixture; a row all ``-inf`` gives ``-inf``)."""
    top = a.max(axis=1)
    shift = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return shift + np.log(np.exp(a - shift[:, None]).sum(axis=1))


def _cholesky(block):
    """Cholesky factor of a covariance block.

    Every node's noise variance is floored, so the block is positive definite; a chain of
    near-deterministic edges (duplicated or collinear columns) can still make it
    numerically singular, and then a jitter growing from 1e-12 of the mean variance is
    added to the diagonal until the factorisation succeeds.
    """
    try:
        return np.linalg.cholesky(block)
    except np.linalg.LinAlgError:
        pass
    scale = max(float(np.mean(np.diag(block))), 1e-300)
    for jitter in 10.0 ** np.arange(-12, 1):
        try:
            return np.linalg.cholesky(block + jitter * scale * np.eye(len(block)))
        except np.linalg.LinAlgError:
            continue
    raise np.linalg.LinAlgError("covariance block not positive definite even with jitter")


def component_log_density(X, patterns, mean, cov, n_observed, factors=None):
    """Log-density of every row of ``X`` (NaN marginalised) under one component, or under
    each of a stack of them (``mean`` of shape (..., n_nodes): the output (..., n_rows));
    ``factors``: the patterns' :func:`_pattern_factors`, when already computed.

    The quadratic form ``(x - mu)^T P (x - mu)`` of each pattern's precision ``P`` is
    expanded as ``x^T P x - 2 x^T P mu + mu^T P mu``: the row products ``x_i x_j``
    (:func:`_designs`) then give the forms of all components in one matrix product.
    """
    batch = mean.shape[:-1]
    mean, cov = _stacked(mean, cov)
    out = np.zeros((len(mean), len(X)))
    patterns = _designs(X, patterns)
    factors = _pattern_factors(patterns, cov) if factors is None else factors
    for p, factor in zip(patterns, factors):
        if factor is None:
            continue
        inv_chol, logdet = factor
        prec = np.swapaxes(inv_chol, -1, -2) @ inv_chol
        mu = mean[:, p.obs]
        pm = np.einsum("kij,kj->ki", prec, mu)
        i, j = p.pairs
        packed = prec[:, i, j] * np.where(i == j, 1.0, 2.0)
        const = logdet + len(p.obs) * _LOG_2PI + np.einsum("ki,ki->k", mu, pm)
        every_row = len(p.rows) == len(X)
        if p.products is not None:
            blocks = [(slice(None), p.values, packed @ p.products.T)]
        else:  # x^T P x of each component from the product x P (:func:`_weighted_scatter`)
            blocks = (
                (part, x, np.stack([np.einsum("ri,ri->r", x @ P, x) for P in prec]))
                for part, x in _row_blocks(p)
            )
        for part, x, xpx in blocks:
            quad = xpx - 2.0 * (pm @ x.T)
            out[:, part if every_row else p.rows[part]] = -0.5 * (quad + const[:, None])
    return out.reshape(batch + (len(X),))


@single_threaded
def mixture_log_density(X, tree, params, patterns=None):
    """``log p(x)`` of each row, and ``log p(k, x)`` per component (NaN marginalised)."""
    patterns = missing_patterns(X) if patterns is None else patterns
    mean, cov = component_moments(tree, params)
    joint = params.log_weights + component_log_density(X, patterns, mean, cov, tree.n_observed).T
    return _logsumexp_rows(joint), joint


def component_moments(tree, params):
    """Means ``(K, n_nodes)`` and covariances ``(K, n_nodes, n_nodes)`` of all nodes in
    each component of a mixture (:func:`joint_moments`)."""
    trees = tree if params.trees is None else list(params.trees)
    return joint_moments(trees, params.weight, params.offset, params.noise, params.noise_corr)


def component_statistics(X, patterns, mean, cov, n_observed, resp, factors=None):
    """Expected sufficient statistics of one component for EM, or of each of a stack.

    For each pattern of observed entries ``O`` the other nodes ``M`` (hidden variables
    and missing entries) have the Gaussian posterior ``mu_M + S_MO S_OO^-1 (x_O - mu_O)``,
    ``S_MM - S_MO S_OO^-1 S_OM``. With row weights ``resp`` (responsibilities times
    sample weights) this returns ``W = sum r``, ``S1 = sum r E[z]`` and
    ``S2 = sum r E[z z^T]`` over all nodes ``z``.

    Every posterior mean is linear in the residual ``y = x_O - mu_O``: ``z - mu = [y,
    G^T y]`` with ``G = S_OO^-1 S_OM``, so the sums need only the weighted scatter
    ``C = sum r y y^T`` of the observed block and products with ``G``; ``C`` is
    ``sum r x x^T`` (one matrix product of the weights with the row products
    ``x_i x_j``, :func:`_designs`) less the terms in ``mu``.

    ``mean`` (..., n_nodes), ``cov`` (..., n_nodes, n_nodes) and ``resp`` (..., n_rows)
    may carry leading dimensions (the components of a mixture), and then so do
    ``W`` (...), ``S1`` (..., n_nodes) and ``S2`` (..., n_nodes, n_nodes). ``factors``:
    the patterns' :func:`_pattern_factors`, when already computed.
    """
    batch = mean.shape[:-1]
    n = mean.shape[-1]
    mean, cov = _stacked(mean, cov)
    resp = resp.reshape(-1, resp.shape[-1])
    K = len(mean)
    s1 = np.zeros((K, n))
    s2 = np.zeros((K, n, n))
    total = np.zeros(K)
    patterns = _designs(X, patterns)
    factors = _pattern_factors(patterns, cov) if factors is None else factors
    for p, factor in zip(patterns, factors):
        r = resp[:, p.rows] if len(p.rows) < resp.shape[1] else resp
        w = r.sum(axis=-1)
        full = np.zeros(n, bool)
        full[:n_observed] = p.observed
        obs, other = np.flatnonzero(full), np.flatnonzero(~full)
        idx = np.concatenate([obs, other])
        dev1 = np.zeros((K, n))  # sum r (E[z] - mu), in the order obs, other
        dev2 = np.zeros((K, n, n))  # sum r (E[z] - mu)(E[z] - mu)^T, same order
        m = len(obs)
        post = cov[:, other[:, None], other]
        if m:
            mu = mean[:, obs]
            ax, C = _weighted_scatter(p, r)  # sum r x, sum r x x^T
            C -= ax[:, :, None] * mu[:, None, :] + mu[:, :, None] * ax[:, None, :]
            C += w[:, None, None] * (mu[:, :, None] * mu[:, None, :])
            a = ax - w[:, None] * mu
            inv_chol = factor[0]
            cross = cov[:, obs[:, None], other]
            gain = np.swapaxes(inv_chol, -1, -2) @ (inv_chol @ cross)  # S_OO^-1 S_OM
            CG = C @ gain
            dev1[:, :m], dev1[:, m:] = a, np.einsum("ki,kij->kj", a, gain)
            dev2[:, :m, :m], dev2[:, :m, m:] = C, CG
            dev2[:, m:, :m] = np.swapaxes(CG, -1, -2)
            dev2[:, m:, m:] = np.swapaxes(gain, -1, -2) @ CG
            post = post - np.swapaxes(cross, -1, -2) @ gain
        dev2[:, m:, m:] += w[:, None, None] * post
        mu = mean[:, idx]
        block = (
            w[:, None, None] * (mu[:, :, None] * mu[:, None, :])
            + mu[:, :, None] * dev1[:, None, :]
            + dev1[:, :, None] * mu[:, None, :]
            + dev2
        )
        if m == n_observed:  # idx is the identity: observed columns come first
            s1 += w[:, None] * mu + dev1
            s2 += block
        else:
            s1[:, idx] += w[:, None] * mu + dev1
            s2[:, idx[:, None], idx] += block
        total += w
    s2 = 0.5 * (s2 + np.swapaxes(s2, -1, -2))
    return total.reshape(batch), s1.reshape(batch + (n,)), s2.reshape(batch + (n, n))


def _expected_moments(total, s1, s2):
    """Mean and covariance of all nodes from the expected statistics ``W, S1, S2``."""
    total = np.asarray(total, dtype=float)
    mean = s1 / total[..., None]
    return mean, s2 / total[..., None, None] - mean[..., :, None] * mean[..., None, :]


def m_step(tree, total, s1, s2, noise_floor):
    """Regress every node on its parent from expected statistics (one component, or a
    stack of them: leading dimensions on ``total``, ``s1``, ``s2``, over one structure
    or, with a list of trees, each over its own).

    ``a_v = cov(u, v) / var(u)``, ``b_v = E v - a_v E u``, ``s_v = var(v) - a_v cov(u, v)``;
    ``s_v`` is floored at ``noise_floor[v]``. The root has ``a = 0``: its mean and its
    variance.
    """
    mean, cov = _expected_moments(total, s1, s2)
    n = mean.shape[-1]
    parent = _parents(tree) if isinstance(tree, (list, tuple)) else tree.parent
    v = np.arange(n)
    u = np.where(parent >= 0, parent, v)  # the root is read against itself, then a = 0
    flat_mean, flat_cov = mean.reshape(-1, n), cov.reshape(-1, n, n)
    k = np.arange(len(flat_mean))[:, None]
    var_u = flat_cov[k, u, u].reshape(mean.shape)
    cov_uv = flat_cov[k, u, v].reshape(mean.shape)
    mean_u = flat_mean[k, u].reshape(mean.shape)
    a = np.divide(cov_uv, var_u, out=np.zeros_like(cov_uv), where=(var_u > 0) & (parent >= 0))
    offset = mean - a * mean_u
    noise = np.maximum(cov[..., v, v] - a * cov_uv, noise_floor)
    return a, offset, noise


def _parents(trees):
    """The parent arrays of a list of trees over the same nodes, ``(len(trees), n_nodes)``."""
    return np.stack([t.parent for t in trees])


def leaf_groups(tree, min_size=2):
    """The columns under each hidden node that has at least ``min_size`` observed
    children: the multivariate leaves of a structure (ascending column indices)."""
    children = {}
    for v in range(tree.n_observed):
        u = int(tree.parent[v])
        if u >= tree.n_observed:
            children.setdefault(u, []).append(v)
    return [np.array(c) for _, c in sorted(children.items()) if len(c) >= min_size]


def group_noise(tree, groups, total, s1, s2, weight, noise, noise_floor):
    """Noise variances and correlations of multivariate leaves (one component's M-step,
    or a stack's, as :func:`m_step`).

    Every column of a group is regressed on the group's parent (:func:`m_step`: with one
    regressor shared by the group, the per-column least squares are the joint ones); the
    noises' covariance is that of the residuals, ``S_G = cov(G, G) - a_G a_G^T var(u)``,
    plus ``noise_floor`` on its diagonal (as scikit-learn's ``reg_covar``), which keeps it
    positive definite for duplicated or collinear columns.

    Returns
    -------
    noise : ndarray of shape (..., n_nodes)
        ``noise`` with the groups' variances replaced.
    noise_corr : ndarray of shape (..., n_nodes, n_nodes)
    """
    mean, cov = _expected_moments(total, s1, s2)
    noise = noise.copy()
    n = tree.n_nodes
    corr = np.zeros(noise.shape + (n,))
    corr[..., np.arange(n), np.arange(n)] = 1.0
    for g in groups:
        u = tree.parent[g[0]]
        a = weight[..., g]
        block = (
            cov[..., g[:, None], g]
            - a[..., :, None] * a[..., None, :] * cov[..., u, u][..., None, None]
        )
        diag = np.arange(len(g))
        block[..., diag, diag] = np.maximum(block[..., diag, diag], 0.0) + noise_floor[g]
        sd = np.sqrt(block[..., diag, diag])
        corr[..., g[:, None], g] = block / (sd[..., :, None] * sd[..., None, :])
        noise[..., g] = sd**2
    return noise, corr


def sample_nodes(tree, weight, offset, noise, noise_corr, n_samples, rng, groups=None):
    """Draw the values of all nodes of one linear-Gaussian tree, ``(n_samples, n_nodes)``.

    Nodes are drawn in preorder, each from its parent; the noises of a multivariate leaf
    are then correlated by the Cholesky factor of their correlations (the columns of a
    group are leaves, so nothing below them moves).
    """
    x = np.zeros((n_samples, tree.n_nodes))
    z = np.empty((n_samples, tree.n_nodes))
    for v in tree.preorder:
        u = tree.parent[v]
        base = weight[v] * x[:, u] if u >= 0 else 0.0
        z[:, v] = rng.standard_normal(n_samples)
        x[:, v] = base + offset[v] + np.sqrt(noise[v]) * z[:, v]
    for g in groups or ():
        chol = np.linalg.cholesky(noise_corr[np.ix_(g, g)])
        x[:, g] += np.sqrt(noise[g]) * (z[:, g] @ chol.T - z[:, g])
    return x


def standardise_hidden(tree, weight, offset, noise):
    """Rescale every hidden variable to mean 0, variance 1 (same law of the columns).

    Replacing ``h`` by ``(h - m_h) / sd_h`` changes only the equations of ``h`` and of
    its children, and no likelihood. The coefficients may carry leading dimensions (the
    components of a mixture over one structure).
    """
    weight, offset, noise = weight.copy(), offset.copy(), noise.copy()
    if tree.n_nodes == tree.n_observed:
        return weight, offset, noise
    inv = _tree_inverse(tree, weight)
    mean = np.einsum("...ij,...j->...i", inv, offset)
    var = np.einsum("...ij,...j->...i", inv * inv, noise)  # the covariance's diagonal
    hidden = np.zeros(tree.n_nodes, bool)
    hidden[tree.n_observed :] = True
    sd = np.sqrt(np.maximum(var, 1e-300))
    v = tree.preorder[1:]
    u = tree.parent[v]
    below = v[hidden[u]]  # children of a hidden parent read the rescaled parent
    above = tree.parent[below]
    offset[..., below] += weight[..., below] * mean[..., above]
    weight[..., below] *= sd[..., above]
    h = np.flatnonzero(hidden)
    weight[..., h] /= sd[..., h]
    offset[..., h] = (offset[..., h] - mean[..., h]) / sd[..., h]
    noise[..., h] /= sd[..., h] ** 2
    return weight, offset, noise


#: largest design (pairs x edges) of :func:`moment_start` solved as it is; a larger one
#: is solved through its normal equations (:func:`_box_least_squares`): at 100 / 200 /
#: 300 columns 0.03 / 0.3 / 0.9 s against 0.27 / 8.0 / 38 s, the same lengths to 1e-14 /
#: 2e-10 / 5e-7 (the last two were the iterative solver's, not converged)
_DENSE_LSQ_ENTRIES = 1 << 18


def _box_least_squares(A, b, bounds):
    """``argmin ||A x - b||`` over ``lo <= x <= hi`` (``bounds``), by the exact
    active-set solver (bounded-variable least squares): on ``A`` itself up to
    ``_DENSE_LSQ_ENTRIES`` entries (6x faster than the iterative solver at 30 columns,
    and a lower residual), beyond on the Cholesky factor ``R`` of ``A^T A`` and ``c``
    with ``R^T c = A^T b`` (``||R x - c||^2`` is ``||A x - b||^2`` up to a constant:
    the same minimiser, from ``edges x edges`` rows instead of ``pairs x edges``)."""
    if A.shape[0] * A.shape[1] <= _DENSE_LSQ_ENTRIES:
        return lsq_linear(A.toarray(), b, bounds, method="bvls").x
    gram = np.asarray((A.T @ A).todense())
    for ridge in (0.0, 1e-10):
        # two edges on the same paths (a hidden node of degree two) make A^T A singular:
        # a ridge of 1e-10 of its largest diagonal entry picks one of the minimisers
        try:
            R = cholesky(gram + ridge * gram.diagonal().max() * np.eye(len(gram)))
        except LinAlgError:
            continue
        c = solve_triangular(R, A.T @ b, trans="T")
        return lsq_linear(R, c, bounds, method="bvls").x
    return lsq_linear(A, b, bounds).x


def moment_start(tree, corr):
    """Linear-Gaussian coefficients whose correlations match ``corr`` along the tree.

    Edge lengths ``l_e >= 0`` are fitted by least squares to ``-log |corr_ij| = sum of
    l_e on the path i - j`` (pairs weighted by ``corr_ij^2``: weak correlations carry
    little information about the path), the edge correlations are ``exp(-l_e)``, and the
    signs of the columns are propagated along the maximum spanning tree of ``|corr|``
    (hidden variables taken positive). Every node has mean 0 and variance 1: the columns
    are expected standardised.

    Returns
    -------
    weight, offset, noise : ndarray of shape (n_nodes,)
    """
    d, n = tree.n_observed, tree.n_nodes
    weight, offset, noise = np.zeros(n), np.zeros(n), np.ones(n)
    if n == 1:
        return weight, offset, noise
    edge_of = {int(v): e for e, v in enumerate(tree.preorder[1:])}  # node -> edge to parent
    ancestors = []  # each column and its ancestors up to the root
    for i in range(d):
        path, v = [i], i
        while tree.parent[v] >= 0:
            v = int(tree.parent[v])
            path.append(v)
        ancestors.append(path)
    rows, cols, target, w = [], [], [], []
    k = 0
    for i in range(d):
        above_i = {v: depth for depth, v in enumerate(ancestors[i])}
        for j in range(i + 1, d):
            # the path i - j: up from i and up from j to their lowest common ancestor
            depth_j = next(t for t, v in enumerate(ancestors[j]) if v in above_i)
            meet = ancestors[j][depth_j]
            path = ancestors[i][: above_i[meet]] + ancestors[j][:depth_j]
            rho = abs(corr[i, j])
            rows.extend([k] * len(path))
            cols.extend(edge_of[v] for v in path)
            target.append(-np.log(max(rho, 1e-12)))
            w.append(max(rho, 1e-3))
            k += 1
    signs = np.ones(n)
    if d >= 2:
        A = csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(k, len(edge_of)))
        w = np.asarray(w)
        A = A.multiply(w[:, None]).tocsr()
        bounds = (0.0, -np.log(_MIN_CORRELATION))
        lengths = _box_least_squares(A, np.asarray(target) * w, bounds)
        span = LatentTree(spanning_tree_edges(1.0 - np.abs(corr[:d, :d])), d, root=0)
        for v in span.preorder[1:]:
            u = span.parent[v]
            signs[v] = signs[u] * (1.0 if corr[v, u] >= 0 else -1.0)
    else:
        lengths = np.full(len(edge_of), -np.log(0.5))
    for v, e in edge_of.items():
        rho = float(np.clip(np.exp(-lengths[e]), _MIN_CORRELATION, _MAX_CORRELATION))
        u = tree.parent[v]
        weight[v] = signs[u] * signs[v] * rho
        noise[v] = 1.0 - rho**2
    return weight, offset, noise


def n_free_parameters(tree, n_components, groups=None):
    """Free parameters of a mixture of ``n_components`` linear-Gaussian trees.

    Per component each observed node has a coefficient, an offset and a noise variance
    (the root: a mean and a variance); a standardised hidden variable keeps only its
    coefficient (none at the root), and one of degree two not even that (only the product
    of its two edge correlations is identifiable). A multivariate leaf of ``m`` columns
    adds the ``m (m - 1) / 2`` correlations of its noises; when it is all the tree holds
    (one hidden variable over all columns) its coefficients are not identifiable either
    and the count is that of a full covariance, ``d + d (d + 1) / 2``. The discrete root
    adds ``K - 1`` proportions.
    """
    d, n = tree.n_observed, tree.n_nodes
    # an observed root has a mean and a variance but no coefficient; a hidden root nothing
    per = 3 * d + (n - d) - 1
    # a hidden variable with two neighbours leaves only the product of its two edge
    # correlations identifiable
    per -= sum(1 for h in tree.hidden_nodes if tree.degree(h) == 2)
    for g in groups or ():
        per += len(g) * (len(g) - 1) // 2
    if groups and len(groups[0]) == d and n == d + 1:
        # one hidden variable over one leaf of all columns: its coefficients are absorbed
        # by the noises' full covariance, whatever the degree of the hidden variable
        per = d + d * (d + 1) // 2
    return n_components * per + n_components - 1


def _check_groups(trees, groups, relearn):
    """Groups as int arrays, each of columns with one parent in every tree."""
    if not groups:
        return None
    if relearn:
        raise ValueError("groups (multivariate leaves) cannot be used with relearn_trees.")
    groups = [np.asarray(g, dtype=np.int64) for g in groups]
    seen = np.concatenate(groups)
    d = trees[0].n_observed
    if len(np.unique(seen)) != len(seen) or seen.min() < 0 or seen.max() >= d:
        raise ValueError(f"groups must be disjoint sets of columns 0..{d - 1}.")
    for t in trees:
        for g in groups:
            if len(set(t.parent[g].tolist())) != 1:
                raise ValueError(f"The columns {g.tolist()} of a group must share a parent.")
    return groups


# small dense blocks: BLAS threads cost more than they give (and starve on busy cores)
@single_threaded
def fit_gaussian_tree(
    X,
    tree,
    n_components=1,
    *,
    sample_weight=None,
    corr=None,
    labels=None,
    max_iter=300,
    tol=1e-4,
    reg_covar=1e-6,
    relearn_trees=False,
    init=None,
    groups=None,
):
    """EM for a mixture of linear-Gaussian trees over one structure (or one per component).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_observed)
        Standardised columns; NaN entries are marginalised.
    tree : LatentTree
    n_components : int, default=1
        States of the discrete root (1: a single Gaussian latent tree).
    sample_weight : ndarray of shape (n_samples,), default=None
    corr : ndarray of shape (n_observed, n_observed), default=None
        Correlations for the moment start (default: :func:`pairwise_correlation` of X).
    labels : ndarray of shape (n_samples,), default=None
        Initial hard assignment of the rows to components (``n_components > 1``): the
        first M-step reads the posteriors of the single-tree start with these weights.
    max_iter : int, default=200
    tol : float, default=1e-4
        Stop when the weighted mean log-likelihood gains less than ``tol``.
    reg_covar : float, default=1e-6
        Floor of the noise variance of each column (added stability on collinear or
        duplicated columns, as scikit-learn's ``GaussianMixture``).
    relearn_trees : bool, default=False
        Trees over the observed columns only: re-learn each component's tree in every
        M-step as the Chow-Liu tree of its expected statistics (the maximum of the
        expected complete log-likelihood over trees and coefficients: the mixture of
        trees of Meila & Jordan 2000, with Gaussian nodes); a component of at most
        ``n_observed`` rows keeps its tree (its correlations are degenerate). The trees
        end in ``params.trees``.
    init : GaussianTreeParameters, default=None
        Start from these coefficients (e.g. a fit stopped at a looser ``tol``) instead of
        the moment start; ``corr`` and ``labels`` are then not used.
    groups : list of array-like of int, default=None
        Multivariate leaves (e.g. :func:`leaf_groups`): the columns of each group share a
        parent and their noises get a full covariance (:func:`group_noise`). A group of
        all the columns under one hidden variable makes each component a full-covariance
        Gaussian. Not with ``relearn_trees``.

    Returns
    -------
    params : GaussianTreeParameters
    trace : list of float
        Weighted mean log-likelihood after each iteration.
    converged : bool
    """
    relearn = relearn_trees
    X = np.asarray(X, dtype=float)
    n, d = X.shape
    K = int(n_components)
    trees = list(tree) if isinstance(tree, (list, tuple)) else [tree] * K
    tree = trees[0]
    if relearn and any(t.n_nodes != d for t in trees):
        raise ValueError("relearn_trees needs trees over the observed columns only.")
    groups = _check_groups(trees, groups, relearn)
    sw = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=float)
    patterns = _designs(X, missing_patterns(X), cache=True)
    floor = np.full(tree.n_nodes, _HIDDEN_NOISE_FLOOR)
    floor[:d] = reg_covar
    if init is not None:
        if init.n_components != K or init.weight.shape[1] != tree.n_nodes:
            raise ValueError(
                f"init has {init.n_components} components of {init.weight.shape[1]} nodes, "
                f"not {K} of {tree.n_nodes}."
            )
        params = init.copy()
        if groups is not None and params.groups is None:
            params.groups = groups
            params.noise_corr = np.tile(np.eye(tree.n_nodes), (K, 1, 1))
        if params.trees is None and (relearn or any(t is not tree for t in trees)):
            params.trees = trees  # the structures given, as the moment start keeps them
        return _run_em(X, tree, patterns, params, sw, floor, max_iter, tol, relearn)
    if corr is None:
        corr = pairwise_correlation(X, sw)
    start = moment_start(tree, corr)
    params = GaussianTreeParameters(
        np.tile(start[0], (K, 1)),
        np.tile(start[1], (K, 1)),
        np.tile(start[2], (K, 1)),
        np.full(K, -np.log(K)),
        None if all(t is tree for t in trees) and not relearn else trees,
        groups,
        None if groups is None else np.tile(np.eye(tree.n_nodes), (K, 1, 1)),
    )
    if params.trees is not None:
        for k in range(K):
            if trees[k] is not tree:  # the shared start is the first tree's already
                params.weight[k], params.offset[k], params.noise[k] = moment_start(trees[k], corr)
    if K > 1:
        if labels is None:
            raise ValueError("n_components > 1 needs initial labels.")
        resp = sw[:, None] * (np.asarray(labels)[:, None] == np.arange(K))
        moments = (*component_moments(tree, params), None)
        _m_steps(tree, X, patterns, params, moments, resp, floor, relearn)
    return _run_em(X, tree, patterns, params, sw, floor, max_iter, tol, relearn)


def _run_em(X, tree, patterns, params, sw, floor, max_iter, tol, relearn):
    """Accelerated EM iterations from ``params`` until the gain is below ``tol``."""
    trace, converged = [], False
    moments, joint, log_p, ll = _evaluate(X, tree, patterns, params, sw)
    trace.append(ll)
    step = 1.0
    for _ in range(max_iter - 1):
        resp = np.exp(joint - log_p[:, None]) * sw[:, None]
        em = params.copy()
        _m_steps(tree, X, patterns, em, moments, resp, floor, relearn)
        if em.trees is not None and any(a != b for a, b in zip(em.trees, params.trees)):
            step = 1.0  # a new structure: no direction to extrapolate along
        # adaptive over-relaxation (Salakhutdinov & Roweis 2003): move ``step`` times the
        # EM step while that raises the likelihood, else fall back to the EM step itself
        trial = _extrapolate(tree, params, em, step, floor) if step > 1.0 else em
        found = _evaluate(X, tree, patterns, trial, sw)
        if step > 1.0 and not found[3] > ll:
            step, trial = 1.0, em
            found = _evaluate(X, tree, patterns, em, sw)
        else:
            step = min(2.0 * step, _MAX_STEP)
        params, (moments, joint, log_p, new) = trial, found
        trace.append(new)
        if new - ll < tol:
            converged = True
            break
        ll = new
    return params, trace, converged


def _evaluate(X, tree, patterns, params, sw):
    """Joint moments of the components with the factors of their observed blocks
    (``(mean, cov, factors)``, see :func:`_m_steps`), ``log p(k, x)`` and ``log p(x)`` per
    row and the mean log-likelihood."""
    mean, cov = component_moments(tree, params)
    factors = _pattern_factors(patterns, cov)
    densities = component_log_density(X, patterns, mean, cov, tree.n_observed, factors)
    joint = params.log_weights + densities.T
    log_p = _logsumexp_rows(joint)
    return (mean, cov, factors), joint, log_p, float(sw @ log_p / sw.sum())


def _extrapolate(tree, old, new, step, floor):
    """``old + step * (new - old)`` (noise variances and proportions on the log scale)."""
    out = new.copy()
    out.weight[:] = old.weight + step * (new.weight - old.weight)
    out.offset[:] = old.offset + step * (new.offset - old.offset)
    log_noise = np.log(old.noise) + step * (np.log(new.noise) - np.log(old.noise))
    out.noise[:] = np.maximum(np.exp(log_noise), floor)
    log_w = old.log_weights + step * (new.log_weights - old.log_weights)
    out.log_weights[:] = log_w - _logsumexp_rows(log_w[None])[0]
    if out.trees is None:
        out.weight[:], out.offset[:], out.noise[:] = standardise_hidden(
            tree, out.weight, out.offset, out.noise
        )
        return out
    for k, own in enumerate(out.trees):
        out.weight[k], out.offset[k], out.noise[k] = standardise_hidden(
            own, out.weight[k], out.offset[k], out.noise[k]
        )
    return out


def _m_steps(tree, X, patterns, params, moments, resp, floor, relearn=False):
    """One M-step of every component (in place), hidden variables standardised; with
    ``relearn``, each component's tree first becomes the Chow-Liu tree of its statistics
    (when they weigh more than ``d`` rows). A component without weight keeps its
    coefficients. ``moments``: the components' ``(mean, cov, factors)`` (``factors``
    from :func:`_pattern_factors`, or ``None``)."""
    d = tree.n_observed
    mean, cov, factors = moments
    resp_t = np.ascontiguousarray(resp.T)
    totals, s1, s2 = component_statistics(X, patterns, mean, cov, d, resp_t, factors)
    filled = totals > 1e-10 * max(resp.sum(), 1e-300)
    if params.trees is not None:
        for k in np.flatnonzero(filled):
            # below d + 1 rows the component's covariance is singular and its correlations
            # all near +-1: the Chow-Liu tree would be an arbitrary pick among ties
            if relearn and totals[k] > d:
                params.trees[k] = chow_liu_from_statistics(totals[k], s1[k], s2[k], params.trees[k])
    if params.trees is None or (params.groups is None and tree.n_nodes == d):
        # every component at once: one structure, or trees of the columns alone (no
        # hidden variable to rescale)
        structure = tree if params.trees is None else list(params.trees)
        with np.errstate(divide="ignore", invalid="ignore"):
            safe = np.where(filled, totals, 1.0)
            w, b, s = m_step(structure, safe, s1, s2, floor)
            if params.groups is not None:
                s, corr = group_noise(tree, params.groups, safe, s1, s2, w, s, floor)
                params.noise_corr[filled] = corr[filled]
            w, b, s = standardise_hidden(tree, w, b, s)
        params.weight[filled], params.offset[filled], params.noise[filled] = (
            w[filled],
            b[filled],
            s[filled],
        )
    else:
        for k in np.flatnonzero(filled):
            own = params.trees[k]
            w, b, s = m_step(own, totals[k], s1[k], s2[k], floor)
            if params.groups is not None:
                s, params.noise_corr[k] = group_noise(
                    own, params.groups, totals[k], s1[k], s2[k], w, s, floor
                )
            params.weight[k], params.offset[k], params.noise[k] = standardise_hidden(own, w, b, s)
    totals = np.maximum(totals, 1e-12 * totals.sum())
    params.log_weights[:] = np.log(totals / totals.sum())


def chow_liu_from_statistics(total, s1, s2, previous=None):
    """The Gaussian Chow-Liu tree of weighted statistics of the observed columns.

    Gaussian mutual information ``-log(1 - rho^2) / 2`` from the correlations of
    ``S2 / W - (S1 / W)^2``; the maximum spanning tree (as
    :func:`~ltm_sklearn.structure.chow_liu`). ``previous`` is returned when it spans the
    same edges, so that unchanged structures stay the same object.
    """
    mean, cov = _expected_moments(total, s1, s2)
    sd = np.sqrt(np.maximum(np.diag(cov), 1e-300))
    rho = np.clip(cov / np.outer(sd, sd), -1.0 + 1e-12, 1.0 - 1e-12)
    info = -0.5 * np.log1p(-(rho**2))
    np.fill_diagonal(info, 0.0)
    # the edges alone first: most M-steps keep the structure, and building a tree costs
    # more than finding its edges
    edges = minimum_spanning_edges(info.max() - info)  # symmetric by construction
    if previous is not None and edges == previous.edges:
        return previous
    names = None if previous is None else previous.feature_names
    return LatentTree(edges, len(info), feature_names=names)


def component_conditionals(Z, tree, trees, params, target):
    """Gaussian conditioning of column ``target`` on the observed entries of each row
    (NaN missing; the target's own entries are ignored), per component of a mixture of
    tree Gaussians: ``(means, variances, posteriors)``, each ``(n_rows, n_components)``.

    Within a component the conditional of a Gaussian is Gaussian, with mean
    ``mu_t + S_to S_oo^-1 (z_o - mu_o)`` and variance ``S_tt - S_to S_oo^-1 S_ot``; the
    posteriors weigh the components by the density of the observed entries.
    """
    K = params.n_components
    means, variances = np.zeros((len(Z), K)), np.zeros((len(Z), K))
    patterns = missing_patterns(Z)
    j = target
    for k in range(K):
        mean, cov = joint_moments(trees[k], *params.component(k))
        for observed, rows in patterns:
            obs = np.flatnonzero(observed)
            if obs.size == 0:
                means[rows, k], variances[rows, k] = mean[j], cov[j, j]
                continue
            gain = np.linalg.solve(cov[np.ix_(obs, obs)], cov[obs, j])
            means[rows, k] = mean[j] + (Z[np.ix_(rows, obs)] - mean[obs]) @ gain
            variances[rows, k] = cov[j, j] - cov[j, obs] @ gain
    joint = mixture_log_density(Z, tree, params, patterns)[1]
    post = np.exp(joint - logsumexp(joint, axis=1, keepdims=True))
    return means, variances, post


def cluster_correlations(Z, labels, sample_weight):
    """Weighted correlations of the columns within each k-means cluster, and the clusters'
    shares of the weight.

    Clusters of fewer than ``d + 2`` rows are left out (their correlations are too noisy
    to add); without labels, or when every cluster is that small, the overall correlation.
    """
    if labels is None:
        return [pairwise_correlation(Z, sample_weight)], [1.0]
    corrs, sizes = [], []
    for c in np.unique(labels):
        rows = labels == c
        if rows.sum() >= Z.shape[1] + 2:
            corrs.append(pairwise_correlation(Z[rows], sample_weight[rows]))
            sizes.append(float(sample_weight[rows].sum()))
    if not corrs:
        return [pairwise_correlation(Z, sample_weight)], [1.0]
    sizes = np.asarray(sizes) / np.sum(sizes)
    return corrs, list(sizes)
