"""Explicit leaf densities of the continuous latent tree model (pure functions).

A continuous column ``u`` is modelled, given the state ``h`` of its parent, by a mixture of
Gaussian bumps at fixed centres ``c_1..c_M`` (quantiles of the column, plus one wide bump
for the tails) with fixed bandwidths ``b_m``:

    p(x | h) = sum_m W[h, m] N(x; c_m, b_m^2),       W[h, :] on the simplex.

The bump index ``m`` behaves as a categorical leaf observed through *soft evidence*
``e_m(x) = N(x; c_m, b_m^2)``, so the message passing and EM of the discrete estimators serve
the continuous model unchanged (:class:`~ltm_sklearn._engine.evidence.DenseEvidence`): every
conditional density integrates to one, the joint density is normalised, a missing entry
sends ``e = 1`` (the integral of every bump), and ``E[x | h] = sum_m W[h, m] c_m``.

A categorical column of a mixed table is the same leaf with indicator evidence
(:func:`code_evidence`): its states are its categories and ``W[h, :]`` is ``P(x | h)``.
"""

from __future__ import annotations

import numpy as np
from sklearn.utils import check_random_state

from .._engine.row_keys import holdout_weights

__all__ = [
    "bump_evidence",
    "code_evidence",
    "nearest_centre",
    "mixture_weights",
    "select_bandwidth",
]

_LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)
#: the largest distance, in bandwidths, that a bump density reads as it is
_BANDWIDTHS_LIMIT = 1e100


def bump_evidence(x, centres, bandwidth):
    """Bump densities ``N(x_r; c_m, b_m^2)`` of every value, scaled per row.

    ``bandwidth`` is one value or one per centre.

    Returns
    -------
    E : ndarray of shape (len(x), M)
        The densities divided by their largest entry in the row (so a value far from every
        centre does not underflow); a NaN value gives a row of ones (every bump integrates
        to one).
    log_scale : ndarray of shape (len(x),)
        The log of the divisor (0 for NaN): ``log N(x_r; c_m, b^2) = log E + log_scale``.

    Examples
    --------
    >>> import numpy as np
    >>> E, log_scale = bump_evidence(np.array([0.0, np.nan]), np.array([0.0, 1.0]), 1.0)
    >>> np.round(E * np.exp(log_scale)[:, None], 4).tolist()
    [[0.3989, 0.242], [1.0, 1.0]]
    """
    x = np.asarray(x, dtype=float)
    b = np.broadcast_to(np.asarray(bandwidth, dtype=float), np.shape(centres))
    z = (np.nan_to_num(x)[:, None] - np.asarray(centres)[None, :]) / b[None, :]
    # beyond 1e100 bandwidths a bump's density is below exp(-1e199) either way; z * z
    # would overflow from about 1e154, and every bump of the row with it (-inf - -inf)
    np.clip(z, -_BANDWIDTHS_LIMIT, _BANDWIDTHS_LIMIT, out=z)
    logd = -0.5 * z * z - np.log(b)[None, :]
    top = logd.max(axis=1)
    E = np.exp(logd - top[:, None])
    log_scale = top - _LOG_SQRT_2PI
    missing = np.isnan(x)
    E[missing] = 1.0
    log_scale[missing] = 0.0
    return E, log_scale


def code_evidence(codes, n_categories, unseen_proba=0.0):
    """Indicator evidence of category codes (the leaf of a categorical column).

    Parameters
    ----------
    codes : ndarray of shape (n,)
        ``0..n_categories-1`` as floats; NaN (or ``-1``) for a missing entry, ``-2`` for a
        category not seen in training.
    n_categories : int
    unseen_proba : float, default=0.0
        Likelihood of an unseen category given any state of the parent.

    Returns
    -------
    ndarray of shape (n, n_categories)
        ``e_x`` for a code ``x``, ones for a missing entry, ``unseen_proba`` everywhere for
        an unseen category.

    Examples
    --------
    >>> import numpy as np
    >>> code_evidence(np.array([1.0, np.nan, -2.0]), 2, 0.25).tolist()
    [[0.0, 1.0], [1.0, 1.0], [0.25, 0.25]]
    """
    codes = np.asarray(codes, dtype=float)
    c = np.nan_to_num(codes, nan=-1.0)
    E = (c[:, None] == np.arange(n_categories)[None, :]).astype(float)
    E[c == -1] = 1.0
    E[c == -2] = unseen_proba
    return E


