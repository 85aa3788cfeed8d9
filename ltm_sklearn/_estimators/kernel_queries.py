"""Conditional queries of :class:`~ltm_sklearn.KernelLatentTree`: means, variances and
category probabilities of one column given the others, by message passing on the
explicit bump model (the Gaussian form's model answers them exactly when it was chosen)."""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp
from sklearn.utils.validation import check_is_fitted

from .._algorithms.leaves import SCORE_BLOCK
from .._engine.inference import log_likelihood
from .kernel_forms import answered_by_gaussian_form

__all__ = ["KernelQueryMixin"]


class KernelQueryMixin:
    """``conditional_mean``, ``conditional_variance`` and ``conditional_proba`` of the
    kernel model (fitted ``tree_``, ``cpts_``, ``centers_``, the hooks ``_evidence`` and
    ``_encode``)."""

    @answered_by_gaussian_form
    def conditional_mean(self, X, target):
        """``E[X_target | observed entries of each row]`` under the fitted density.

        The target column of ``X`` is ignored; NaN entries of the other columns are
        marginalised out. In the discrete form ``int x p(x, x_rest) dx / int p(x, x_rest)
        dx`` is two message passes: the target leaf sends its centres (shifted to be
        positive) and then ones, since every bump integrates to one and has its centre as
        mean. The Gaussian form conditions exactly
        (:meth:`GaussianLatentTree.conditional_mean`).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        target : int or str
            Column index, or a feature name when fitted on a DataFrame.

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        return self._conditional_moments(X, target, variance=False)[0]

    @answered_by_gaussian_form
    def conditional_variance(self, X, target):
        """``Var[X_target | observed entries of each row]`` under the fitted density.

        As :meth:`conditional_mean`; in the discrete form one more message pass, the
        target leaf sending the second moments ``(c - s)^2 + h^2`` of its bumps (centre
        ``c`` shifted by ``s``, bandwidth ``h``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        target : int or str
            Column index, or a feature name when fitted on a DataFrame.

        Returns
        -------
        ndarray of shape (n_samples,)
            In the squared units of ``X``.
        """
        return self._conditional_moments(X, target, variance=True)[1]

    def _conditional_moments(self, X, target, variance):
        """``(conditional mean, conditional variance or None)`` of a continuous column."""
        check_is_fitted(self)
        j = self._target_index(target)
        if self.is_categorical_[j]:
            raise TypeError(
                f"Column {target!r} is categorical: use conditional_proba(X, target) for "
                "P(X_target = v | other columns)."
            )
        Z = self._encode(self._validate_X(X, reset=False)).X.copy()
        Z[:, j] = np.nan
        centres = self.centers_[j]
        shift = centres.min() - 1.0  # positive messages: E[x] = E[x - shift] + shift
        first = centres - shift
        mean, second = np.empty(Z.shape[0]), np.empty(Z.shape[0])
        for start in range(0, Z.shape[0], SCORE_BLOCK):
            ev = self._evidence(Z[start : start + SCORE_BLOCK])
            den = log_likelihood(self.tree_, self.root_marginal_, self.cpts_, ev)
            ev.vectors[j] = np.repeat(first[None, :], ev.n_rows, axis=0)
            num = log_likelihood(self.tree_, self.root_marginal_, self.cpts_, ev)
            mean[start : start + SCORE_BLOCK] = np.exp(num - den)
            if variance:
                moment = first**2 + self._leaves.widths[j] ** 2
                ev.vectors[j] = np.repeat(moment[None, :], ev.n_rows, axis=0)
                num = log_likelihood(self.tree_, self.root_marginal_, self.cpts_, ev)
                second[start : start + SCORE_BLOCK] = np.exp(num - den)
        scale = self.scale_[j]
        var = np.maximum(second - mean**2, 0.0) * scale**2 if variance else None
        return (mean + shift) * scale + self.center_[j], var

    def conditional_proba(self, X, target):
        """``P(X_target = v | observed entries of each row)`` for every category ``v`` of a
        categorical column.

        The target column of ``X`` is ignored; NaN entries of the other columns are
        marginalised out (continuous ones integrated, categorical ones summed).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        target : int or str
            A categorical column: index, or feature name when fitted on a DataFrame.

        Returns
        -------
        ndarray of shape (n_samples, len(categories_[target]))
            Columns follow ``categories_[target]``; rows sum to 1.
        """
        check_is_fitted(self)
        j = self._target_index(target)
        if not self.is_categorical_[j]:
            raise TypeError(
                f"Column {target!r} is continuous and has no categories: use "
                "conditional_mean(X, target) for E[X_target | other columns]."
            )
        Z = self._encode(self._validate_X(X, reset=False)).X.copy()
        Z[:, j] = np.nan
        n_cat = len(self.categories_[j])
        out = np.empty((Z.shape[0], n_cat))
        for start in range(0, Z.shape[0], SCORE_BLOCK):
            ev = self._evidence(Z[start : start + SCORE_BLOCK])
            logs = []
            for v in range(n_cat):
                ev.vectors[j] = np.zeros((ev.n_rows, n_cat))
                ev.vectors[j][:, v] = 1.0
                logs.append(log_likelihood(self.tree_, self.root_marginal_, self.cpts_, ev))
            logs = np.column_stack(logs)
            out[start : start + SCORE_BLOCK] = np.exp(logs - logsumexp(logs, axis=1, keepdims=True))
        return out
