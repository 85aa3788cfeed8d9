"""Shared machinery of the latent tree estimators.

:class:`BaseLatentTree` owns validation, categorical encoding, the tree specification,
the supervised per-class wrapper and every public method (``fit``, ``score_samples``,
``score``, ``predict_proba``, ``predict``, ``conditional_proba``); subclasses fill two hooks:

* ``_fit_component(tree, moments, unseen_proba)`` -> fitted parameters of one model;
* ``_component_log_abs(params, codes)`` -> ``(sign, log |P_hat(x)|)`` per row.

The data side has hooks too, with categorical defaults that a continuous estimator
replaces (:mod:`ltm_sklearn._kernel`): ``_fit_encoding`` / ``_encode`` (data -> the
encoding the moments and the scoring read), ``_moments`` (the moment object of one
weighting of the rows), ``_floor_model`` / ``_log_floor`` (the independence model of the
floor below).

Policy for non-positive estimates
---------------------------------
Moment-based estimates ``P_hat(x)`` can be zero or negative. ``score_samples`` returns
``log max(P_hat(x), FLOOR_RATIO * P_ind(x))`` where ``P_ind`` is the smoothed
independence model (product of the smoothed column marginals over the observed entries)
and ``FLOOR_RATIO = 1e-3``. The number of rows the floor touched in the last call to
``score_samples`` is stored in ``n_floored_``. The result is never NaN or +inf.
"""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from dataclasses import dataclass
from numbers import Integral

import numpy as np
from scipy.special import logsumexp
from sklearn.base import BaseEstimator, DensityMixin, _fit_context
from sklearn.utils import ClassifierTags
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import (
    _check_sample_weight,
    check_is_fitted,
    column_or_1d,
    validate_data,
)

from .moments import MISSING, CategoricalEncoder, MomentEstimator
from .structure import STRUCTURE_METHODS, learn_tree, learn_tree_quartets, spectral_distance
from .tree import LatentTree

FLOOR_RATIO = 1e-3


@dataclass
class _Component:
    """One fitted model (the whole data, or one class)."""

    params: object
    floor: object  # independence model of the floor (categorical: per column log smoothed
    # P(X_j = v), then 0 (missing) and log eps (unseen))


