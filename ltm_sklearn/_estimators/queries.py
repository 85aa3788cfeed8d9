"""The queries of a fitted discrete latent tree: conditionals, hidden posteriors, latent
classes and samples, all by message passing on the explicit model."""

from __future__ import annotations

from numbers import Integral

import numpy as np
import pandas as pd
from scipy.special import logsumexp
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from .._engine.inference import hidden_posteriors, sample_states
from .validation import as_fitted_frame, target_index

__all__ = ["QueryMixin"]


class QueryMixin:
    """``conditional_proba``, ``predict_hidden_proba``, ``predict_proba``, ``predict`` and
    ``sample`` over an estimator's fitted ``tree_``, ``root_marginal_`` and ``cpts_``, read
    through its hooks ``_validate_X``, ``_encode``, ``_evidence``, ``_log_likelihood`` and
    its leaf model ``_leaves``."""

    def conditional_proba(self, X, target):
        """``P(X_target = v | observed entries of each row)`` for every category ``v``.

        The target column of ``X`` is ignored; NaN entries of the other columns are
        marginalised out.

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
        if len(self.categories_[j]) == 0:
            raise ValueError(
                f"Column {target!r} had no observed value in the training rows: it has no "
                "categories to give the probabilities of."
            )
        codes = self._encode(self._validate_X(X, reset=False))
        logs = []
        for v in range(len(self.categories_[j])):
            filled = codes.copy()
            filled[j] = v
            logs.append(self._log_likelihood(filled))
        logs = np.column_stack(logs)
        return np.exp(logs - logsumexp(logs, axis=1, keepdims=True))

    def _target_index(self, target):
        return target_index(self, target)

    def predict_hidden_proba(self, X):
        """Posterior ``P(h | x)`` of every hidden node given each row.

        Returns
        -------
        ndarray of shape (n_samples, n_hidden_nodes, n_states)
            Hidden nodes in the order of ``tree_.hidden_nodes``; ``n_states`` is
            ``n_members_ * n_hidden_states_``. A node that kept fewer states
            (``hidden_state_counts_``, see ``min_state_rows``) fills its first columns
            and has zeros in the others.
        """
        check_is_fitted(self)
        ev = self._evidence(self._encode(self._validate_X(X, reset=False)))
        hidden = self.tree_.hidden_nodes
        out = np.zeros((ev.n_rows, len(hidden), self.n_members_ * self.n_hidden_states_))
        if not hidden:
            return out
        post = hidden_posteriors(self.tree_, self.root_marginal_, self.cpts_, ev, hidden)
        for t, h in enumerate(hidden):
            out[:, t, : post[h].shape[1]] = post[h]
        return out

    def predict_proba(self, X):
        """Posterior of the root hidden variable's states given each row.

        The latent class of a row, as :meth:`sklearn.mixture.GaussianMixture.predict_proba`
        gives the posterior of the mixture component: ``P(h_root = s | observed entries)``
        for the states of the root ``tree_.root`` (a
        hidden node at the centre of the tree); NaN entries are marginalised out. For
        every hidden node use :meth:`predict_hidden_proba`; to classify rows by per-class
        likelihoods use :class:`~ltm_sklearn.LatentTreeClassifier`.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_states)
            ``n_states`` is the root's number of states: ``n_members_ *
            n_hidden_states_``, or fewer where ``min_state_rows`` removed some
            (``hidden_state_counts_``); rows sum to 1. A tree without hidden
            nodes (e.g. ``structure_ == "chow_liu"``) has a single latent class: one
            column of ones.
        """
        check_is_fitted(self)
        codes = self._encode(self._validate_X(X, reset=False))
        root = self.tree_.root
        if root < self.tree_.n_observed:  # no hidden node: one latent class
            return np.ones((codes.shape[1], 1))  # codes are feature-major
        ev = self._evidence(codes)
        return hidden_posteriors(self.tree_, self.root_marginal_, self.cpts_, ev, [root])[root]

    def predict(self, X):
        """The most probable state of the root hidden variable for each row (the
        argmax of :meth:`predict_proba`: a latent class assignment).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,) of int
        """
        return np.argmax(self.predict_proba(X), axis=1)

    def sample(self, n_samples=1, random_state=None):
        """Draw rows from the fitted model.

        Returns
        -------
        ndarray or DataFrame of shape (n_samples, n_features)
            Values from ``categories_`` (object dtype when the columns hold non-numbers);
            a DataFrame with the fitted column names after a fit on a DataFrame.
        """
        check_is_fitted(self)
        if not isinstance(n_samples, (Integral, np.integer)) or n_samples < 1:
            raise ValueError(f"n_samples must be a positive integer, got {n_samples!r}.")
        tree = self.tree_
        rng = check_random_state(random_state)
        states = sample_states(tree, self.root_marginal_, self.cpts_, int(n_samples), rng)
        codes = states[: tree.n_observed].T.copy()
        drawn = as_fitted_frame(self, self._leaves.decode(codes, random_state))
        if isinstance(drawn, pd.DataFrame):
            drawn = self._leaves.restore_dtypes(drawn)
        return drawn
