"""Tree metrics between observed variables."""

from __future__ import annotations

import numpy as np
from scipy.special import ndtri
from scipy.stats import rankdata

from ..._engine.checks import check_finite, check_moments, check_row_weights, check_whole
from ..._engine.kernel_features import KernelMoments

__all__ = [
    "mutual_information",
    "spectral_distance",
    "gaussian_distance",
    "correlation_distance",
    "gaussian_information",
    "corrected_mutual_information",
    "pairwise_correlation",
    "nonparanormal_distance",
    "kernel_distance",
    "check_distance_matrix",
]

_TINY = 1e-300


def spectral_distance(moments, n_hidden_states):
    """Spectral tree metric of Song, Parikh & Xing (NIPS 2011) eq. (12) on one-hot features.

    ``d(i, j) = -log pdet_k P[X_i, X_j] + (log pdet_k diag P[X_i] + log pdet_k diag P[X_j]) / 2``
    where ``pdet_k`` is the product of the top ``k = min(k', n_i, n_j)`` singular values.
    On one-hot features this is the information distance of Choi, Tan, Anandkumar &
    Willsky ("Learning Latent Tree Graphical Models", JMLR 2011), additive
    along the paths of a latent tree whose hidden nodes have ``k'`` states.

    Parameters
    ----------
    moments : MomentEstimator
    n_hidden_states : int

    Returns
    -------
    ndarray of shape (n_features, n_features)
    """
    check_moments(moments)
    n_hidden_states = check_whole(n_hidden_states, "n_hidden_states", 1)
    singles = moments.singletons()
    d = len(singles)
    D = np.zeros((d, d))
    # log pdet_k diag P[X_i] for every k: cumulative sums of the sorted log marginals
    own = [np.cumsum(np.log(np.maximum(np.sort(p)[::-1], _TINY))) for p in singles]
    if d * (d - 1) // 2 > _TILED_PAIRS and moments.exact_tiles:
        return _tiled_spectral_distance(moments, n_hidden_states, own)
    for keys, tables in _grouped_pairs(moments):
        k = min(n_hidden_states, *tables.shape[1:])
        s = np.linalg.svd(tables, compute_uv=False)[:, :k]  # batched over the pairs
        val = -np.sum(np.log(np.maximum(s, _TINY)), axis=1)
        I, J = np.array(keys).T
        val += 0.5 * np.array([own[i][k - 1] + own[j][k - 1] for i, j in keys])
        D[I, J] = D[J, I] = np.maximum(val, 0.0)
    return D


#: above this many column pairs the spectral metric is read in tiles of the one-hot Gram
#: matrix instead of from a cache of every pair table
_TILED_PAIRS = 2**17


def _tiled_spectral_distance(moments, n_hidden_states, own):
    """:func:`spectral_distance` from :meth:`MomentEstimator.pair_tiles` (tables padded
    to ``m x m``; a pair's ``k = min(k', n_i, n_j)`` largest singular values are kept, and
    when ``k = m`` for every pair of a tile the product is ``|det|``)."""
    n_states = np.asarray(moments.n_states, dtype=np.int64)
    d = len(n_states)
    m = int(n_states.max())
    own_k = np.zeros((d, m))
    for i, c in enumerate(own):
        own_k[i, : len(c)] = c
        own_k[i, len(c) :] = c[-1]
    D = np.zeros((d, d))
    for I, J, tables in moments.pair_tiles():
        k = np.minimum(n_hidden_states, np.minimum.outer(n_states[I], n_states[J]))
        if np.all(k == m):
            _sign, val = np.linalg.slogdet(tables)
            val = -np.maximum(val, m * np.log(_TINY))
        else:
            s = np.linalg.svd(tables, compute_uv=False)
            keep = np.arange(m) < k[..., None]
            val = -np.sum(np.where(keep, np.log(np.maximum(s, _TINY)), 0.0), axis=-1)
        i, j = np.arange(I.start, I.stop), np.arange(J.start, J.stop)
        val += 0.5 * (own_k[i[:, None], k - 1] + own_k[j[None, :], k - 1])
        block = np.maximum(val, 0.0)
        if I == J:  # each pair once, from its table with the lower column first (a
            # near-singular table and its transpose can differ by hundreds in float32)
            block = np.triu(block, 1)
            block = block + block.T
        D[I, J] = block
        D[J, I] = block.T
    np.fill_diagonal(D, 0.0)
    return D


