"""Kernel feature maps of continuous columns and the moments of those features:
per-column Nystroem features of a normalised Gaussian kernel, and the moment estimator
that reads them as :class:`~ltm_sklearn._engine.moments.MomentEstimator` reads one-hot
vectors (Song, Parikh & Xing, "Kernel Embeddings of Latent Tree Graphical Models",
NIPS 2011, section 3)."""

from __future__ import annotations

import math

import numpy as np

from .checks import check_finite, check_real, check_row_weights, check_whole
from .moments import _chunks, _normalise

__all__ = ["RBFFeatureMap", "KernelMoments", "rbf_features", "weighted_quantiles"]

# Nystroem eigen-directions kept, relative to the largest eigenvalue of the landmark Gram.
_EIG_RTOL = 1e-9
# Quantile grid on which the median pairwise distance (the bandwidth) is computed.
_BANDWIDTH_GRID = 256
# Rows per chunk when accumulating kernel moments (bounds the temporaries).
_ROW_CHUNK = 65536


def weighted_quantiles(x, weights, probs):
    """Inverse weighted CDF: for each ``p`` the smallest ``x`` with ``F(x) >= p``.

    A row of weight 2 counts exactly as two rows of weight 1, and rows of weight 0 are
    ignored, so results do not depend on how the weights are spread over repeated rows.

    Examples
    --------
    >>> weighted_quantiles(np.array([3.0, 1.0, 2.0]), np.array([1.0, 2.0, 1.0]), [0.25, 0.75])
    array([1., 2.])
    """
    x = check_finite(x, "x")
    if x.ndim != 1:
        raise ValueError(f"x must be 1-D, got shape {x.shape}.")
    weights = check_row_weights(weights, x.size, "weights")
    probs = np.asarray(probs, dtype=float)
    if not np.all((probs >= 0) & (probs <= 1)):
        raise ValueError("probs must lie in [0, 1].")
    kept = weights > 0  # a row of weight 0 is no row: not even the lowest quantile
    x, weights = x[kept], weights[kept]
    order = np.argsort(x, kind="stable")
    xs, cw = x[order], np.cumsum(weights[order])
    idx = np.searchsorted(cw, np.asarray(probs) * cw[-1], side="left")
    return xs[np.minimum(idx, xs.size - 1)]


def _fill_gaps(landmarks, width, budget):
    """Insert evenly spaced landmarks where consecutive ones are more than ``width`` apart
    (sparse quantiles in a heavy tail), at most ``budget`` of them in total."""
    gaps = np.diff(landmarks)
    need = np.maximum(np.ceil(gaps / width) - 1, 0)
    if need.sum() > budget:
        need = np.floor(need * budget / need.sum())
    pieces = [landmarks[:1]]
    for a, g, k in zip(landmarks[:-1], gaps, need.astype(int)):
        pieces.append(a + g * np.arange(1, k + 2) / (k + 1))
    return np.concatenate(pieces)


