"""GaussianLatentTree: continuous hidden variables, Gaussian columns, optional discrete root.

One concept, the :class:`GaussianLatentTree` estimator: its margins, its BIC walk over
structures and components, and its queries; the model's math is in
:mod:`ltm_sklearn._algorithms.gaussian`, and about a fifth of the module is the class
docstring.
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from scipy.special import logsumexp
from sklearn.base import BaseEstimator, DensityMixin
from sklearn.cluster import KMeans
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data
from threadpoolctl import threadpool_limits

from .._algorithms.gaussian import (
    cluster_correlations,
    component_conditionals,
    fit_gaussian_tree,
    leaf_groups,
    mixture_log_density,
    n_free_parameters,
    sample_nodes,
)
from .._algorithms.structure import (
    chow_liu,
    correlation_distance,
    gaussian_information,
    grouped_chow_liu,
    hidden_chow_liu,
    learn_tree,
)
from .._algorithms.structure.learn import DISTANCE_METHODS
from .._algorithms.yeo_johnson import (
    fit_yeo_johnson,
    yeo_johnson,
    yeo_johnson_inverse,
    yeo_johnson_log_derivative,
)
from .._engine.encoding import check_unique_columns
from .._engine.mixed_columns import column_scales, warn_few_values
from .._engine.threads import block_threads, single_threaded_blas
from .._engine.tree import LatentTree
from .._engine.user_warnings import warn
from .._engine.workers import run_in_workers, worth_workers
from .selection import grow
from .sklearn_internals import N_JOBS_CONSTRAINT, Interval, StrOptions, check_sample_weight
from .validation import (
    as_fitted_frame,
    check_frame_dtypes,
    mean_score,
    refuse_dask,
    reset_fitted_state,
    target_index,
)

__all__ = ["GaussianLatentTree"]

#: structures learned from the Gaussian metric or the Gaussian mutual information
GAUSSIAN_STRUCTURES = (
    *DISTANCE_METHODS,
    "chow_liu",
    "hclt",
    "grouped_hclt",
    "tree_mixture",
    "grouped_leaves",
    "full",
)

#: structures whose columns under a hidden variable form one multivariate leaf
GROUPED_LEAF_STRUCTURES = ("grouped_leaves", "full")
#: largest multivariate leaf of ``structure="grouped_leaves"``
GROUP_SIZE = 4
#: distinct rows per component and per column of its largest multivariate leaf
_ROWS_PER_GROUP_COLUMN = 3
#: the candidates of ``structure="auto"``
AUTO_STRUCTURES = ("chow_liu", "tree_mixture", "me", "hclt", "full")
#: the largest value, in the model's standard units, that scoring reads as it is
_MODEL_UNITS_LIMIT = 1e100
#: largest number of components tried by ``n_components="auto"``
MAX_AUTO_COMPONENTS = 10
#: Gauss-Hermite nodes of the conditional moments of a transformed column
_HERMITE_NODES = 64
#: ``"auto"`` stops after this many components in a row without a better criterion
_PATIENCE = 2
#: the structures with hidden variables between the columns, whose walks stop once the
#: Chow-Liu tree over the columns scores better
_LATENT = ("me", "hclt", "grouped_hclt")
#: seconds one after another per entry of the fits still to do (rows x columns x fits),
#: the estimate by which the structures' walks go to worker processes
#: (:func:`~ltm_sklearn._engine.workers.worth_workers`), measured where the rows hold
#: the time: 1.6-1.7e-6 on magic (3,500 rows), one fit after another on the 2-core
#: machine. Small tables take more per entry (7e-6 on breast cancer's 398 rows), but
#: their whole search (3-5 s) is too short for the workers to pay their start: with them
#: the six numeric tables took 0.7-1 s longer, or no less
_SECONDS_PER_ENTRY = 1.8e-6


class GaussianLatentTree(DensityMixin, BaseEstimator):
    """Gaussian latent tree: continuous hidden variables over Gaussian columns, or a
    mixture of such trees under a discrete root.

    Every node is linear-Gaussian in its parent, ``x_v = a_v x_u + b_v + e_v`` (Choi, Tan,
    Anandkumar & Willsky, "Learning Latent Tree Graphical Models", JMLR 2011, section 2.2;
    Parikh, Song & Xing (ICML 2011)), so the model follows linear dependence between
    columns exactly, with ``O(d)`` parameters instead of a full covariance's ``O(d^2)``.
    With ``n_components > 1`` a discrete root switches between linear-Gaussian regimes
    (one structure, their own coefficients): clusters and linear dependence together.

    The structure comes from the Gaussian information distance ``-log |corr|``
    (:func:`~ltm_sklearn.structure.gaussian_distance`, pairwise-complete on NaN) with the
    minimum-evolution search, or from the Gaussian Chow-Liu tree; the coefficients from
    the tree metric (edge correlations ``exp(-length)``), then EM by Gaussian
    conditioning. Missing entries are marginalised exactly. Columns are standardised
    inside ``fit``; scores are in the units of ``X``.

    Parameters
    ----------
    n_components : int or "auto", default="auto"
        States of the discrete root. ``"auto"``: 1, 2, ... up to 10 by BIC, stopping
        after two in a row that do not improve it, and trying no more components than
        leave ``n_features + 1`` distinct rows to each (with multivariate leaves, 3 per
        column of the largest leaf).
    tree : LatentTree, edge list, Newick string or networkx graph, default=None
        A given tree over the columns (observed columns ``0 .. d-1`` or feature names,
        hidden variables after), as in :class:`SpectralLatentTree`; ``None`` learns it
        with ``structure``.
    structure : str, default="auto"
        Structure learning when ``tree=None``: ``"me"`` (minimum-evolution search on
        the Gaussian metric), ``"nj"``, ``"rg"``, ``"clrg"``, ``"clnj"``, ``"star"`` (one
        hidden variable: factor analysis with one
        factor), ``"chow_liu"`` (the Gaussian Chow-Liu tree, no hidden variables),
        ``"hclt"`` / ``"grouped_hclt"`` (a hidden variable per column or per group of
        columns along the Chow-Liu tree), ``"tree_mixture"`` (a Chow-Liu tree per
        component, re-learned in every M-step: the mixture of trees of Meila & Jordan,
        "Learning with Mixtures of Trees", JMLR 2000, with Gaussian nodes),
        ``"grouped_leaves"`` (the ``"grouped_hclt"`` tree with up to 4 columns per hidden
        variable, each group one *multivariate leaf*: the noises of its columns
        correlated, a full covariance within the group),
        ``"full"`` (one hidden variable over all columns, one multivariate leaf: every
        component a full-covariance Gaussian, the limit of multivariate leaves where
        every column depends linearly on all others), ``"auto"`` (the best of
        ``"chow_liu"``, ``"tree_mixture"``, ``"me"``, ``"hclt"`` and ``"full"`` by BIC,
        each with its own number of components; the Chow-Liu tree walks its numbers of
        components first, and ``"me"`` and ``"hclt"`` stop after two numbers in a row at
        which it scores better).
    max_iter : int, default=300
        EM iterations per fit.
    tol : float, default=1e-4
        EM stops when the mean log-likelihood per row gains less than ``tol``.
    reg_covar : float, default=1e-6
        Floor of each column's noise variance (in standardised units): duplicated or
        collinear columns get a finite density.
    margins : {"auto", "yeo-johnson", "none"}, default="auto"
        Per-column map to a near-Gaussian margin before the tree: the Yeo-Johnson power
        transformation, its exponent of largest likelihood in ``[0, 2]`` (where it maps
        the real line onto itself, so the density stays normalised on the columns).
        ``"auto"`` keeps it when it gives the better BIC (in the units of ``X``, the
        Jacobian and the exponents counted) to the Chow-Liu tree with its components
        chosen; ``"yeo-johnson"`` always transforms. Scores include the
        Jacobian: they are densities on the columns as given.
    n_jobs : int, default=None
        Worker processes for the candidate structures (each walks its numbers of
        components in a process of its own): ``None`` uses the cores the process may use
        (at most ``OMP_NUM_THREADS``), as the other estimators. The model does not depend
        on it.
    random_state : int, RandomState instance or None, default=None
        Seeds the k-means start of the components.
    verbose : int, default=0
        ``>= 1`` prints the BIC of every candidate (margins, structure, components) and
        the choice.

    Attributes
    ----------
    tree_ : LatentTree
        The structure (observed columns ``0 .. d-1``, continuous hidden variables after);
        with ``structure="tree_mixture"`` the largest component's.
    trees_ : list of LatentTree
        The structure of every component.
    structure_ : str
        How the structure was obtained.
    groups_ : list of list of int
        The multivariate leaves (columns whose noises share a full covariance); empty
        when every column is its own leaf.
    n_components_ : int
    weights_ : ndarray of shape (n_components,)
        Proportions of the discrete root.
    params_ : GaussianTreeParameters
        Coefficients per component, in the units the tree models (the columns
        standardised, mapped by their margins, standardised again).
    center_, scale_ : ndarray of shape (n_features,)
        The standardisation of the columns (before the transformation).
    lambdas_ : ndarray of shape (n_features,)
        Yeo-Johnson exponent of each column (1: the column is not transformed).
    model_center_, model_scale_ : ndarray of shape (n_features,)
        The standardisation of the transformed columns, which the tree models.
    bic_ : dict
        BIC (in the units of ``X``) of every ``(margins, structure, n_components)``
        fitted; lower is better.
    margins_ : str
        The map of the margins kept (``"none"`` or ``"yeo-johnson"``).
    converged_ : bool
    n_iter_ : int
    lower_bound_ : float
        Mean log-likelihood per row of the training data in the units the tree models
        (without the Jacobian of the margins and standardisations: not comparable with
        ``score``).
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Defined only when ``X`` has feature names that are all strings.

    See Also
    --------
    KernelLatentTree : discrete hidden states with kernel (bump) leaves, for
        non-Gaussian marginals and mixed numeric / categorical tables.
    sklearn.mixture.GaussianMixture : full covariance per component.

    Examples
    --------
    >>> from ltm_sklearn import GaussianLatentTree
    >>> from ltm_sklearn.datasets import GaussianLatentTreeModel, balanced_binary_tree
    >>> truth = GaussianLatentTreeModel.random(balanced_binary_tree(8), random_state=0)
    >>> X = truth.sample(5000, random_state=0)
    >>> est = GaussianLatentTree(n_components=1, structure="me", random_state=0).fit(X)
    >>> from ltm_sklearn.metrics import robinson_foulds
    >>> robinson_foulds(est.tree_, truth.tree)
    0
    >>> bool(abs(est.score(X) - truth.log_likelihood(X).mean()) < 0.01)
    True
    """

    _parameter_constraints: dict = {
        "n_components": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "tree": "no_validation",  # LatentTree, edge list, Newick string or networkx graph
        "structure": [StrOptions(set(GAUSSIAN_STRUCTURES) | {"auto"})],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "reg_covar": [Interval(Real, 0, None, closed="neither")],
        "margins": [StrOptions({"auto", "yeo-johnson", "none"})],
        "n_jobs": N_JOBS_CONSTRAINT,
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        n_components="auto",
        *,
        tree=None,
        structure="auto",
        max_iter=300,
        tol=1e-4,
        reg_covar=1e-6,
        margins="auto",
        n_jobs=None,
        random_state=None,
        verbose=0,
    ):
        self.n_components = n_components
        self.tree = tree
        self.structure = structure
        self.max_iter = max_iter
        self.tol = tol
        self.reg_covar = reg_covar
        self.margins = margins
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------------ validation
    def _validate_X(self, X, reset):
        refuse_dask(X, type(self).__name__, in_fit=reset)
        check_unique_columns(X)
        check_frame_dtypes(X, "biuf", type(self).__name__)
        X = validate_data(
            self,
            X,
            reset=reset,
            dtype=np.float64,
            ensure_all_finite="allow-nan",
            ensure_min_samples=2 if reset else 1,
        )
        return X

    def _standardise(self, X, sample_weight):
        seen = ~np.isnan(X)
        empty = np.flatnonzero(~seen.any(axis=0))
        if empty.size:
            raise ValueError(
                f"Column(s) {self._names(empty)} hold only NaN: a column needs observed "
                "values to be modelled."
            )
        # a constant column keeps its units: its density is the reg_covar floor's, finite
        return column_scales(X, sample_weight)

    def _warn_constant(self, X):
        """Warn of the columns constant on the training rows ``X`` (NaN missing)."""
        constant = [
            j
            for j in range(X.shape[1])
            if np.nanmax(X[:, j], initial=-np.inf) == np.nanmin(X[:, j], initial=np.inf)
        ]
        if constant:
            spike = -0.5 * np.log(2 * np.pi * self.reg_covar)
            warn(
                f"Column(s) {self._names(constant)} are constant on the training rows: "
                "the Gaussian density of each is a spike of variance reg_covar at "
                f"its value, about {spike:.1f} nats per row added to every log-likelihood "
                "at it (and any other value is very unlikely). Drop such columns before "
                "comparing scores across sets of columns.",
                UserWarning,
            )

    def _names(self, idx):
        names = getattr(self, "feature_names_in_", None)
        return [str(names[i]) if names is not None else int(i) for i in idx]

    # ------------------------------------------------------------------ structure
    def _structure(self, Z, method, labels, sw):
        d = Z.shape[1]
        names = getattr(self, "feature_names_in_", None)
        names = None if names is None else [str(n) for n in names]
        if not isinstance(method, str) or method not in GAUSSIAN_STRUCTURES:
            return LatentTree.coerce(method, d, feature_names=names, observed_leaves_only=False)
        if method == "full":
            return LatentTree.star(d, feature_names=names)
        corrs, sizes = cluster_correlations(Z, labels, sw)
        if method in ("chow_liu", "hclt", "grouped_hclt", "tree_mixture", "grouped_leaves"):
            # Gaussian mutual information -log(1 - rho^2) / 2, averaged over the clusters
            info = sum(w * gaussian_information(c) for c, w in zip(corrs, sizes))
            if method == "grouped_leaves":
                return grouped_chow_liu(info, max_group=GROUP_SIZE, feature_names=names)
            fn = {"hclt": hidden_chow_liu, "grouped_hclt": grouped_chow_liu}
            return fn.get(method, chow_liu)(info, feature_names=names)
        # the Gaussian metric -log |corr| of each cluster, averaged: additive on the shared
        # tree whatever the signs and strengths of each component's edges
        D = sum(w * correlation_distance(c) for c, w in zip(corrs, sizes))
        # the censored check of "me" without the length condition, which was chosen on the
        # spectral metric and costs the Gaussian metric's trees (docs/architecture.md,
        # "Tuning constants")
        return learn_tree(
            D, method, n_samples=Z.shape[0], feature_names=names, censored_max_excess=None
        )

    # ------------------------------------------------------------------ fit
    def fit(self, X, y=None, sample_weight=None):
        """Learn the structure and the coefficients (BIC choices in ``bic_``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Numeric columns; NaN entries are missing values.
        y : ignored
        sample_weight : array-like of shape (n_samples,), default=None
            Frequency weights (non-negative): a weight w counts as w copies of the row,
            so BIC reads their sum as the number of rows.

        Returns
        -------
        self
        """
        self._validate_params()
        reset_fitted_state(self)
        X = self._validate_X(X, reset=True)
        sw = check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True)
        keep = sw > 0
        if keep.sum() < 2:
            raise ValueError("GaussianLatentTree needs at least 2 rows of positive weight.")
        X, sw = X[keep], sw[keep]
        if sw.sum() < X.shape[1] + 1:
            warn(
                f"sample_weight sums to {sw.sum():.3g}: frequency weights, which BIC reads as "
                f"that many rows, fewer than one Gaussian over {X.shape[1]} columns needs. "
                "Scale the weights to sum to the number of rows they stand for.",
                UserWarning,
            )
        self._warn_constant(X)
        names = getattr(self, "feature_names_in_", None)
        warn_few_values(X, range(X.shape[1]), type(self).__name__, names, constant_said=True)
        self.center_, self.scale_ = self._standardise(X, sw)
        S = (X - self.center_) / self.scale_
        d = X.shape[1]
        options = {}
        if self.margins != "yeo-johnson":
            options["none"] = np.ones(d)
        if self.margins != "none":
            options["yeo-johnson"] = np.array([fit_yeo_johnson(S[:, j], sw)[0] for j in range(d)])
        rng = check_random_state(self.random_state)
        seed = rng.randint(np.iinfo(np.int32).max)
        if self.tree is not None:
            # read once here: a Newick string is a tree, not the name of a structure
            structures = (self._structure(S, self.tree, None, sw),)
        elif self.structure == "auto":
            structures = AUTO_STRUCTURES
        else:
            structures = (self.structure,)
        if self.n_components == "auto":
            # each component should see at least d + 1 distinct rows
            distinct = len(np.unique(np.nan_to_num(S, nan=np.inf), axis=0))
            top = max(1, min(MAX_AUTO_COMPONENTS, distinct // (d + 1)))
            grid = range(1, top + 1)
        else:
            if self.n_components > len(S):
                raise ValueError(f"n_components={self.n_components} must be <= n_samples={len(S)}.")
            grid, distinct = (self.n_components,), None
        self.bic_ = {}
        prepared = {name: self._margins(X, S, sw, lam, name) for name, lam in options.items()}
        if len(prepared) > 1:
            # the margins are chosen on the fastest structure, the Chow-Liu tree (its fits
            # count among the candidates when "chow_liu" is one)
            trial = {
                name: self._search(data, sw, ("chow_liu",), grid, seed, distinct)
                for name, data in prepared.items()
            }
            chosen = min(trial, key=lambda name: trial[name]["bic"])
            prepared = {chosen: prepared[chosen]}
        ((name, data),) = prepared.items()
        best = self._search(data, sw, structures, grid, seed, distinct)
        best.update(lambdas=options[name], center=data["center"], scale=data["scale"])
        best["transform"] = name
        self.lambdas_ = best["lambdas"]
        self.model_center_, self.model_scale_ = best["center"], best["scale"]
        self.margins_ = best["transform"]
        self.trees_ = best["params"].trees_or(best["tree"])
        # the structure shown: the shared one, or the largest component's
        self.tree_ = self.trees_[int(np.argmax(best["params"].log_weights))]
        self.params_ = best["params"]
        self.groups_ = [g.tolist() for g in self.params_.groups or ()]
        self.structure_ = best["structure"]
        self.n_components_ = self.params_.n_components
        self.weights_ = np.exp(self.params_.log_weights)
        self.converged_ = best["converged"]
        self.n_iter_ = best["n_iter"]
        self.lower_bound_ = best["score"]
        if self.verbose:
            for (margins, structure, k), bic in sorted(self.bic_.items()):
                print(
                    f"margins={margins!r}, structure={structure!r}, {k} components: BIC {bic:.1f}"
                )
            print(
                f"chose margins={self.margins_!r}, structure={self.structure_!r}, "
                f"{self.n_components_} components"
            )
        if self.n_components == "auto" and self.n_components_ >= MAX_AUTO_COMPONENTS:
            k = self.n_components_
            below = self.bic_.get((self.margins_, self.structure_, k - 1))
            trend = "" if below is None else f" ({k - 1}: {below:.1f}, {k}: {best['bic']:.1f})"
            warn(
                f"n_components='auto' stopped at its cap of {MAX_AUTO_COMPONENTS} components "
                f"with the BIC still falling{trend}; pass a number of components to try more.",
                UserWarning,
            )
        if not self.converged_:
            warn(
                f"EM did not converge in max_iter={self.max_iter} iterations; increase "
                "max_iter or tol.",
                ConvergenceWarning,
            )
        return self

    def _margins(self, X, S, sw, lambdas, name):
        """The columns the tree models under one choice of margins, and the BIC offset
        that puts the tree's BIC in the units of ``X`` (log-Jacobian, exponents)."""
        T, log_jacobian = S.copy(), np.zeros(len(S))
        for j in np.flatnonzero(lambdas != 1.0):
            log_jacobian += yeo_johnson_log_derivative(S[:, j], lambdas[j])
            T[:, j] = yeo_johnson(S[:, j], lambdas[j])
        center, scale = self._standardise(T, sw)
        log_jacobian -= (~np.isnan(X)) @ np.log(self.scale_ * scale)
        n_eff = sw.sum()
        offset = -2.0 * sw @ log_jacobian + np.sum(lambdas != 1.0) * np.log(n_eff)
        return {
            "Z": (T - center) / scale,
            "center": center,
            "scale": scale,
            "offset": offset,
            "name": name,
            "fits": {},
            "starts": {},
        }

    def _search(self, data, sw, structures, grid, seed, distinct):
        """The best BIC over structures, each walking the grid of components (a tree
        without hidden variables needs more components than a latent tree to fit the
        same law) until two in a row do not improve it (:func:`~.selection.grow`), the
        Chow-Liu tree first: a structure with hidden variables between the columns also
        stops after two numbers of components at which the Chow-Liu tree over the same
        columns scores better (on the six numeric tables the same models in 1.1-2.2x
        less time, ``bench_speed.py``); the
        walks run side by side in worker processes (``n_jobs``) when that saves more
        than the workers' start, and their fits are cached in ``data``."""
        d = data["Z"].shape[1]
        names = [s for s in structures if isinstance(s, str)]
        reference = None
        if "chow_liu" in names and len(names) > 1:
            # among candidates, the Chow-Liu tree walks first (the fastest): the latent
            # structures stop where it scores better (:func:`_walk`)
            if "chow_liu" not in {n for n, _ in data["fits"]}:
                self._search(data, sw, ("chow_liu",), grid, seed, distinct)
            reference = {k: f["bic"] for (n, k), f in data["fits"].items() if n == "chow_liu"}
        walks = []
        for structure in structures:
            name = structure if isinstance(structure, str) else "given"
            ks = list(_group_grid(name, grid, d, distinct, optional=len(structures) > 1))
            cached = {k: f for (n, k), f in data["fits"].items() if n == name}
            walks.append((structure, name, ks, cached, reference if name in _LATENT else None))
        Z, starts = data["Z"], data["starts"]
        args = (Z, sw, starts, seed, data["offset"])
        jobs = min(block_threads(self.n_jobs), len(walks))
        todo = sum(len(ks) - len(cached) for _, _, ks, cached, _ in walks)
        # no batch follows: the walks go to worker processes that they start only when
        # the time they save pays for the start
        serial = len(Z) * d * todo * _SECONDS_PER_ENTRY
        if todo > 1 and worth_workers(jobs, serial, alone=True):
            # the k-means starts shared by the walks, found here once for all of them
            for k in sorted({k for _, _, ks, _, _ in walks for k in ks}):
                _kmeans_start(starts, Z, sw, k, seed)
            results = run_in_workers(_walk, [(self, *walk, *args) for walk in walks], jobs)
        else:  # here the walks find the starts they reach, as they reach them
            results = [_walk(self, *walk, *args) for walk in walks]
        best = None
        for (_, name, *_), fits in zip(walks, results):
            for k, fit in fits.items():
                data["fits"][(name, k)] = fit
                self.bic_[(data["name"], name, k)] = float(fit["bic"])
                if best is None or fit["bic"] < best["bic"]:
                    best = fit
        return dict(best)

    def _fit_one(self, Z, sw, structure, k, starts):
        labels = starts.get(k)
        tree = self._structure(Z, structure, labels, sw)
        grouped = isinstance(structure, str) and structure in GROUPED_LEAF_STRUCTURES
        groups = leaf_groups(tree) if grouped else None
        params, trace, converged = fit_gaussian_tree(
            Z,
            tree,
            k,
            sample_weight=sw,
            labels=labels,
            max_iter=self.max_iter,
            tol=self.tol,
            reg_covar=self.reg_covar,
            relearn_trees=_is(structure, "tree_mixture"),
            groups=groups,
        )
        return {
            "tree": tree,
            "params": params,
            "score": trace[-1],
            "converged": converged,
            "n_iter": len(trace),
            "n_params": n_free_parameters(tree, k, groups),
        }

    def _shared_params(self):
        """Parameters that make per-class models of a classifier share this fit's tree
        (the shared one, or the largest component's: ``tree_``)."""
        return {"tree": self.tree_}

    # ------------------------------------------------------------------ scoring
    def _joint(self, X):
        """``log p(k, x)`` per component, in the units of ``X`` (NaN marginalised)."""
        check_is_fitted(self)
        Z, log_jacobian = self._to_model(self._validate_X(X, reset=False))
        joint = mixture_log_density(Z, self.tree_, self.params_)[1]
        return joint + log_jacobian[:, None]

    def _to_model(self, X):
        """Columns in the units the tree models, and each row's log-Jacobian (NaN: 0)."""
        seen = ~np.isnan(X)
        S = (X - self.center_) / self.scale_
        log_jacobian = -(seen @ np.log(self.scale_ * self.model_scale_))
        for j in np.flatnonzero(self.lambdas_ != 1.0):
            log_jacobian += yeo_johnson_log_derivative(S[:, j], self.lambdas_[j])
            S[:, j] = yeo_johnson(S[:, j], self.lambdas_[j])
        Z = (S - self.model_center_) / self.model_scale_
        # beyond 1e100 standard units the density is below exp(-1e199) either way; the
        # products of the quadratic forms would overflow (inf - inf) from about 1e154
        np.clip(Z, -_MODEL_UNITS_LIMIT, _MODEL_UNITS_LIMIT, out=Z)
        return Z, log_jacobian

    def _from_model(self, Z, j):
        """Column ``j``'s values from the tree's units (the inverse of :meth:`_to_model`)."""
        S = Z * self.model_scale_[j] + self.model_center_[j]
        if self.lambdas_[j] != 1.0:
            S = yeo_johnson_inverse(S, self.lambdas_[j])
        return S * self.scale_[j] + self.center_[j]

    def score_samples(self, X):
        """Log-density of each row; NaN entries are marginalised out exactly.

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        return logsumexp(self._joint(X), axis=1)

    def score(self, X, y=None, sample_weight=None):
        """Mean log-density per row (weighted by ``sample_weight``)."""
        return mean_score(self.score_samples(X), sample_weight)

    def bic(self, X):
        """Bayesian information criterion on ``X`` (lower is better)."""
        n = len(self._validate_X(X, reset=False))
        p = n_free_parameters(self.tree_, self.n_components_, self.params_.groups)
        p += np.sum(self.lambdas_ != 1.0)
        return -2.0 * self.score(X) * n + p * np.log(n)

    def predict_proba(self, X):
        """Posterior of the discrete root (the component) given each row.

        Returns
        -------
        ndarray of shape (n_samples, n_components)
        """
        joint = self._joint(X)
        return np.exp(joint - logsumexp(joint, axis=1, keepdims=True))

    def predict(self, X):
        """Most probable component of each row."""
        return np.argmax(self.predict_proba(X), axis=1)

    def _conditional(self, X, target):
        check_is_fitted(self)
        j = target_index(self, target)
        X = self._validate_X(X, reset=False).copy()
        X[:, j] = np.nan
        Z = self._to_model(X)[0]
        means, variances, post = component_conditionals(Z, self.tree_, self.trees_, self.params_, j)
        if self.lambdas_[j] == 1.0:  # linear in the tree's units
            m = (post * means).sum(1)
            v = (post * (variances + means**2)).sum(1) - m**2
            scale = self.scale_[j] * self.model_scale_[j]
            return self._from_model(m, j), np.maximum(v, 0.0) * scale**2
        # a transformed column: E[x] and E[x^2] of each component by Gauss-Hermite
        nodes, weights = np.polynomial.hermite_e.hermegauss(_HERMITE_NODES)
        weights = weights / weights.sum()
        values = self._from_model(
            means[..., None] + np.sqrt(variances)[..., None] * nodes, j
        )  # (rows, K, nodes)
        # a component without posterior weight adds nothing, even where its values
        # overflow (a row far beyond the data: +-inf once transformed back)
        values = np.where(post[..., None] > 0, values, 0.0)
        with np.errstate(over="ignore", invalid="ignore"):
            m = (post * (values @ weights)).sum(1)
            v = (post * (values**2 @ weights)).sum(1) - m**2
        return m, np.where(np.isfinite(m), np.maximum(v, 0.0), np.inf)

    def conditional_mean(self, X, target):
        """``E[X_target | observed entries of each row]`` (exact Gaussian conditioning,
        averaged over the components' posteriors). The target column of ``X`` is ignored.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        target : int or str
            Column index, or a feature name when fitted on a DataFrame.

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        return self._conditional(X, target)[0]

    def conditional_variance(self, X, target):
        """``Var[X_target | observed entries of each row]`` (law of total variance over the
        components). The target column of ``X`` is ignored.

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        return self._conditional(X, target)[1]

    def sample(self, n_samples=1, random_state=None):
        """Draw rows from the fitted model.

        Returns
        -------
        ndarray or DataFrame of shape (n_samples, n_features)
            A DataFrame with the fitted column names after a fit on a DataFrame.
        """
        check_is_fitted(self)
        if not isinstance(n_samples, (Integral, np.integer)) or n_samples < 1:
            raise ValueError(f"n_samples must be a positive integer, got {n_samples!r}.")
        rng = check_random_state(random_state)
        p, n = self.params_, int(n_samples)
        comp = rng.choice(p.n_components, size=n, p=self.weights_)
        Z = np.empty((n, self.n_features_in_))
        for k, tree in enumerate(self.trees_):
            rows = np.flatnonzero(comp == k)
            x = sample_nodes(tree, *p.component(k), rows.size, rng, groups=p.groups)
            Z[rows] = x[:, : tree.n_observed]
        values = np.column_stack([self._from_model(Z[:, j], j) for j in range(Z.shape[1])])
        return as_fitted_frame(self, values)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags


def _kmeans_start(starts, Z, sw, k, seed):
    """The k-means labels that start the fits of ``k`` components (shared by the
    candidate structures), cached in ``starts``; on one thread, so that they do not
    depend on the machine's threads. The k-means runs on the distinct rows (missing
    entries read as 0), in lexicographic order, with their summed weights: the rows in
    any order, or a row of integer weight ``w`` in place of ``w`` copies of it, give the
    same labels (k-means++ drew other centres from the same rows otherwise: on wine the
    shuffled rows chose other margins and a tree 1.3 nats per row lower)."""
    if k > 1 and k not in starts:
        rows, inverse = np.unique(np.nan_to_num(Z) + 0.0, axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        if len(rows) <= k:  # every distinct row a cluster of its own
            starts[k] = inverse
            return
        weights = np.bincount(inverse, weights=sw, minlength=len(rows))
        # BLAS through the shared limit of the passes (a limit of this call's own, in
        # two fits in two threads at once, left BLAS on one thread for good)
        with single_threaded_blas(), threadpool_limits(limits=1, user_api="openmp"):
            labels = KMeans(k, n_init=1, random_state=seed).fit_predict(rows, sample_weight=weights)
        starts[k] = labels[inverse]


def _walk(est, structure, name, ks, cached, reference, Z, sw, starts, seed, offset):
    """The fits of one structure over the numbers of components ``ks``, in order, until
    two in a row do not improve its BIC: ``{k: fit}`` (``cached`` fits are not redone).
    With ``reference`` (the Chow-Liu tree's BIC per number of components) the walk also
    stops after two numbers in a row at which it scored below that tree."""
    n_eff = sw.sum()
    fits = {}
    behind = 0

    def evaluate(k):
        nonlocal behind
        if behind >= _PATIENCE:
            return None
        fit = cached.get(k)
        if fit is None:
            _kmeans_start(starts, Z, sw, k, seed)
            fit = est._fit_one(Z, sw, structure, k, starts)
            fit["bic"] = -2.0 * n_eff * fit["score"] + fit["n_params"] * np.log(n_eff) + offset
            fit["structure"] = name
        fits[k] = fit
        if reference and k in reference:
            behind = behind + 1 if fit["bic"] > reference[k] else 0
        return -fit["bic"]

    grow(ks, evaluate, patience=_PATIENCE)
    return fits


def _group_grid(name, grid, d, distinct, optional):
    """The components that a structure with multivariate leaves may use: each needs
    ``_ROWS_PER_GROUP_COLUMN`` distinct rows per column of its largest leaf, or its
    noise covariances are fitted to a handful of rows and held-out rows far from them
    get densities near zero (on one class of wine, 38 rows and 13 columns, two
    full-covariance components BIC chose gave a test row 135 nats of log-loss). With
    ``n_components`` given (``distinct`` is None) all of ``grid``; with the structure asked
    for by name (not ``optional``) at least one."""
    if name not in GROUPED_LEAF_STRUCTURES or distinct is None:
        return grid
    m = d if name == "full" else min(GROUP_SIZE, d)
    kept = [k for k in grid if k * _ROWS_PER_GROUP_COLUMN * m <= distinct]
    return kept or ([] if optional else list(grid)[:1])


def _is(value, name):
    return isinstance(value, str) and value == name
