"""Kernel embeddings of latent tree models for continuous data (papers/002).

Song, Parikh & Xing (NIPS 2011) embed the distribution of continuous variables in a
reproducing kernel Hilbert space: with a product of smoothing kernels the embedding of
the data is the kernel density estimate (papers/002 eqs. (3)-(4)), and a latent tree
factorises it into low-order operators recovered by a spectral algorithm (section 4.3)
and combined by message passing (section 4.2, eqs. (7)-(8)).

Here every column ``j`` gets the finite-dimensional feature map of
:class:`~ltm_sklearn.moments.RBFFeatureMap` (Nystroem features of the normalised Gaussian
kernel ``N(x; y, h_j^2)``, median-distance bandwidth). The covariance operators are the
moments of these features (:class:`~ltm_sklearn.moments.KernelMoments`) and the spectral
algorithm is the one of :func:`~ltm_sklearn._spectral.fit_spectral` run on them:
papers/002 notes that with one-hot features the kernel algorithm *is* the discrete one,
and conversely the observable representation of papers/003 - edge SVDs of
cross-covariance operators ``C_{rep,ref}`` and projected third-order operators - gives
the transformed operators of section 4.3 (eqs. (9)-(10)), the invertible transforms
``T = (U^T C_{s|pi})^-1`` built from the top ``d`` singular vectors ``U`` cancelling along
every edge. A leaf sends ``phi_j(x_j)^T C_{j,ref} V diag(s)^-1`` (eq. (10)); a hidden node
contracts its projected operator with the messages of its children (eq. (7)); the root
contracts all of them (eq. (8)). Because every feature map has an exact integral, a
missing entry sends ``int phi_j(x) dx``, the estimate is renormalised to integrate to one
over all columns, and the conditional mean of a column given the others follows from
``int x phi_j(x) dx`` in one pass.
"""

from __future__ import annotations

import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ._base import BaseLatentTree, FittedModel
from ._spectral import fit_spectral, spectral_log_abs
from .moments import KernelMoments, RBFFeatureMap
from .structure import gaussian_distance, kernel_distance, learn_tree, nonparanormal_distance
from .tree import LatentTree

#: non-positive estimates are floored at this multiple of the smoothed independence model
FLOOR_RATIO = 1e-3

__all__ = ["KernelLatentTree", "KernelEvaluation"]

# Reconstruction methods on the kernel metric, and the baseline metrics (with NJ).
KERNEL_STRUCTURES = ("nj", "me", "rg", "clrg", "clnj", "star", "gaussian", "nonparanormal")


class _KernelData:
    """Training data with its stacked features (shared by the per-class moments)."""

    def __init__(self, X, features):
        self.X = X
        self.features = features


class KernelEvaluation:
    """Rows to score, evaluated lazily column by column on the fitted feature maps.

    Plays the role of the category codes in :func:`~ltm_sklearn._spectral.spectral_log_abs`:
    the message of leaf ``j`` is ``table^T phi_j(x_j)``; a NaN entry sends the integral
    row of the table. ``fixed`` replaces the features of some columns by a constant vector
    (e.g. ``int x phi_j(x) dx`` for a conditional mean).
    """

    def __init__(self, feature_map, X, fixed=None):
        self.feature_map = feature_map
        self.X = X
        self.fixed = {} if fixed is None else fixed
        self._features = {}

    @property
    def shape(self):
        return (self.X.shape[1], self.X.shape[0])

    def leaf_messages(self, j, table):
        m = table.shape[0] - 2
        n = self.X.shape[0]
        if j in self.fixed:
            return np.repeat((self.fixed[j] @ table[:m])[:, None], n, axis=1)
        if j not in self._features:
            self._features[j] = self.feature_map.transform_column(j, self.X[:, j])
        msg = (self._features[j] @ table[:m]).T
        missing = np.isnan(self.X[:, j])
        if missing.any():
            msg[:, missing] = table[m][:, None]
        return msg