class RBFFeatureMap:
    """Per-column Nystroem features of the normalised Gaussian kernel (Song, Parikh & Xing (NIPS
    2011) section 3).

    Column ``j`` gets the kernel ``k_j(x, y) = N(x; y, h_j^2)`` - the Gaussian RBF kernel
    scaled to a probability density in ``x``, so that a product of these kernels is a
    smoothing kernel and the embedding of the data is a kernel density estimate - with
    bandwidth ``h_j = bandwidth_scale * median |x - x'|`` (the median heuristic, computed on
    a grid of weighted quantiles). It is approximated by the Nystroem method
    (Williams & Seeger, "Using the Nystrom Method to Speed Up Kernel Machines", NIPS 2000,
    published 2001; the map of ``sklearn.kernel_approximation.Nystroem``) on
    ``n_components`` landmarks placed at the weighted quantiles ``(l - 1/2) / m`` of the
    column (plus up to ``n_components`` evenly spaced ones where consecutive quantiles
    are more than ``h_j`` apart, as in a heavy tail):
    ``phi_j(x) = k_j(x, L) V diag(lambda)^-1/2`` with ``(lambda, V)`` the eigenpairs of
    the landmark Gram ``k_j(L, L)`` above a relative cutoff, so
    ``phi_j(x) . phi_j(y) ~ k_j(x, y)``. Quantile landmarks make the map deterministic
    and make weights and repeated rows interchangeable.

    Because every landmark kernel integrates to one, the integrals ``int phi_j(x) dx``
    (``integrals_``, the feature a marginalised entry carries) and
    ``int x phi_j(x) dx`` (``first_moments_``, for conditional means) are exact.

    A categorical column (``n_categories[j] > 0``, values the codes ``0..n_j-1``) gets the
    indicator features ``phi_j(x) = e_x`` (the delta kernel; the "integral" is the sum over
    the categories, a vector of ones): with indicator features the kernel algorithm is the
    discrete one (Song, Parikh & Xing (NIPS 2011) section 4), so one map serves mixed tables.

    Parameters
    ----------
    n_components : int, default=50
        Quantile landmarks per column (fewer when the column has fewer distinct
        quantiles; at most as many again fill gaps wider than the bandwidth).
    bandwidth_scale : float, default=1.0
        Multiplies the median-distance bandwidth.
    bandwidths : array-like of shape (n_features,), default=None
        Bandwidths to use instead of the median heuristic (``bandwidth_scale`` ignored).
    n_categories : array-like of int, shape (n_features,), default=None
        Number of categories of every categorical column (0 for a continuous column);
        ``None``: every column is continuous.

    Attributes
    ----------
    landmarks_, bandwidths_, projections_, integrals_, first_moments_ : list
        One entry per column (for a categorical column: its codes, bandwidth 0, the
        identity, ones and ``None``).
    n_features_out_ : ndarray of int
        Feature dimension of every column.
    offsets_ : ndarray of int
        Column ``j`` occupies ``offsets_[j]:offsets_[j + 1]`` of :meth:`transform`.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).standard_normal((500, 2))
    >>> fmap = RBFFeatureMap(n_components=30).fit(X)
    >>> F = fmap.transform(X)
    >>> F.shape[0], bool(F.shape[1] == fmap.offsets_[-1])
    (500, True)
    """

    def __init__(self, n_components=50, bandwidth_scale=1.0, bandwidths=None, n_categories=None):
        self.n_components = n_components
        self.bandwidth_scale = bandwidth_scale
        self.bandwidths = bandwidths
        self.n_categories = n_categories

    def fit(self, X, sample_weight=None):
        """Bandwidths and landmarks of every column (NaN entries are ignored)."""
        X = np.asarray(X, dtype=float)
        n, d = X.shape
        w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=float)
        self.landmarks_, self.bandwidths_, self.projections_ = [], [], []
        self.integrals_, self.first_moments_ = [], []
        grid_p = (np.arange(_BANDWIDTH_GRID) + 0.5) / _BANDWIDTH_GRID
        land_p = (np.arange(self.n_components) + 0.5) / self.n_components
        n_cat = np.zeros(d, dtype=np.int64) if self.n_categories is None else self.n_categories
        for j in range(d):
            if n_cat[j] > 0:  # indicator features of the codes
                m = int(n_cat[j])
                self.landmarks_.append(np.arange(m, dtype=float))
                self.bandwidths_.append(0.0)
                self.projections_.append(np.eye(m))
                self.integrals_.append(np.ones(m))
                self.first_moments_.append(None)
                continue
            obs = ~np.isnan(X[:, j]) & (w > 0)
            x, wj = X[obs, j], w[obs]
            if x.size == 0:
                x, wj = np.zeros(1), np.ones(1)
            q = weighted_quantiles(x, wj, np.concatenate([grid_p, land_p]))  # one sort
            grid, L = q[:_BANDWIDTH_GRID], np.unique(q[_BANDWIDTH_GRID:])
            gaps = np.abs(grid[:, None] - grid[None, :])[np.triu_indices(grid.size, 1)]
            gaps = gaps[gaps > 0]
            if self.bandwidths is not None:
                h = float(self.bandwidths[j])
            else:
                h = self.bandwidth_scale * (float(np.median(gaps)) if gaps.size else 1.0)
            L = _fill_gaps(L, h, budget=self.n_components)
            lam, V = np.linalg.eigh(np.exp(-((L[:, None] - L[None, :]) ** 2) / (2 * h * h)))
            keep = lam > _EIG_RTOL * lam[-1]
            proj = V[:, keep] / np.sqrt(lam[keep]) * (2 * np.pi * h * h) ** -0.25
            mass = np.sqrt(2 * np.pi) * h  # integral of exp(-(x - l)^2 / (2 h^2)) over x
            self.landmarks_.append(L)
            self.bandwidths_.append(h)
            self.projections_.append(proj)
            self.integrals_.append(mass * proj.sum(axis=0))
            self.first_moments_.append(mass * (L @ proj))
        self.n_features_out_ = np.array([p.shape[1] for p in self.projections_], dtype=np.int64)
        self.offsets_ = np.concatenate([[0], np.cumsum(self.n_features_out_)])
        return self

    def transform_column(self, j, x):
        """Features ``(len(x), n_features_out_[j])`` of the values ``x`` of column ``j``;
        NaN rows get zeros (and so do codes outside a categorical column's categories)."""
        x = np.asarray(x, dtype=float)
        L, h = self.landmarks_[j], self.bandwidths_[j]
        if h == 0:  # categorical: indicators of the codes
            F = (np.nan_to_num(x, nan=-1.0)[:, None] == L[None, :]).astype(float)
            return F
        K = np.exp(-((np.nan_to_num(x)[:, None] - L[None, :]) ** 2) / (2 * h * h))
        F = K @ self.projections_[j]
        F[np.isnan(x)] = 0.0
        return F

    def transform(self, X):
        """All columns' features side by side, ``(n_samples, offsets_[-1])``."""
        X = np.asarray(X, dtype=float)
        F = np.empty((X.shape[0], int(self.offsets_[-1])))
        for j in range(X.shape[1]):
            F[:, self.offsets_[j] : self.offsets_[j + 1]] = self.transform_column(j, X[:, j])
        return F


