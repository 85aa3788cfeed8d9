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
missing entry sends ``int phi_j(x) dx`` and the estimate is renormalised to integrate to
one over all columns.

That raw estimate can be negative, so it is kept for research (``raw_log_abs``) and the
estimator's density is an explicit model on the same tree: given the state of its parent,
every column is a mixture of Gaussian bumps at its landmarks
(:mod:`ltm_sklearn._kernel_leaves`), whose tables start from the discrete spectral
recovery on the nearest-landmark discretisation and are polished by EM with the bump
densities as soft evidence.
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ._base import BaseLatentTree, FittedModel
from ._em import fit_em
from ._inference import DenseEvidence, log_likelihood
from ._kernel_leaves import bump_evidence, nearest_centre, select_bandwidth
from ._spectral import explicit_from_representation, fit_spectral, spectral_log_abs
from .moments import KernelMoments, MomentEstimator, RBFFeatureMap
from .structure import gaussian_distance, kernel_distance, learn_tree, nonparanormal_distance
from .tensor import expand_states
from .tree import LatentTree

#: leaf bandwidths tried per column, as multiples of Silverman's ``1.06 n^(-1/5)`` (in
#: standard deviations of the column)
BANDWIDTH_FACTORS = (0.125, 0.25, 0.5, 1.0, 2.0)
#: bandwidth of the wide bump of every column (centred at its mean, in standard
#: deviations): values beyond the landmarks keep a sensible density
WIDE_BUMP = 3.0
#: EM of the explicit model reads at most this many evidence entries (rows x centres);
#: larger data are subsampled (weighted) for EM
MAX_EVIDENCE_ENTRIES = 25_000_000
#: rows scored per block
_SCORE_BLOCK = 8192

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
    row of the table.
    """

    def __init__(self, feature_map, X):
        self.feature_map = feature_map
        self.X = X
        self._features = {}

    @property
    def shape(self):
        return (self.X.shape[1], self.X.shape[0])

    def leaf_messages(self, j, table):
        m = table.shape[0] - 2
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
    median-distance bandwidth; the tree is learned by the minimum-evolution search on the
    kernel tree metric (papers/002 eq. (12)) and the spectral algorithm of its section 4.3
    runs on the covariance operators of these features. The density is an explicit
    normalised model on that tree: every column a mixture of Gaussian bumps given its
    parent, polished by EM (see the module docstring and the Notes). For classification
    by per-class densities, wrap it in :class:`~ltm_sklearn.LatentTreeClassifier`.

    Parameters
    ----------
    n_hidden_states : int, default=2
        States of every hidden node of the explicit model (and singular values kept in the
        raw estimate's operator SVDs; the tree metric keeps one fewer), so
        ``GridSearchCV`` selects it by held-out log-likelihood.
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
    bandwidth_scale : float, default=None
        ``None``: the tree metric uses the median-distance bandwidth (the paper's
        heuristic) and every column's bump bandwidth is chosen by held-out likelihood of
        its marginal (``bandwidth_scores_``). A float is the manual override: both are
        ``bandwidth_scale`` times the median-distance bandwidth.
    bandwidth : array-like of shape (n_features,), default=None
        Per-column bandwidths in the units of ``X`` for both (``bandwidth_scale`` is then
        ignored), e.g. ``bandwidths_`` of another fit, so that several models smooth alike
        (:class:`~ltm_sklearn.LatentTreeClassifier` shares them this way).
    alpha : float, default=0.1
        Dirichlet pseudo-count added to every table entry in EM (hidden tables and the
        bump weights of the leaves).
    max_iter : int, default=300
        EM iterations polishing the explicit model (0 keeps the moment estimate).
    tol : float, default=1e-4
        EM stops when an iteration gains less than ``tol`` nats per row.
    n_jobs : int, default=None
        The two starts of the minimum-evolution search (``structure="me"``) in parallel
        processes (moments are single GEMMs, parallel through BLAS).
    random_state : int, RandomState instance or None, default=None
        Seeds the held-out splits of the bandwidth choice, the decompositions of the
        explicit recovery and EM's subsample (landmarks are quantiles).
    verbose : int, default=0
        Print the progress of the tree search and of EM.

    Attributes
    ----------
    tree_ : LatentTree
    feature_map_ : RBFFeatureMap
        Bandwidths, landmarks and Nystroem projections of every column (of the
        standardised columns ``(X - center_) / scale_``).
    center_, scale_ : ndarray of shape (n_features,)
        Weighted mean and standard deviation of every column (scale 1 for a constant
        column).
    centres_ : list of ndarray
        Bump centres of every column (its landmarks, standardised units).
    bandwidths_ : ndarray of shape (n_features,)
        Bump bandwidth of every column, in the units of ``X``.
    bandwidth_scores_ : list of dict or None
        Held-out mean log-density of every candidate bandwidth (standardised units), per
        column; ``None`` when the bandwidths were given.
    root_marginal_, cpts_ : ndarray, dict
        The explicit model: hidden tables, and for a column ``u`` the weights
        ``cpts_[u][h, m]`` of its bumps given the state ``h`` of its parent.
    lower_bound_, n_iter_, converged_ : float, int, bool
        EM's final objective (nats per row), iterations and convergence.
    raw_estimate_ : SpectralParams
        The kernel estimate of papers/002 (observable representation), for research
        (:meth:`raw_log_abs`).
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` has feature names.

    Notes
    -----
    ``score_samples`` is the exact log-density of an explicit normalised model: every
    column is, given the state of its parent, a mixture of Gaussian bumps at its centres
    with one bandwidth (:mod:`ltm_sklearn._kernel_leaves`), so the density integrates to
    one over all columns and NaN entries are marginalised exactly. The tables start from
    the spectral recovery on the columns discretised to their nearest centres and are
    polished by EM with the bump densities as soft evidence. The raw kernel estimate of
    papers/002, which can be negative, is kept as ``raw_estimate_``.

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
    >>> est = KernelLatentTree(n_hidden_states=2, random_state=0).fit(X)
    >>> X_test = truth.sample(1000, random_state=2)
    >>> gap = truth.log_likelihood(X_test).mean() - est.score(X_test)
    >>> bool(0 <= gap < 0.1)
    True
    >>> est.conditional_mean(X_test[:3], target=0).shape
    (3,)
    """

    _parameter_constraints: dict = {
        **{
            key: value
            for key, value in BaseLatentTree._parameter_constraints.items()
            if key != "categories"
        },
        "structure": [StrOptions(set(KERNEL_STRUCTURES))],
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "bandwidth_scale": [Interval(Real, 0, None, closed="neither"), None],
        "bandwidth": ["array-like", None],
    }

    def __init__(
        self,
        n_hidden_states=2,
        *,
        tree=None,
        structure="me",
        n_components=50,
        bandwidth_scale=None,
        bandwidth=None,
        alpha=0.1,
        max_iter=300,
        tol=1e-4,
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
        self.alpha = alpha
        self.max_iter = max_iter
        self.tol = tol
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------------ data hooks
    _allowed_kinds = "biuf"
    _warning_stacklevel = 4  # fit adds one frame

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
        scale = 1.0 if self.bandwidth_scale is None else self.bandwidth_scale
        self.feature_map_ = RBFFeatureMap(self.n_components, scale, bandwidths)
        self.feature_map_.fit(Z, sample_weight)
        # the landmarks, and one wide bump at the centre that holds the tails
        self.centres_ = [np.append(c, 0.0) for c in self.feature_map_.landmarks_]
        if bandwidths is not None or self.bandwidth_scale is not None:
            leaf = np.asarray(self.feature_map_.bandwidths_, dtype=float)
            self.bandwidth_scores_ = None
        else:
            leaf, self.bandwidth_scores_ = self._select_bandwidths(Z, sample_weight)
        self._leaf_widths = [
            np.append(np.full(c.size - 1, b), WIDE_BUMP) for c, b in zip(self.centres_, leaf)
        ]
        self.bandwidths_ = leaf * self.scale_
        return _KernelData(Z, self.feature_map_.transform(Z))

    def _select_bandwidths(self, Z, sample_weight):
        """Per column, the bump bandwidth of highest held-out likelihood of the column's
        marginal mixture among ``BANDWIDTH_FACTORS`` x Silverman's rule."""
        rng = check_random_state(self.random_state)
        w = np.ones(Z.shape[0]) if sample_weight is None else np.asarray(sample_weight, float)
        chosen, scores = [], []
        for j in range(Z.shape[1]):
            n_obs = max(int(np.sum(~np.isnan(Z[:, j]) & (w > 0))), 2)
            silverman = 1.06 * n_obs**-0.2
            b, sc = select_bandwidth(
                Z[:, j],
                w,
                self.centres_[j],
                [f * silverman for f in BANDWIDTH_FACTORS],
                rng,
                wide=WIDE_BUMP,
            )
            chosen.append(b)
            scores.append(sc)
        return np.asarray(chosen), scores

    def _encode(self, X):
        X = np.asarray(X, dtype=np.float64)
        return KernelEvaluation(self.feature_map_, (X - self.center_) / self.scale_)

    def _moments(self, data, sample_weight):
        return KernelMoments(self.feature_map_, data.X, sample_weight, features=data.features)

    def _unseen_proba(self, moments):
        return np.zeros(moments.X.shape[1])

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
        """The kernel estimate of papers/002 (kept as ``raw_estimate_``), then the explicit
        model: tables over the bump centres recovered from the moments of the columns
        discretised to their nearest centres (the discrete estimators' explicit recovery),
        polished by EM on the bump densities (soft evidence)."""
        d = moments.X.shape[1]
        raw = fit_spectral(tree.with_observed_leaves(), moments, self.n_hidden_states, np.zeros(d))
        # the nearest landmark of every value (the wide last bump starts empty)
        codes = np.stack([nearest_centre(moments.X[:, j], self.centres_[j][:-1]) for j in range(d)])
        sizes = [len(c) for c in self.centres_]
        coarse = MomentEstimator(codes.astype(np.int32), sizes, moments.sample_weight)
        root, cpts, _ = explicit_from_representation(
            tree, coarse, self.n_hidden_states, np.zeros(d), fit_spectral, rng
        )
        root, cpts = expand_states(tree, root, cpts, self.n_hidden_states, rng, noise=0.05)
        rows = np.flatnonzero(moments.sample_weight > 0)
        weights = moments.sample_weight[rows]
        cap = max(2000, MAX_EVIDENCE_ENTRIES // max(sum(sizes), 1))
        if rows.size > cap:  # a weighted subsample: every row has unit weight
            rows = rng.choice(rows, cap, replace=False, p=weights / weights.sum())
            weights = np.ones(cap)
        root, cpts, objective, n_iter, converged, _ = fit_em(
            tree,
            root,
            cpts,
            self._evidence(moments.X[rows]),
            weights,
            alpha=self.alpha,
            max_iter=self.max_iter if max_iter is None else max_iter,
            tol=self.tol,
            verbose=self.verbose,
        )
        extras = {"raw_estimate_": raw}
        return FittedModel(tree, root, cpts, objective, n_iter, converged, extras)

    def _evidence(self, Z):
        """Bump densities of standardised rows (a KernelEvaluation or an array), scaled per
        row and column; the log of the scales is ``evidence.log_scale``."""
        Z = getattr(Z, "X", Z)
        vectors, log_scale = {}, np.zeros(Z.shape[0])
        for j in range(Z.shape[1]):
            vectors[j], scale = bump_evidence(Z[:, j], self.centres_[j], self._leaf_widths[j])
            log_scale += scale
        evidence = DenseEvidence(vectors)
        evidence.log_scale = log_scale
        return evidence

    def fit(self, X, y=None, sample_weight=None):
        """Fit the continuous latent tree density.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Continuous (numeric) data; NaN marks a missing entry (available-case moments,
            marginalised in EM). Columns are standardised internally (any scale works);
            densities are reported in the units of ``X``.
        y : None
            Ignored.
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        self
        """
        return super().fit(X, y, sample_weight)

    def _log_likelihood(self, data):
        Z = data.X
        out = np.empty(Z.shape[0])
        for start in range(0, Z.shape[0], _SCORE_BLOCK):
            ev = self._evidence(Z[start : start + _SCORE_BLOCK])
            out[start : start + _SCORE_BLOCK] = (
                log_likelihood(self.tree_, self.root_marginal_, self.cpts_, ev) + ev.log_scale
            )
        # the density of the standardised columns, back in the units of X (Jacobian)
        jacobian = np.where(np.isnan(Z), 0.0, np.log(self.scale_)).sum(axis=1)
        return out - jacobian

    def raw_log_abs(self, X):
        """Sign and ``log |p_hat(x)|`` of the raw kernel estimate of papers/002 (sections
        4.2-4.3, renormalised to integrate to one), in the units of ``X``.

        For research: it can be negative and is *not* what :meth:`score_samples` returns.
        """
        check_is_fitted(self)
        data = self._encode(self._validate_X(X, reset=False))
        sign, logabs = spectral_log_abs(self.raw_estimate_, data)
        jacobian = np.where(np.isnan(data.X), 0.0, np.log(self.scale_)).sum(axis=1)
        return sign, logabs - jacobian

    # ------------------------------------------------------------------ queries
    def conditional_mean(self, X, target):
        """``E[X_target | observed entries of each row]`` under the fitted density.

        The target column of ``X`` is ignored; NaN entries of the other columns are
        marginalised out. ``int x p(x, x_rest) dx / int p(x, x_rest) dx`` is two message
        passes: the target leaf sends its centres (shifted to be positive) and then ones,
        since every bump integrates to one and has its centre as mean.

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
        Z = self._encode(self._validate_X(X, reset=False)).X.copy()
        Z[:, j] = np.nan
        centres = self.centres_[j]
        shift = centres.min() - 1.0  # positive messages: E[x] = E[x - shift] + shift
        out = np.empty(Z.shape[0])
        for start in range(0, Z.shape[0], _SCORE_BLOCK):
            ev = self._evidence(Z[start : start + _SCORE_BLOCK])
            den = log_likelihood(self.tree_, self.root_marginal_, self.cpts_, ev)
            ev.vectors[j] = np.repeat((centres - shift)[None, :], ev.n_rows, axis=0)
            num = log_likelihood(self.tree_, self.root_marginal_, self.cpts_, ev)
            out[start : start + _SCORE_BLOCK] = np.exp(num - den) + shift
        return out * self.scale_[j] + self.center_[j]

    def conditional_proba(self, X, target):
        """Not defined for continuous columns: use :meth:`conditional_mean`."""
        raise TypeError(
            f"{type(self).__name__} models continuous columns, which have no categories: "
            "use conditional_mean(X, target) for E[X_target | other columns]."
        )

    def _decode(self, codes, random_state=None):
        """Sampled bump indices to values: the centre plus Gaussian noise of the bump's
        bandwidth, in the units of ``X``."""
        rng = check_random_state(random_state)
        Z = np.column_stack(
            [
                self.centres_[j][codes[:, j]]
                + self._leaf_widths[j][codes[:, j]] * rng.standard_normal(codes.shape[0])
                for j in range(codes.shape[1])
            ]
        )
        return Z * self.scale_ + self.center_

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
