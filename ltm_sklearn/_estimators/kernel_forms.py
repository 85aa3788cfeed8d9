"""The two forms of :class:`~ltm_sklearn.KernelLatentTree`'s hidden variables, as
composition.

``hidden="discrete"`` is the kernel model itself; ``hidden="gaussian"`` fits a
:class:`~ltm_sklearn.GaussianLatentTree` on the same columns and keeps it as
``gaussian_model_``; ``hidden="auto"`` fits both on the training rows of one held-out
split and keeps the better (:meth:`GaussianFormMixin._choose_form`). The public methods
that the Gaussian model answers are marked with :func:`answered_by_gaussian_form`: one
mechanism routes them, instead of a branch in each.
"""

from __future__ import annotations

import inspect
from functools import wraps

import numpy as np
import pandas as pd
from sklearn.base import clone
from sklearn.utils.validation import check_is_fitted, validate_data

from .._engine.mixed_columns import categorical_mask, warn_few_values
from .._engine.tree import LatentTree
from .._engine.user_warnings import collected_warnings
from .gaussian import GaussianLatentTree
from .selection import MIN_SPLIT_WEIGHT, TIE_TOL, NoHeldOutRows, held_out_split
from .sklearn_internals import available_if, check_sample_weight, safe_indexing
from .validation import as_fitted_frame, refuse_dask

__all__ = ["GaussianFormMixin", "answered_by_gaussian_form"]


def answered_by_gaussian_form(method):
    """Decorator: when the fit chose the Gaussian form, ``gaussian_model_`` answers the
    method of the same name, with ``X`` validated against this fit (as floats) and a
    ``target`` column given as its index; otherwise the method runs."""
    signature = inspect.signature(method)

    @wraps(method)
    def wrapper(self, *args, **kwargs):
        if not self._gaussian_form():
            return method(self, *args, **kwargs)
        arguments = signature.bind(self, *args, **kwargs).arguments
        arguments.pop("self")
        if "X" in arguments:
            arguments["X"] = self._gaussian_rows(arguments["X"])
        if "target" in arguments:
            arguments["target"] = self._target_index(arguments["target"])
        return getattr(self.gaussian_model_, method.__name__)(**arguments)

    return wrapper


def _has_discrete_hidden_states(est):
    """Whether the model has hidden states to give posteriors of: not once the fit chose
    the Gaussian form (before a fit the method is there, and says it is not fitted)."""
    return getattr(est, "hidden_", None) != "gaussian"