def nearest_centre(x, centres):
    """Index of the nearest centre of every value (``-1`` for NaN); ``centres`` sorted."""
    x = np.asarray(x, dtype=float)
    centres = np.asarray(centres, dtype=float)
    if centres.size == 1:
        return np.where(np.isnan(x), -1, 0)
    cuts = 0.5 * (centres[1:] + centres[:-1])
    codes = np.searchsorted(cuts, np.nan_to_num(x))
    return np.where(np.isnan(x), -1, codes)


def mixture_weights(E, weights, n_iter=100, tol=1e-6, alpha=0.0):
    """EM for the weights of a one-dimensional mixture with fixed components.

    Parameters
    ----------
    E : ndarray of shape (n, M)
        Component densities of every value, up to a factor per row (:func:`bump_evidence`).
    weights : ndarray of shape (n,)
    alpha : float
        Dirichlet pseudo-count per component.

    Returns
    -------
    ndarray of shape (M,)
        Mixture weights on the simplex.
    """
    M = E.shape[1]
    pi = np.full(M, 1.0 / M)
    total = float(np.sum(weights))
    last = -np.inf
    for _ in range(n_iter):
        dens = E @ pi
        ok = dens > 0
        resp = (weights * ok / np.where(ok, dens, 1.0)) @ E * pi
        pi = (resp + alpha) / (resp.sum() + alpha * M)
        value = float(weights[ok] @ np.log(dens[ok])) / total
        if value - last < tol:
            break
        last = value
    return pi


def select_bandwidth(x, weights, centres, candidates, random_state, wide=None, max_rows=3000):
    """Bandwidth of a column's bumps by held-out likelihood of its marginal mixture.

    ``wide``: bandwidth of an extra last component (centred at ``centres[-1]``) that keeps
    its own width whatever the candidate.

    The observed values, identical ones pooled (at most ``max_rows`` distinct values, a
    subsample keyed on the values), have their weights split 80/20 by
    :func:`~ltm_sklearn._engine.row_keys.holdout_weights`; for every candidate the
    mixture weights are fitted on the 80% (:func:`mixture_weights`) and the candidate
    with the highest mean log-density on the other 20% wins. The split and the subsample
    are functions of the values and their weights: an integer weight and as many
    repeated rows, or the rows in any order, give the same choice.

    Returns
    -------
    bandwidth : float
    scores : dict candidate -> held-out mean log-density
    """
    rng = check_random_state(random_state)
    seeds = rng.randint(0, 2**31 - 1, size=2)
    x = np.asarray(x, dtype=float)
    weights = np.asarray(weights, dtype=float)
    obs = np.flatnonzero(~np.isnan(x) & (weights > 0))
    candidates = [float(c) for c in candidates]
    # keyed on each value's rank among the column's distinct values: standardised
    # values may differ in their last bit between two fits of the same rows (a weighted
    # mean against a mean over repeated rows), their order does not
    values = np.unique(x[obs], return_inverse=True)[1].reshape(1, -1)
    w = weights[obs]
    _, pooled, key = holdout_weights(values, w, 0.0, seed=int(seeds[0]))
    groups = np.flatnonzero(pooled > 0)  # each distinct value's first row, its pooled weight
    if groups.size > max_rows:
        groups = groups[np.argsort(key[groups], kind="stable")[:max_rows]]
    if pooled.sum() < 10:
        return candidates[len(candidates) // 2], {}
    held, train, _ = holdout_weights(values[:, groups], pooled[groups], 0.2, seed=int(seeds[1]))
    if held.sum() <= 0 or train.sum() <= 0:
        return candidates[len(candidates) // 2], {}
    fit_rows, val_rows = np.flatnonzero(train > 0), np.flatnonzero(held > 0)
    v = x[obs][groups]
    scores = {}
    for b in candidates:
        widths = np.full(len(centres), b)
        if wide is not None:
            widths[-1] = wide
        E, log_scale = bump_evidence(v, centres, widths)
        pi = mixture_weights(E[fit_rows], train[fit_rows], alpha=1e-3)
        with np.errstate(divide="ignore"):
            logp = np.log(E[val_rows] @ pi) + log_scale[val_rows]
        scores[b] = float(np.average(logp, weights=held[val_rows]))
    best = max(candidates, key=lambda b: scores[b])
    return best, scores