def _grouped_pairs(moments):
    """All pair tables, grouped by shape: ``[(keys, (m, n_i, n_j) stacked tables)]``."""
    groups = {}
    for key, P in moments.all_pairs().items():
        groups.setdefault(P.shape, []).append((key, P))
    return [([k for k, _ in items], np.stack([P for _, P in items])) for items in groups.values()]


def mutual_information(moments):
    """Pairwise mutual information ``I(X_i; X_j)`` (nats) of categorical columns.

    Computed from the pair tables of ``moments`` (rows observing both columns); the
    weight of the maximum-weight spanning tree of this matrix is the log-likelihood gain
    of the Chow-Liu tree over independence (Chow & Liu, "Approximating Discrete Probability
    Distributions with Dependence Trees", IEEE Transactions on Information Theory, 1968).

    Parameters
    ----------
    moments : MomentEstimator

    Returns
    -------
    ndarray of shape (n_features, n_features), zero diagonal.
    """
    check_moments(moments)
    d = len(moments.n_states)
    M = np.zeros((d, d))
    for keys, P in _grouped_pairs(moments):
        pi = P.sum(axis=2, keepdims=True)
        pj = P.sum(axis=1, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(P > 0, P * np.log(P / (pi * pj)), 0.0)
        values = np.maximum(terms.sum(axis=(1, 2)), 0.0)
        for (i, j), v in zip(keys, values):
            M[i, j] = M[j, i] = v
    return M


def kernel_distance(features, n_singular=1):
    """Kernel tree metric of Song, Parikh & Xing (NIPS 2011) eq. (12) on feature maps of the
    columns.

    ``d(s, t) = -1/2 log pdet_d(C_st C_st^T) + 1/4 log pdet_d(C_ss C_ss^T)
    + 1/4 log pdet_d(C_tt C_tt^T)`` with the centred cross-covariance operators ``C_st``
    and ``pdet_d`` the product of the top ``d = n_singular`` singular values (the centred
    counterpart of :func:`spectral_distance`, which uses the uncentred one-hot tables).
    All operators come from one Gram matrix of the stacked features (one pass over the
    rows).

    Parameters
    ----------
    features : list of ndarray or KernelMoments
        Centred ``(n_samples, r_j)`` feature matrices, one per column
        (:func:`~ltm_sklearn.moments.rbf_features`), or the kernel moments of the data
        (:class:`~ltm_sklearn.moments.KernelMoments`, weighted and NaN-aware).
    n_singular : int, default=1

    Returns
    -------
    ndarray of shape (n_features, n_features)
    """
    if isinstance(features, KernelMoments):
        G, offsets = features.covariance()
    else:
        features = [np.asarray(f, dtype=float) for f in features]
        if not features or any(f.ndim != 2 for f in features):
            raise ValueError("features must be a non-empty list of 2-D feature matrices.")
        if len({f.shape[0] for f in features}) != 1:
            raise ValueError(
                "The feature matrices have different numbers of rows "
                f"{sorted({f.shape[0] for f in features})}: one row a sample in each."
            )
        F = check_finite(np.hstack(features), "The features")
        G = F.T @ F / F.shape[0]
        offsets = np.concatenate([[0], np.cumsum([f.shape[1] for f in features])])
    d = check_whole(n_singular, "n_singular", 1)
    p = len(offsets) - 1
    blocks = [slice(int(offsets[i]), int(offsets[i + 1])) for i in range(p)]

    def log_pdet(C):  # log pdet_d(C C^T) / 2 = sum of log of the top-d singular values of C
        s = np.linalg.svd(C, compute_uv=False)[:d]
        return np.sum(np.log(np.maximum(s, _TINY)))

    own = [log_pdet(G[b, b]) for b in blocks]
    D = np.zeros((p, p))
    for i in range(p):
        for j in range(i + 1, p):
            val = -log_pdet(G[blocks[i], blocks[j]]) + 0.5 * (own[i] + own[j])
            D[i, j] = D[j, i] = max(val, 0.0)
    return D


def gaussian_distance(X):
    """Gaussian tree metric ``d(i, j) = -log |corr(X_i, X_j)|`` (additive on Gaussian trees).

    The baseline of Song, Parikh & Xing (NIPS 2011) Fig. 1, and the metric of the Gaussian latent
    tree: on a
    tree of linear-Gaussian nodes the correlation of two nodes is the product of the edge
    correlations along their path (Choi, Tan, Anandkumar & Willsky, "Learning Latent Tree
    Graphical Models", JMLR 2011, section 2.2), so ``-log |corr|`` adds
    up along paths. ``X`` is continuous, shape ``(n_samples, d)``; NaN entries are allowed
    (each correlation from the rows observing both columns, :func:`pairwise_correlation`).
    Constant columns get an infinite-like distance (correlation floored at 1e-300).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Continuous columns; NaN marks a missing entry.

    Returns
    -------
    ndarray of shape (n_features, n_features)
        Symmetric, zero diagonal.
    """
    return correlation_distance(pairwise_correlation(X))


def correlation_distance(corr):
    """``-log |corr|`` with a zero diagonal (correlations floored at 1e-300): the Gaussian
    tree metric of :func:`gaussian_distance` from a correlation matrix."""
    D = -np.log(np.clip(np.abs(corr), _TINY, 1.0))
    np.fill_diagonal(D, 0.0)
    return D


def gaussian_information(corr):
    """Mutual information ``-log(1 - rho^2) / 2`` of jointly Gaussian pairs of correlation
    ``rho`` (``|rho|`` capped just below 1), with a zero diagonal.

    >>> np.round(gaussian_information(np.array([[1.0, 0.6], [0.6, 1.0]])), 4)
    array([[0.    , 0.2231],
           [0.2231, 0.    ]])
    """
    info = -0.5 * np.log1p(-np.minimum(corr**2, 1.0 - 1e-12))
    np.fill_diagonal(info, 0.0)
    return info


def corrected_mutual_information(moments, n_samples):
    """Mutual information of category columns minus its plug-in bias
    ``(r_i - 1)(r_j - 1) / (2 N)`` (Miller-Madow; ``r`` the occupied categories), shifted
    to be non-negative (a spanning tree is the same for any shift), so that columns of many
    categories (discretised continuous ones) and of few compete fairly in a Chow-Liu
    tree."""
    M = mutual_information(moments)
    occupied = np.array([np.count_nonzero(c) for c, _ in moments.singleton_counts()])
    bias = np.outer(occupied - 1, occupied - 1) / (2.0 * max(n_samples, 1.0))
    out = M - bias
    out -= min(out.min(), 0.0)
    np.fill_diagonal(out, 0.0)
    return out


def pairwise_correlation(X, sample_weight=None):
    """Pearson correlations, each from the rows in which both columns are observed.

    ``sample_weight`` (frequency weights, default 1) weighs the rows.

    NaN marks a missing entry; infinite entries are refused. A pair observed together in
    fewer than two rows, or a column constant on those rows, gets correlation 0.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Continuous columns; NaN marks a missing entry.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative frequency weights of the rows.

    Returns
    -------
    ndarray of shape (n_features, n_features)
        Symmetric, ones on the diagonal.

    Examples
    --------
    >>> X = np.array([[0.0, 1.0], [1.0, np.nan], [2.0, 3.0], [3.0, 2.0], [4.0, 5.0]])
    >>> np.round(pairwise_correlation(X), 3)  # rows 0, 2, 3, 4
    array([[1.   , 0.829],
           [0.829, 1.   ]])
    """
    X = np.asarray(X, dtype=float)
    if X.ndim != 2:
        raise ValueError(f"X must be 2D, got shape {X.shape}.")
    if X.shape[0] == 0:
        raise ValueError("X has no rows.")
    if np.isinf(X).any():
        raise ValueError("X holds infinite values; these metrics need finite data.")
    seen = (~np.isnan(X)).astype(float)
    w = check_row_weights(sample_weight, len(X))
    Z = np.where(seen > 0, X, 0.0)
    Z = Z - (Z.sum(0) / np.maximum(seen.sum(0), 1.0)) * seen  # centre for precision
    rows = seen.T @ seen  # rows observing both columns
    seen_w = seen * w[:, None]
    n = seen.T @ seen_w
    sx = Z.T @ seen_w  # (i, j): weighted sum of X_i over the rows observing both
    sxx = (Z * Z).T @ seen_w
    sxy = Z.T @ (Z * w[:, None])
    with np.errstate(invalid="ignore", divide="ignore"):
        cov = sxy / n - (sx / n) * (sx.T / n)
        var_i = sxx / n - (sx / n) ** 2
        corr = cov / np.sqrt(var_i * var_i.T)
    # a column constant on the shared rows (up to rounding of its magnitude) has no correlation
    size = np.nan_to_num(np.nanmax(np.abs(X), axis=0, initial=0.0)) if X.size else np.zeros(0)
    ok = (rows >= 2) & (n > 0) & (var_i > (1e-10 * size[:, None]) ** 2) & np.isfinite(corr)
    ok &= ok.T
    corr = np.where(ok, np.clip(corr, -1.0, 1.0), 0.0)
    # the products above sum (i, j) and (j, i) in different orders: near-zero correlations
    # of uncorrelated columns differ by their rounding, and so would -log |corr|
    corr = 0.5 * (corr + corr.T)
    np.fill_diagonal(corr, 1.0)
    return corr


def nonparanormal_distance(X):
    """Nonparanormal tree metric: :func:`gaussian_distance` after mapping every column to
    normal scores ``Phi^-1(rank / (n + 1))`` (Liu, Lafferty & Wasserman, "The Nonparanormal:
    Semiparametric Estimation of High Dimensional Undirected Graphs", JMLR 2009), the second
    baseline of Song, Parikh & Xing (NIPS 2011) Fig. 1.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Continuous columns, complete (NaN and infinite values are refused).

    Returns
    -------
    ndarray of shape (n_features, n_features)
    """
    X = _continuous(X)
    n = X.shape[0]
    Z = ndtri(rankdata(X, axis=0) / (n + 1.0))
    return gaussian_distance(Z)


def _continuous(X):
    X = np.asarray(X, dtype=float)
    if X.ndim != 2:
        raise ValueError(f"X must be 2D, got shape {X.shape}.")
    if not np.all(np.isfinite(X)):
        raise ValueError("X holds NaN or infinite values; these metrics need complete data.")
    return X


def check_distance_matrix(D, what="D", distances=True):
    """Validate a distance matrix for tree reconstruction; return it as a float copy.

    A square, finite, symmetric matrix of at least one variable; with ``distances``,
    non-negative with a zero diagonal (``False``: a similarity such as mutual
    information, whose diagonal is not read)."""
    D = np.array(D, dtype=float)
    if D.ndim != 2 or D.shape[0] != D.shape[1]:
        raise ValueError(f"{what} must be a square matrix, got shape {D.shape}.")
    if D.shape[0] == 0:
        raise ValueError(f"{what} is empty: a tree needs at least one variable.")
    if not np.all(np.isfinite(D)):
        raise ValueError(f"{what} holds non-finite values.")
    if not np.allclose(D, D.T):
        raise ValueError(f"{what} must be symmetric.")
    if distances:
        if np.any(D < 0):
            raise ValueError(f"{what} holds negative distances.")
        if np.any(np.diag(D) != 0):
            raise ValueError(
                f"{what} must have a zero diagonal (each variable's distance to itself)."
            )
    return D