class KernelLatentTree(BaseLatentTree):
    """Latent tree density of continuous data by kernel embeddings (papers/002).

    Each column is mapped to Nystroem features of a normalised Gaussian kernel with the
    median-distance bandwidth; the tree is learned by neighbor joining on the kernel tree
    metric (papers/002 eq. (12)) and the parameters by the spectral algorithm of its
    section 4.3 on the covariance operators of these features, which gives a smoothed
    density estimate that follows the latent tree (see the module docstring). For
    classification by per-class densities, wrap it in
    :class:`~ltm_sklearn.LatentTreeClassifier`.

    Parameters
    ----------
    n_hidden_states : int, default=2
        ``d``: the number of singular values kept in every operator SVD and in the tree
        metric (the effective number of hidden states), so ``GridSearchCV`` selects it by
        held-out log-likelihood. An operator of lower numerical rank (e.g. a column with
        fewer feature dimensions) uses that rank.
    tree : LatentTree, edge list, Newick string or networkx graph, default=None
        The latent tree (observed columns at the leaves). ``None`` learns it.
    structure : {"me", "nj", "rg", "clrg", "clnj", "star", "gaussian", "nonparanormal"}, \
            default="me"
        Structure learning when ``tree=None``. The first five reconstruct the tree from the
        kernel metric of eq. (12) (weighted, NaN-aware) with ``max(1, n_hidden_states - 1)``
        singular values - the rank of the *centred* covariance operators of a hidden
        variable with ``n_hidden_states`` states: minimum-evolution search (NNIs and SPRs
        from BIONJ and CLNJ, see :func:`~ltm_sklearn.structure.learn_tree`), neighbor
        joining (the paper's), recursive grouping,
        Chow-Liu recursive grouping or Chow-Liu neighbor joining (see
        :class:`SpectralLatentTree`; ``"clnj"`` is the most accurate on deep random trees).
        ``"star"`` joins every column to one hidden node.
        ``"gaussian"`` and ``"nonparanormal"`` run neighbor joining on the Gaussian metric
        ``-log |corr|`` or its rank-Gaussianised version (the baselines of papers/002
        Fig. 1; complete rows only, ignoring ``sample_weight``).
    n_components : int, default=50
        Nystroem landmarks per column (weighted quantiles of the column); eigen-directions
        of the landmark Gram below ``1e-9`` of the largest are dropped, so a column's
        feature dimension can be smaller.
    bandwidth_scale : float, default=1.0
        Multiplies every column's median-distance bandwidth (1 is the paper's heuristic;
        smaller values smooth less and need more components).
    bandwidth : array-like of shape (n_features,), default=None
        Per-column bandwidths to use instead (``bandwidth_scale`` is then ignored), e.g.
        those of another fit (``feature_map_.bandwidths_``), so that several models
        smooth alike (:class:`~ltm_sklearn.LatentTreeClassifier` shares them this way).
    n_jobs : int, default=None
        The two starts of the minimum-evolution search (``structure="me"``) in parallel
        processes (moments are single GEMMs, parallel through BLAS).
    random_state : int, RandomState instance or None, default=None
        Unused: the landmarks are quantiles, the algorithm is deterministic.
    verbose : int, default=0
        Print the progress of the tree search.

    Attributes
    ----------
    tree_ : LatentTree
    feature_map_ : RBFFeatureMap
        Bandwidths, landmarks and Nystroem projections of every column (of the
        standardised columns ``(X - center_) / scale_``).
    center_, scale_ : ndarray of shape (n_features,)
        Weighted mean and standard deviation of every column (scale 1 for a constant
        column).
    bandwidths_ : ndarray of shape (n_features,)
        Kernel bandwidth of every column, in the units of ``X``.
    raw_estimate_ : SpectralParams
        The fitted observable representation.
    n_floored_ : int
        Rows floored in the last ``score_samples`` (or conditional means that fell back to
        the marginal mean in the last ``conditional_mean``).
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` has feature names.

    Notes
    -----
    ``score_samples`` is a log-density: the estimate is renormalised so that it integrates
    to exactly one over all columns (the integrals of the feature maps are exact); where
    it is not positive it is floored at ``1e-3`` times the independence model of the
    columns' smoothed marginals, Gaussians with their weighted mean and variance plus
    ``h_j^2``. Unlike the discrete estimators this is not yet an explicit normalised model.

    References
    ----------
    L. Song, A. P. Parikh, E. P. Xing. Kernel Embeddings of Latent Tree Graphical Models.
    NIPS 2011 (papers/002), sections 4.2-4.3 and eq. (12).

    Examples
    --------
    >>> from ltm_sklearn import KernelLatentTree
    >>> from ltm_sklearn.datasets import GaussianLeafTreeModel, balanced_binary_tree
    >>> truth = GaussianLeafTreeModel.random(balanced_binary_tree(6), 2, random_state=0)
    >>> X = truth.sample(5000, random_state=1)
    >>> est = KernelLatentTree(n_hidden_states=2).fit(X)
    >>> X_test = truth.sample(1000, random_state=2)

    The estimate converges to the truth smoothed by the kernels (here exact):

    >>> smoothed = truth.smoothed(est.bandwidths_)
    >>> gap = smoothed.log_likelihood(X_test).mean() - est.score(X_test)
    >>> bool(abs(gap) < 0.05)
    True
    >>> est.conditional_mean(X_test[:3], target=0).shape
    (3,)
    """

    _parameter_constraints: dict = {
        **{
            key: value
            for key, value in BaseLatentTree._parameter_constraints.items()
            if key not in ("categories", "alpha", "max_iter", "tol")
        },
        "structure": [StrOptions(set(KERNEL_STRUCTURES))],
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "bandwidth_scale": [Interval(Real, 0, None, closed="neither")],
        "bandwidth": ["array-like", None],
    }

    def __init__(
        self,
        n_hidden_states=2,
        *,
        tree=None,
        structure="me",
        n_components=50,
        bandwidth_scale=1.0,
        bandwidth=None,
        n_jobs=None,
        random_state=None,
        verbose=0,
    ):
        self.n_hidden_states = n_hidden_states
        self.tree = tree
        self.structure = structure
        self.n_components = n_components
        self.bandwidth_scale = bandwidth_scale
        self.bandwidth = bandwidth
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------------ data hooks
    _allowed_kinds = "biuf"

    def _validate_X(self, X, reset):
        try:
            return super()._validate_X(X, reset)
        except (TypeError, ValueError) as exc:
            text = str(exc)
            if "convert" in text or "argument must be" in text or "cannot read column" in text:
                raise TypeError(
                    f"{type(self).__name__} models continuous columns and needs numeric X: "
                    f"{text} Encode categorical columns first, or use a discrete estimator "
                    "such as SpectralLatentTree."
                ) from exc
            raise

    def _fit_encoding(self, X, declared, sample_weight=None):
        try:
            X = np.asarray(X, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"{type(self).__name__} models continuous columns and needs numeric X: "
                f"{exc}. Encode categorical columns first, or use a discrete estimator "
                "such as SpectralLatentTree."
            ) from exc
        bandwidths = None
        if self.bandwidth is not None:
            bandwidths = np.asarray(self.bandwidth, dtype=float).ravel()
            if bandwidths.shape != (X.shape[1],) or not np.all(bandwidths > 0):
                raise ValueError(
                    f"bandwidth must hold {X.shape[1]} positive values (one per column), "
                    f"got {self.bandwidth!r}."
                )
        observed = ~np.isnan(X)
        if sample_weight is not None:
            observed &= (np.asarray(sample_weight) > 0)[:, None]
        empty = np.flatnonzero(~observed.any(axis=0))
        if empty.size:
            raise ValueError(
                f"Columns {empty[:10].tolist()} have no observed value: a continuous column "
                "without data has no density to estimate. Drop them."
            )
        self.center_, self.scale_ = _column_scales(X, sample_weight)
        Z = (X - self.center_) / self.scale_
        if bandwidths is not None:
            bandwidths = bandwidths / self.scale_
        self.feature_map_ = RBFFeatureMap(self.n_components, self.bandwidth_scale, bandwidths)
        self.feature_map_.fit(Z, sample_weight)
        self.bandwidths_ = np.asarray(self.feature_map_.bandwidths_) * self.scale_
        self._training_data = _KernelData(Z, self.feature_map_.transform(Z))
        return self._training_data

    def _encode(self, X):
        X = np.asarray(X, dtype=np.float64)
        return KernelEvaluation(self.feature_map_, (X - self.center_) / self.scale_)

    def _moments(self, data, sample_weight):
        return KernelMoments(self.feature_map_, data.X, sample_weight, features=data.features)

    def _unseen_proba(self, moments):
        return np.zeros(moments.X.shape[1])

    def _floor_model(self, moments):
        mean, var = moments.column_moments()
        return mean, var + np.square(self.feature_map_.bandwidths_)  # the smoothed marginal

    def _log_floor(self, data):
        mean, var = self.floor_
        X = data.X
        logp = -0.5 * (X - mean) ** 2 / var - 0.5 * np.log(2 * np.pi * var)
        return np.where(np.isnan(X), 0.0, logp).sum(axis=1)

    # ------------------------------------------------------------------ structure
    def _learn_tree(self, moments, method):
        n_features = moments.X.shape[1]
        if method == "star":
            return LatentTree.star(n_features)
        if method in ("gaussian", "nonparanormal"):
            X = moments.X[~np.isnan(moments.X).any(axis=1)]
            if X.shape[0] < 3:
                raise ValueError(
                    f"structure={method!r} needs complete rows and X has "
                    f"{X.shape[0]}; the kernel-metric structures (e.g. 'nj') handle "
                    "missing entries."
                )
            metric = gaussian_distance if method == "gaussian" else nonparanormal_distance
            return learn_tree(metric(X), "nj", n_samples=X.shape[0])
        # centred operators of a k'-state hidden variable have rank k' - 1 (the centring
        # removes the constant direction): more singular values would add noise only
        D = kernel_distance(moments, max(1, self.n_hidden_states - 1))
        return learn_tree(
            D, method, n_samples=moments.X.shape[0], n_jobs=self.n_jobs, verbose=self.verbose
        )

    # ------------------------------------------------------------------ model
    def _fit_parameters(self, tree, moments, rng, max_iter=None):
        raw = fit_spectral(
            tree.with_observed_leaves(),
            moments,
            self.n_hidden_states,
            np.zeros(moments.X.shape[1]),
        )
        extras = {"raw_estimate_": raw, "floor_": self._floor_model(moments)}
        return FittedModel(tree, None, None, extras=extras)

    def fit(self, X, y=None, sample_weight=None):
        """Fit the kernel latent tree density.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Continuous (numeric) data; NaN marks a missing entry (available-case moments).
            Columns are standardised internally (any scale works); densities are reported
            in the units of ``X``.
        y : None
            Ignored.
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        self
        """
        super().fit(X, y, sample_weight)
        self._check_floor(self._training_data)
        del self._training_data
        return self

    def _set_fitted(self, fitted):
        for name, value in fitted.extras.items():
            setattr(self, name, value)

    def _log_likelihood(self, data):
        sign, logabs = spectral_log_abs(self.raw_estimate_, data)
        log_floor = np.log(FLOOR_RATIO) + self._log_floor(data)
        keep = (sign > 0) & np.isfinite(logabs) & (logabs >= log_floor)
        self.n_floored_ = int(np.sum(~keep))
        # the density of the standardised columns, back in the units of X (Jacobian)
        jacobian = np.where(np.isnan(data.X), 0.0, np.log(self.scale_)).sum(axis=1)
        return np.where(keep, logabs, log_floor) - jacobian

    def _check_floor(self, data):
        """Warn when most training rows fall under the floor: the estimate is not a
        usable density (bandwidth far too small, or far more hidden states than the data
        support)."""
        rows = np.arange(data.X.shape[0])[:: max(1, data.X.shape[0] // 2000)]
        self._log_likelihood(KernelEvaluation(self.feature_map_, data.X[rows]))
        share = self.n_floored_ / rows.size
        if share > 0.5:
            warnings.warn(
                f"{share:.0%} of the training rows have a non-positive density estimate "
                "and are scored by the floor: the model is not a usable density. Increase "
                "bandwidth_scale or lower n_hidden_states.",
                UserWarning,
                stacklevel=3,
            )

    # ------------------------------------------------------------------ queries
    def conditional_mean(self, X, target):
        """``E[X_target | observed entries of each row]`` under the fitted density.

        The target column of ``X`` is ignored; NaN entries of the other columns are
        marginalised out. Numerator and denominator of
        ``int x p(x, x_rest) dx / int p(x, x_rest) dx`` are one message pass each, the
        target leaf sending ``int x phi(x) dx`` and ``int phi(x) dx`` (exact for the
        normalised kernels). Where the estimated denominator is not positive the marginal
        mean of the target is returned; ``n_floored_`` counts those rows.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        target : int or str
            Column index, or a feature name when fitted on a DataFrame.

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        j = self._target_index(target)
        fmap = self.feature_map_
        evaluation = self._encode(self._validate_X(X, reset=False))  # one feature cache
        parts = {}
        for name, vector in (("num", fmap.first_moments_[j]), ("den", fmap.integrals_[j])):
            evaluation.fixed = {j: vector}
            parts[name] = spectral_log_abs(self.raw_estimate_, evaluation)
        (s_num, log_num), (s_den, log_den) = parts["num"], parts["den"]
        ok = (s_den > 0) & np.isfinite(log_den)  # a zero numerator is a mean of 0
        with np.errstate(over="ignore", invalid="ignore"):
            value = s_num * np.exp(log_num - log_den)
        ok &= np.isfinite(value)
        self.n_floored_ = int(np.sum(~ok))
        value = np.where(ok, value, self.floor_[0][j])
        return value * self.scale_[j] + self.center_[j]

    def conditional_proba(self, X, target):
        """Not defined for continuous columns: use :meth:`conditional_mean`."""
        raise TypeError(
            f"{type(self).__name__} models continuous columns, which have no categories: "
            "use conditional_mean(X, target) for E[X_target | other columns]."
        )

    def predict_hidden_proba(self, X):
        """Not available: the kernel model has no explicit hidden-state tables."""
        raise TypeError(f"{type(self).__name__} has no explicit hidden-state tables.")

    def sample(self, n_samples=1, random_state=None):
        """Not available: the kernel model has no explicit tables to sample from."""
        raise TypeError(f"{type(self).__name__} has no explicit tables to sample from.")

    def _shared_params(self):
        """Parameters that make per-class models of a classifier share this fit's tree
        and smoothing."""
        return {"tree": self.tree_, "bandwidth": self.bandwidths_}

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.categorical = False
        return tags


def _column_scales(X, sample_weight=None):
    """Weighted mean and standard deviation of every column over its observed entries,
    computed without overflow for any magnitude (scale 1 for constant or empty columns)."""
    n, d = X.shape
    w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=float)
    center, scale = np.zeros(d), np.ones(d)
    for j in range(d):
        obs = ~np.isnan(X[:, j]) & (w > 0)
        if not obs.any():
            continue
        x, wj = X[obs, j], w[obs]
        big = np.max(np.abs(x))
        if big == 0:
            continue
        y = x / big  # in [-1, 1]: no overflow in the moments
        m = np.average(y, weights=wj)
        sd = np.sqrt(np.average((y - m) ** 2, weights=wj))
        center[j] = m * big
        if sd > 0 and np.isfinite(sd * big) and sd * big > 0:
            scale[j] = sd * big
    return center, scale