class GaussianFormMixin:
    """The choice of the form, the fit of the Gaussian one, and the public methods it
    answers, for :class:`~ltm_sklearn.KernelLatentTree` (parameters ``hidden``, ``tree``,
    ``max_iter``, ``tol``, ``n_jobs``, ``random_state``, ``verbose``, ``bandwidth``,
    ``bandwidth_scale``, ``categorical_features``); placed before the discrete model's
    classes, whose methods answer otherwise."""

    @answered_by_gaussian_form
    def score_samples(self, X):
        """Log-density of each row in the units of ``X`` (times the probability of the
        categorical entries); NaN entries are marginalised out exactly.

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        return super().score_samples(X)

    def _class_score_samples(self, X):
        """As :meth:`BaseLatentTree._class_score_samples`; the Gaussian form has no
        categories."""
        if self._gaussian_form():
            return self.score_samples(X)
        return super()._class_score_samples(X)

    @answered_by_gaussian_form
    def predict_proba(self, X):
        """Posterior of the root's states given each row: the root hidden variable of the
        discrete form (see :meth:`BaseLatentTree.predict_proba`), the discrete root (the
        component) of the Gaussian form.

        Returns
        -------
        ndarray of shape (n_samples, n_states)
            Rows sum to 1.
        """
        return super().predict_proba(X)

    @available_if(_has_discrete_hidden_states)
    def predict_hidden_proba(self, X):
        """Posterior ``P(h | x)`` of every hidden node of the discrete form (see
        :meth:`BaseLatentTree.predict_hidden_proba`). Not available once the fit chose the
        Gaussian form (``hidden_ == "gaussian"``: its hidden variables are continuous and
        have no states; ``conditional_mean`` answers for the columns, ``predict_proba``
        for the discrete root), as ``hasattr`` tells.

        Returns
        -------
        ndarray of shape (n_samples, n_hidden_nodes, n_states)
        """
        return super().predict_hidden_proba(X)

    def sample(self, n_samples=1, random_state=None):
        """Draw rows from the fitted model.

        Returns
        -------
        ndarray or DataFrame of shape (n_samples, n_features)
            In the units of ``X`` (an object array when there are categorical columns);
            a DataFrame with the fitted column names after a fit on a DataFrame.
        """
        if self._gaussian_form():  # the Gaussian form draws from its own model
            drawn = self.gaussian_model_.sample(n_samples, random_state)
            return as_fitted_frame(self, drawn)
        return super().sample(n_samples, random_state)

    def _shared_params(self):
        """Parameters that make per-class models of a classifier share this fit's tree,
        smoothing and column types (the Gaussian form: its form and tree)."""
        if self._gaussian_form():
            return {"hidden": "gaussian", "tree": self.tree_}
        return super()._shared_params()

    # ------------------------------------------------------------------ the choice

    def _choose_form(self, X, sample_weight):
        """``(form, held-out scores of the forms)``: :meth:`_fixed_form`, or with
        ``"auto"`` the better held-out log-likelihood (:meth:`_form_scores`; ties:
        discrete)."""
        form = self._fixed_form(X)
        if form is not None:
            return form, {}
        scores = self._form_scores(X, sample_weight)
        if scores is None:  # too few rows to hold any out
            return "discrete", {}
        better = scores["gaussian"] > scores["discrete"] + TIE_TOL
        return ("gaussian" if better else "discrete"), scores

    def _fixed_form(self, X):
        """The form of the hidden variables on ``X`` when no held-out choice is needed:
        ``hidden`` itself, or with ``"auto"`` the discrete form for a table with a
        categorical column, with ``max_iter=0`` (the moment estimate) or with a given
        ``bandwidth`` or ``bandwidth_scale`` (the kernel model asked for); ``None`` when
        ``"auto"`` has to choose."""
        categorical = np.flatnonzero(categorical_mask(X, self.categorical_features))
        if self.hidden == "gaussian" and categorical.size:
            names = [str(c) for c in X.columns[categorical]] if hasattr(X, "columns") else None
            raise ValueError(
                f"hidden='gaussian' models continuous columns only, but column(s) "
                f"{names or categorical.tolist()} are categorical: use hidden='discrete', or "
                "hidden='auto' (which keeps the discrete form on mixed tables)."
            )
        if self.hidden == "gaussian" and self.max_iter == 0:
            raise ValueError(
                "max_iter=0 keeps the moment estimate, which only the discrete form has "
                "(hidden='gaussian' fits by EM from k-means): use hidden='discrete', or "
                "hidden='auto' (which takes the discrete form with max_iter=0)."
            )
        if self.hidden != "auto":
            return self.hidden
        kernel_asked = self.bandwidth is not None or self.bandwidth_scale is not None
        if categorical.size or self.max_iter == 0 or kernel_asked:
            return "discrete"
        return None

    def _gaussian_estimator(self, tree=None):
        """The Gaussian form (unfitted): its own structure, components and margins chosen
        by BIC; ``tree`` when given, and the EM budget, jobs, seed and verbosity of this
        estimator."""
        return GaussianLatentTree(
            tree=tree,
            max_iter=self.max_iter,
            tol=self.tol,
            n_jobs=self.n_jobs,
            random_state=self.random_state,
            verbose=self.verbose,
        )

    def _fit_gaussian(self, X, sample_weight):
        """Fit the Gaussian form on ``X`` (continuous columns) into ``gaussian_model_``."""
        A = validate_data(self, X, reset=True, dtype=np.float64, ensure_all_finite="allow-nan")
        names = getattr(self, "feature_names_in_", None)
        names = None if names is None else [str(f) for f in names]
        tree = None
        if self.tree is not None:
            # the Gaussian form allows columns inside the tree (its Chow-Liu trees)
            tree = LatentTree.coerce(
                self.tree, A.shape[1], feature_names=names, observed_leaves_only=False
            )
        sample_weight = check_sample_weight(sample_weight, A, dtype=float, ensure_non_negative=True)
        warn_few_values(A, range(A.shape[1]), type(self).__name__, names, sample_weight, True)
        # said above in this estimator's terms
        with collected_warnings("ignore", message=".*distinct numbers in"):
            model = self._gaussian_estimator(tree).fit(A, sample_weight=sample_weight)
        self.gaussian_model_ = model
        self.tree_ = LatentTree(model.tree_.edges, A.shape[1], feature_names=names)
        self.structure_ = model.structure_
        self.is_categorical_ = np.zeros(A.shape[1], dtype=bool)
        self.categories_ = [None] * A.shape[1]

    def _form_scores(self, X, sample_weight):
        """``hidden="auto"``: held-out log-likelihood per row of the discrete and the
        Gaussian form, both fitted on the training part of the split of
        :func:`~ltm_sklearn._estimators.selection.held_out_split` on the rows' values
        (``None`` when the training part would weigh under ``MIN_SPLIT_WEIGHT`` rows,
        too few for the discrete form's own held-out choices, or with a column that is
        not numbers)."""
        try:
            A = validate_data(self, X, reset=True, dtype=np.float64, ensure_all_finite="allow-nan")
        except ValueError:
            return None  # not numbers: the discrete form's encoding says which column
        sample_weight = check_sample_weight(sample_weight, A, dtype=float, ensure_non_negative=True)
        split = held_out_split(A.T, sample_weight, self.random_state)
        # the discrete form's own choices on the training part hold out rows again
        if split is None or split.train_weights.sum() < MIN_SPLIT_WEIGHT:
            return None
        if len(split.train) < 2:  # one distinct row (however heavy): no form to compare
            return None
        X = X if isinstance(X, pd.DataFrame) else A  # DataFrames keep their names
        X_train, X_val = safe_indexing(X, split.train), safe_indexing(X, split.rows)
        w_train, w_val = split.train_weights, split.weights
        forms = {
            "discrete": clone(self).set_params(hidden="discrete"),
            "gaussian": clone(self).set_params(hidden="gaussian"),
        }
        scores = {}
        # the chosen form's fit on every row warns about what concerns the user
        with collected_warnings("ignore"):
            for form, model in forms.items():
                try:
                    model.fit(X_train, sample_weight=w_train)
                except NoHeldOutRows:  # the form's own choices: fitted on every row
                    return None
                scores[form] = float(np.average(model.score_samples(X_val), weights=w_val))
        return scores

    def _gaussian_form(self):
        check_is_fitted(self)
        return self.hidden_ == "gaussian"

    def _gaussian_rows(self, X):
        """``X`` validated against the fit, as floats (what ``gaussian_model_`` reads)."""
        refuse_dask(X, type(self).__name__)
        return validate_data(self, X, reset=False, dtype=np.float64, ensure_all_finite="allow-nan")