class KernelMoments:
    """Moments of kernel feature maps: the covariance operators of Song, Parikh & Xing (NIPS 2011)
    section 4.1.

    The continuous counterpart of :class:`MomentEstimator`, with the same interface
    (``n_states`` are the feature dimensions): ``pair(i, j)`` is the uncentred
    cross-covariance operator ``C_ij = E[phi_i(X_i) phi_j(X_j)^T]`` (Song, Parikh & Xing (NIPS 2011)
    eq. (5)),
    ``projected`` gives ``E[prod_m B_m phi_{v_m}(X_{v_m})]``, ``integral(j)`` the feature
    that marginalises column ``j``, and :meth:`covariance` the centred operators of every
    pair at once (for the tree metric of eq. (12)). With one-hot features these are the
    probability tables of the discrete case. NaN entries are missing (available-case
    averages, as in :class:`MomentEstimator`).

    Parameters
    ----------
    feature_map : RBFFeatureMap
        Fitted.
    X : ndarray of shape (n_samples, n_features)
    sample_weight : ndarray of shape (n_samples,), default=None
    features : ndarray, default=None
        ``feature_map.transform(X)`` if already computed (shared by per-class moments).
    """

    #: the capabilities of :class:`~.moments.MomentSource`: every row is in memory, and
    #: there are no tiles of pair tables
    exact_tiles = False
    n_rows_total = None

    def __init__(self, feature_map, X, sample_weight=None, features=None):
        self.feature_map = feature_map
        self.X = np.asarray(X, dtype=float)
        n = self.X.shape[0]
        self.sample_weight = (
            np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=float)
        )
        self.features = feature_map.transform(self.X) if features is None else features
        self.n_states = feature_map.n_features_out_
        self._offsets = feature_map.offsets_
        missing = np.isnan(self.X)
        self._observed = None if not missing.any() else (~missing).astype(float)
        self._gram = None

    @property
    def n_samples(self):
        return self.X.shape[0]

    def for_parameters(self):
        return self

    def rows(self, rows, weights=None):
        """The moments of some rows only (features reused), with their own weights or new
        ``weights``."""
        w = self.sample_weight[rows] if weights is None else weights
        return KernelMoments(self.feature_map, self.X[rows], w, self.features[rows])

    def _block(self, j):
        return slice(int(self._offsets[j]), int(self._offsets[j + 1]))

    def integral(self, j):
        """``int phi_j(x) dx``: the feature a marginalised (missing) entry carries."""
        return self.feature_map.integrals_[j]

    def _pair_weights(self):
        """``W_ij``: total weight of the rows observing both ``i`` and ``j``."""
        w = self.sample_weight
        if self._observed is None:
            d = self.X.shape[1]
            return np.full((d, d), w.sum())
        return self._observed.T @ (w[:, None] * self._observed)

    def gram(self):
        """Weighted second moments of all features, ``(sum_j r_j, sum_j r_j)``, normalised
        block by block by the weight of the rows observing both columns (cached)."""
        if self._gram is None:
            F, w = self.features, self.sample_weight
            G = np.zeros((F.shape[1], F.shape[1]))
            for s in _chunks(F.shape[0], max(1, F.shape[0] // _ROW_CHUNK)):
                G += F[s].T @ (w[s, None] * F[s])
            W = self._pair_weights()
            sizes = self.n_states
            scale = np.repeat(np.repeat(np.where(W > 0, W, 1.0), sizes, axis=0), sizes, axis=1)
            self._gram = G / scale
        return self._gram

    def _row_weights(self, variables):
        """Row weights, zero on the rows that miss any of ``variables``."""
        if self._observed is None:
            return self.sample_weight
        return self.sample_weight * self._observed[:, list(variables)].prod(axis=1)

    def _column_weights(self):
        """Total weight of the rows observing each column (floored away from zero)."""
        obs = ~np.isnan(self.X)
        return np.maximum(self.sample_weight @ obs, np.finfo(float).tiny)

    def means(self):
        """``E[phi_j(X_j)]`` of every column, stacked."""
        return (self.sample_weight @ self.features) / np.repeat(
            self._column_weights(), self.n_states
        )

    def covariance(self):
        """Centred cross-covariance operators of all pairs, ``(G, offsets)``."""
        mu = self.means()
        return self.gram() - np.outer(mu, mu), self._offsets

    def pair(self, i, j):
        """``C_ij = E[phi_i(X_i) phi_j(X_j)^T]``, rows over the features of ``X_i``."""
        if self._gram is not None:
            return self._gram[self._block(i), self._block(j)]
        F, w = self.features, self._row_weights((i, j))
        a, b = F[:, self._block(i)], F[:, self._block(j)]
        return _normalise(a.T @ (w[:, None] * b), w.sum())

    def pairs(self, pairs):
        """``{(i, j): C_ij}`` for a list of pairs."""
        return {(i, j): self.pair(i, j) for i, j in pairs}

    def projected(self, requests):
        """``E[prod_m B_m phi_{v_m}(X_{v_m})]`` for ``(variables, projections)`` requests
        (see :meth:`MomentEstimator.projected`), accumulated over row chunks."""
        out = []
        F = self.features
        for variables, projections in requests:
            ww = self._row_weights(variables)
            shape = [B.shape[0] for B in projections]
            table = np.zeros(math.prod(shape))
            for s in _chunks(F.shape[0], max(1, F.shape[0] // _ROW_CHUNK)):
                feats = [F[s, self._block(v)] @ B.T for v, B in zip(variables, projections)]
                acc = feats[0] * ww[s, None]
                for f in feats[1:-1]:
                    acc = (acc[:, :, None] * f[:, None, :]).reshape(acc.shape[0], -1)
                table += (acc.T @ feats[-1]).ravel() if len(feats) > 1 else acc.sum(axis=0)
            out.append(_normalise(table.reshape(shape), float(ww.sum())))
        return out

    def column_moments(self):
        """Weighted mean and variance of the raw values of every column (observed rows)."""
        w = self.sample_weight
        obs = ~np.isnan(self.X)
        tot = self._column_weights()
        mean = (w @ np.where(obs, self.X, 0.0)) / tot
        var = (w @ (np.where(obs, self.X - mean, 0.0) ** 2)) / tot
        return mean, var


def rbf_features(X, n_components=50, bandwidth_scale=1.0):
    """Centred per-column RBF features (:class:`RBFFeatureMap`) of complete numeric data.

    ``F_i^T F_j / N`` is then the empirical centred cross-covariance operator of columns
    ``i`` and ``j``; every cost is linear in ``N``.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Numeric, finite data.
    n_components : int, default=50
    bandwidth_scale : float, default=1.0

    Returns
    -------
    list of ndarray, one ``(n_samples, r_j)`` centred feature matrix per column.
    """
    try:
        X = np.asarray(X, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            "Kernel features need numeric data; got values that are not numbers "
            "(encode categorical columns or use a discrete estimator)."
        ) from exc
    if X.ndim != 2 or X.shape[0] < 2:
        raise ValueError(f"X must be 2D with at least 2 rows, got shape {X.shape}.")
    if not np.all(np.isfinite(X)):
        raise ValueError("X holds NaN or infinite values; kernel features need finite data.")
    n_components = check_whole(n_components, "n_components", 1)
    bandwidth_scale = check_real(bandwidth_scale, "bandwidth_scale", 0.0, low_open=True)
    fmap = RBFFeatureMap(n_components, bandwidth_scale).fit(X)
    F = fmap.transform(X)
    F -= F.mean(axis=0)
    return [F[:, fmap.offsets_[j] : fmap.offsets_[j + 1]] for j in range(X.shape[1])]