class BaseLatentTree(DensityMixin, BaseEstimator, metaclass=ABCMeta):
    """Base class of the latent tree estimators (see the module docstring)."""

    _parameter_constraints: dict = {
        "n_hidden_states": [Interval(Integral, 1, None, closed="left")],
        "tree": "no_validation",  # LatentTree, edge list, Newick string or networkx graph
        "structure": [StrOptions(set(STRUCTURE_METHODS))],
        "n_jobs": [None, Integral],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        n_hidden_states=2,
        *,
        tree=None,
        structure="nj",
        n_jobs=None,
        random_state=None,
        verbose=0,
    ):
        self.n_hidden_states = n_hidden_states
        self.tree = tree
        self.structure = structure
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    #: fit on ``tree_.with_observed_leaves()`` (False: the estimator handles observed
    #: internal nodes itself)
    _fit_on_observed_leaves = True

    # ------------------------------------------------------------------ hooks
    @abstractmethod
    def _fit_component(self, tree, moments, unseen_proba):
        """Fit the parameters of one model from its moments."""

    @abstractmethod
    def _component_log_abs(self, params, codes):
        """Return ``(sign, log |P_hat(x)|)`` for codes of shape ``(n_features, N)``."""

    # ------------------------------------------------------------------ validation
    def _validate_X(self, X, reset):
        return validate_data(
            self,
            X,
            reset=reset,
            dtype=None,
            ensure_all_finite="allow-nan",
            ensure_min_samples=1,
        )

    def _fit_encoding(self, X, sample_weight):
        """Learn the per-column encoding (categories) and return the encoded data."""
        self._encoder = CategoricalEncoder()
        codes = self._encoder.fit_transform(X)
        self.categories_ = self._encoder.categories_
        n_states = self._encoder.n_states_
        if self.n_hidden_states > n_states.max():
            raise ValueError(
                f"n_hidden_states={self.n_hidden_states} exceeds the number of categories of "
                f"every column (at most {n_states.max()}): the hidden variables cannot have "
                "more states than the observed variables."
            )
        return codes

    def _encode(self, X):
        return self._encoder.transform(X)

    def _moments(self, data, sample_weight):
        """The moment object of ``data`` under one weighting of the rows."""
        return MomentEstimator(data, self._encoder.n_states_, sample_weight, n_jobs=self.n_jobs)

    def _floor_model(self, moments):
        """Smoothed column marginals (one pseudo-count over the categories + "unseen") and
        the likelihood of an unseen category per column."""
        log_marginals, unseen = [], []
        for counts, total in moments.singleton_counts():
            alpha = 1.0 / (counts.size + 1)
            denom = total + 1.0
            eps = alpha / denom
            log_marginals.append(np.log(np.concatenate([(counts + alpha) / denom, [1.0, eps]])))
            unseen.append(eps)
        return log_marginals, np.asarray(unseen)

    def _log_floor(self, floor, codes):
        """Log-likelihood of every row under the independence model of the floor."""
        return _independence_log_likelihood(floor, codes)

    def _resolve_tree(self, moments, n_features, n_samples):
        names = getattr(self, "feature_names_in_", None)
        names = None if names is None else [str(f) for f in names]
        tree = self._build_tree(moments, n_features, n_samples, names)
        root = tree.root if tree.is_hidden(tree.root) else None
        return LatentTree(tree.edges, n_features, root=root, feature_names=names)

    def _build_tree(self, moments, n_features, n_samples, names):
        """The given tree, or one learned with ``structure`` (hook for subclasses)."""
        if self.tree is not None:
            return LatentTree.coerce(
                self.tree, n_features, feature_names=names, observed_leaves_only=False
            )
        if self.structure == "star":
            return LatentTree.star(n_features)
        if self.structure == "quartet":
            return learn_tree_quartets(moments, self.n_hidden_states)[0]
        D = spectral_distance(moments, self.n_hidden_states)
        return learn_tree(D, self.structure, n_samples=n_samples)

    # ------------------------------------------------------------------ fit
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, sample_weight=None):
        """Fit the latent tree model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Categorical data: ints, strings, whole-number floats or pandas categoricals;
            NaN/None marks a missing entry.
        y : array-like of shape (n_samples,), default=None
            Class labels. When given, one latent tree model is fitted per class (on the
            same tree) together with the class prior, and ``predict_proba``/``predict``
            classify by per-class likelihoods.
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        self
        """
        X = self._validate_X(X, reset=True)
        n_samples, n_features = X.shape
        if n_samples < 2:
            raise ValueError(
                f"{type(self).__name__} estimates moments from data and needs at least 2 "
                f"samples; got {n_samples} sample."
            )
        if y is not None:
            y = column_or_1d(y, warn=True)
            if y.shape[0] != n_samples:
                raise ValueError(
                    f"X has {n_samples} rows but y has {y.shape[0]} labels: they must match."
                )
            check_classification_targets(y)
        sample_weight = _check_sample_weight(sample_weight, X, dtype=float)
        if np.any(sample_weight < 0):
            raise ValueError("sample_weight must be non-negative.")
        if sample_weight.sum() <= 0:
            raise ValueError("sample_weight sums to zero: there is nothing to fit.")

        data = self._fit_encoding(X, sample_weight)
        pooled = self._moments(data, sample_weight)
        self.tree_ = self._resolve_tree(pooled, n_features, n_samples)

        # observed internal nodes become leaves under hidden copies (see LatentTree)
        fit_tree = self.tree_.with_observed_leaves() if self._fit_on_observed_leaves else self.tree_
        if y is None:
            self.components_ = [self._fit_one(fit_tree, pooled)]
            for attr in ("classes_", "class_prior_"):
                if hasattr(self, attr):
                    delattr(self, attr)
        else:
            self.classes_, y_idx = np.unique(y, return_inverse=True)
            weights = np.array([sample_weight[y_idx == c].sum() for c in range(len(self.classes_))])
            self.class_prior_ = weights / weights.sum()
            self.components_ = [
                self._fit_one(
                    fit_tree, self._moments(data, np.where(y_idx == c, sample_weight, 0.0))
                )
                for c in range(len(self.classes_))
            ]
        self._after_fit()
        return self

    def _after_fit(self):
        """Hook: set estimator-specific fitted attributes from ``components_``."""

    def _fit_one(self, tree, moments):
        floor, unseen = self._floor_model(moments)
        params = self._fit_component(tree, moments, unseen)
        return _Component(params=params, floor=floor)

    # ------------------------------------------------------------------ scoring
    def _component_log_likelihood(self, comp, codes):
        """Floored ``log P_hat(x)`` of one component and the number of floored rows."""
        sign, logabs = self._component_log_abs(comp.params, codes)
        log_floor = np.log(FLOOR_RATIO) + self._log_floor(comp.floor, codes)
        keep = (sign > 0) & np.isfinite(logabs) & (logabs >= log_floor)
        return np.where(keep, logabs, log_floor), int(np.sum(~keep))

    def _class_log_likelihoods(self, codes):
        """``(N, n_components)`` log-likelihoods and the number of floored entries."""
        out, floored = [], 0
        for comp in self.components_:
            ll, nf = self._component_log_likelihood(comp, codes)
            out.append(ll)
            floored += nf
        return np.column_stack(out), floored

    def _log_density(self, codes):
        ll, floored = self._class_log_likelihoods(codes)
        if not self._is_supervised():
            return ll[:, 0], floored
        with np.errstate(divide="ignore"):
            log_prior = np.log(self.class_prior_)
        return logsumexp(ll + log_prior, axis=1), floored

    def _is_supervised(self):
        return hasattr(self, "classes_")

    def score_samples(self, X):
        """Log-likelihood ``log p(x)`` of each row; NaN entries are marginalised out.

        In supervised mode this is the mixture ``log sum_c P(c) p(x | c)``. See the module
        docstring for the floor applied to non-positive estimates; ``n_floored_`` holds the
        number of rows it touched.

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        codes = self._encode(self._validate_X(X, reset=False))
        logp, floored = self._log_density(codes)
        self.n_floored_ = floored
        return logp

    def score(self, X, y=None, sample_weight=None):
        """Mean log-likelihood: ``log p(x)``, or ``log P(y) + log p(x | y)`` when the model
        was fitted with labels and ``y`` is given (the density convention of scikit-learn,
        so ``GridSearchCV`` selects ``n_hidden_states`` by held-out likelihood).
        """
        check_is_fitted(self)
        if y is None or not self._is_supervised():
            values = self.score_samples(X)
        else:
            codes = self._encode(self._validate_X(X, reset=False))
            y = column_or_1d(y)
            index = {c: i for i, c in enumerate(self.classes_)}
            unknown = [v for v in np.unique(y) if v not in index]
            if unknown:
                raise ValueError(f"y holds labels {unknown[:5]} not seen in fit.")
            y_idx = np.array([index[v] for v in y])
            ll, self.n_floored_ = self._class_log_likelihoods(codes)
            with np.errstate(divide="ignore"):
                values = np.log(self.class_prior_[y_idx]) + ll[np.arange(len(y_idx)), y_idx]
        return float(np.average(values, weights=sample_weight))

    # ------------------------------------------------------------------ classification
    def _check_supervised(self, method):
        check_is_fitted(self)
        if not self._is_supervised():
            raise ValueError(
                f"{method} needs class labels: this model was fitted without y. Fit with "
                "fit(X, y) to get one latent tree per class and class posteriors."
            )

    def predict_log_proba(self, X):
        """Log class posteriors ``log P(c | x)``; needs a model fitted with ``y``."""
        self._check_supervised("predict_log_proba")
        codes = self._encode(self._validate_X(X, reset=False))
        ll, _ = self._class_log_likelihoods(codes)
        with np.errstate(divide="ignore"):
            joint = ll + np.log(self.class_prior_)
        return joint - logsumexp(joint, axis=1, keepdims=True)

    def predict_proba(self, X):
        """Class posteriors ``P(c | x)`` by per-class likelihoods; rows sum to 1."""
        return np.exp(self.predict_log_proba(X))

    def predict(self, X):
        """Most probable class of each row."""
        log_proba = self.predict_log_proba(X)
        return self.classes_[np.argmax(log_proba, axis=1)]

    # ------------------------------------------------------------------ queries
    def conditional_proba(self, X, target):
        """``P(X_target = v | observed entries of each row)`` for every category ``v``.

        The target column of ``X`` is ignored; NaN entries of the other columns are
        marginalised out. Computed as the normalised ``exp(score_samples)`` of each row
        completed with every category of the target, so it follows the same floor policy.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        target : int or str
            Column index, or a feature name when fitted on a DataFrame.

        Returns
        -------
        ndarray of shape (n_samples, len(categories_[target]))
            Columns follow ``categories_[target]``; rows sum to 1.
        """
        check_is_fitted(self)
        j = self._target_index(target)
        codes = self._encode(self._validate_X(X, reset=False))
        logs = []
        for v in range(len(self.categories_[j])):
            filled = codes.copy()
            filled[j] = v
            logs.append(self._log_density(filled)[0])
        logs = np.column_stack(logs)
        return np.exp(logs - logsumexp(logs, axis=1, keepdims=True))

    def _target_index(self, target):
        names = getattr(self, "feature_names_in_", None)
        if isinstance(target, str):
            if names is None or target not in list(names):
                raise ValueError(f"Unknown target column {target!r}.")
            return int(list(names).index(target))
        if not isinstance(target, (Integral, np.integer)) or not 0 <= target < self.n_features_in_:
            raise ValueError(
                f"target must be a column index in [0, {self.n_features_in_}) or a feature "
                f"name, got {target!r}."
            )
        return int(target)

    # ------------------------------------------------------------------ tags
    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # A classifier when fitted with y (per-class likelihoods); score stays a likelihood.
        tags.estimator_type = "classifier"
        tags.classifier_tags = ClassifierTags()
        tags.target_tags.required = False
        tags.input_tags.allow_nan = True
        tags.input_tags.categorical = True
        return tags


def _independence_log_likelihood(log_marginals, codes):
    out = np.zeros(codes.shape[1])
    for j, table in enumerate(log_marginals):
        c = codes[j].astype(np.int64)
        n = table.size - 2
        idx = np.where(c >= 0, c, np.where(c == MISSING, n, n + 1))
        out += table[idx]
    return out


__all__ = ["BaseLatentTree", "FLOOR_RATIO"]
