"""The selection engine: one way to choose anything inside ``fit`` on held-out rows.

Every automatic choice of the estimators (structure, ``k'``, members, prior strength)
is made by the same few pieces:

* :func:`held_out_split` - one split of the rows into training and held-out parts, a
  function of the rows' values (a hash), so that the same rows give the same split
  whether they came through ``fit``, ``partial_fit`` or a Dask collection, in any order.
* :func:`race` - successive halving at equal effort (Jamieson & Talwalkar, "Non-stochastic
  Best Arm Identification and Hyperparameter Optimization", AISTATS 2016): every
  candidate gets a few EM iterations, the better half goes on with twice as many, and
  candidates are only ever compared after the same number of iterations.
* :func:`grow` - walk an ordered list of values (``k' = 1, 2, 3, 4, 8, ...``, members
  ``1, 2, 3``, pseudo-counts) while the held-out score improves: one stopping rule.
* :func:`best_key` - one tie rule: scores within :data:`TIE_TOL` nats per row of the best
  are ties, broken by a fixed order (fewer hidden states, then the order of the
  candidates), so that rounding (``n_jobs``, row order) never changes a choice.
* :func:`simplest_within_se` - the one-standard-error rule: the fewest hidden states
  whose held-out score is within the noise of the best (``k'`` among those the moments
  identify).

The functions take callables and return values (the scores of every candidate and the
choice); the estimators assign their fitted attributes from those values.
"""

from __future__ import annotations

import math
from numbers import Integral

import numpy as np

from .._engine.row_keys import holdout_weights

__all__ = [
    "TIE_TOL",
    "PATIENCE",
    "VALIDATION_SHARE",
    "HeldOutSplit",
    "NoHeldOutRows",
    "held_out_split",
    "best_key",
    "simplest_within_se",
    "within_se",
    "gains_beyond_se",
    "out_of_reach",
    "grow",
    "race",
    "paired_se",
]

#: held-out scores (nats per row) closer than this are a tie, broken by a fixed order
TIE_TOL = 1e-6
#: :func:`grow` stops after this many values in a row that do not improve the best score
PATIENCE = 2
#: share of the rows held out, and the largest numbers of training and held-out rows a
#: selection reads (a subsample, by the rows' hash keys, beyond that)
VALIDATION_SHARE = 0.2
#: the least total weight (rows) that a held-out split is made of
MIN_SPLIT_WEIGHT = 10
MAX_TRAIN_ROWS = 20_000
MAX_VALIDATION_ROWS = 5_000


class HeldOutSplit:
    """Training and held-out rows of a selection.

    Attributes
    ----------
    train, train_weights : ndarray
        Indices of the training rows (into the rows given to :func:`held_out_split`) and
        their weights.
    rows, weights : ndarray
        Indices and weights of the held-out rows.
    """

    def __init__(self, train, train_weights, rows, weights):
        self.train = train
        self.train_weights = train_weights
        self.rows = rows
        self.weights = weights

    def mean(self, values):
        """The weighted mean of per-row held-out values (log-likelihoods)."""
        return float(np.average(values, weights=self.weights))


def held_out_split(values, weights, random_state=None, share=VALIDATION_SHARE):
    """Split rows into training and held-out parts by a hash of their values.

    The weight of every row is split between the parts by
    :func:`~ltm_sklearn._engine.row_keys.holdout_weights` (a hash of the row and of its
    copies, seeded by an integer ``random_state``, else 0): a row of weight 3 is split as
    three copies are, and the split does not depend on the order or the source of the
    rows. At most :data:`MAX_VALIDATION_ROWS` distinct rows are held out and at most
    :data:`MAX_TRAIN_ROWS` train (those of the smallest keys).

    Parameters
    ----------
    values : ndarray of shape (n_features, n_rows)
        What is hashed (category codes, or the values of numeric columns).
    weights : ndarray of shape (n_rows,)
    random_state : int, RandomState instance or None
        Only an integer changes the split (a fixed split otherwise).
    share : float, default=VALIDATION_SHARE

    Returns
    -------
    HeldOutSplit or None
        ``None`` with a total weight under 10 rows, or when a part would be empty.
    """
    weights = np.asarray(weights, dtype=float)
    rows = np.flatnonzero(weights > 0)
    if weights[rows].sum() < MIN_SPLIT_WEIGHT:  # a weight counts as repeated rows
        return None
    seed = random_state if isinstance(random_state, Integral) else 0
    held, train_w, key = holdout_weights(values[:, rows], weights[rows], share, seed)
    order = np.argsort(key, kind="stable")
    val = np.sort(order[held[order] > 0][:MAX_VALIDATION_ROWS])
    train = np.sort(order[train_w[order] > 0][:MAX_TRAIN_ROWS])
    if val.size == 0 or train.size == 0:
        return None
    return HeldOutSplit(rows[train], train_w[train], rows[val], held[val])


class NoHeldOutRows(ValueError):
    """A choice by held-out rows could not make its split (too few rows, or a part
    drawn empty): the message says which and what to pass instead."""


def no_held_out_rows(what, total_weight, n_samples):
    """:class:`NoHeldOutRows` for the ``"auto"`` parameter ``what`` on ``n_samples`` rows
    of ``total_weight``."""
    if total_weight < MIN_SPLIT_WEIGHT:
        why = (
            f"needs at least {MIN_SPLIT_WEIGHT} rows (total weight), got n_samples="
            f"{n_samples} of total weight {total_weight:g}"
        )
    else:
        why = (
            f"on these {total_weight:g} rows (total weight) the held-out share, drawn from "
            "the rows' values, came out empty"
        )
    return NoHeldOutRows(f"{what}='auto' holds out rows to choose it and {why}; pass a number.")


def best_key(scores, order, tol=TIE_TOL):
    """The key of the best score; keys within ``tol`` of it are ties, and the tie goes
    to the smallest ``order(key)``.

    >>> best_key({"a": 1.0, "b": 1.0 + 1e-9, "c": 0.5}, order=["a", "b", "c"].index)
    'a'
    """
    high = max(scores.values())
    return min((key for key, s in scores.items() if s >= high - tol), key=order)


def simplest_within_se(scores, lls, weights, order):
    """The one-standard-error rule (Breiman, Friedman, Olshen & Stone, *Classification
    and Regression Trees*, Wadsworth 1984, section 3.4.3): of the keys whose held-out
    score is within one paired standard error of the best (:func:`paired_se` of their
    per-row log-likelihoods ``lls[key]`` on the held-out rows of weights ``weights``),
    the one of the smallest ``order(key)``.

    >>> lls = {"small": np.array([0.0, 1.0, 0.0, 1.0]), "large": np.array([0.1, 1.0, -0.05, 1.0])}
    >>> scores = {key: v.mean() for key, v in lls.items()}  # large: 0.0125 higher
    >>> simplest_within_se(scores, lls, np.ones(4), order=["small", "large"].index)
    'small'
    """
    best = best_key(scores, order)
    return min(within_se(best, scores, scores, lls, weights), key=order)


def within_se(reference, keys, scores, lls, weights, n_se=1.0):
    """The keys of ``keys`` whose held-out score is within ``n_se`` paired standard
    errors (at least :data:`TIE_TOL`) of the score of ``reference``, in the order of
    ``keys``.

    >>> lls = {"a": np.array([0.0, 1.0]), "b": np.array([0.05, 0.9]), "c": np.array([-9.0, -9.0])}
    >>> within_se("a", ["b", "c"], {k: v.mean() for k, v in lls.items()}, lls, np.ones(2))
    ['b']
    """
    high = scores[reference]
    return [
        key
        for key in keys
        if scores[key] >= high - max(TIE_TOL, n_se * paired_se(lls[reference], lls[key], weights))
    ]


def gains_beyond_se(key, reference, scores, lls, weights, n_se=1.0):
    """Whether the held-out score of ``key`` is above that of ``reference`` by more than
    ``n_se`` paired standard errors (at least :data:`TIE_TOL`): the complement of
    :func:`within_se` seen from ``key``.

    >>> lls = {"a": np.array([0.0, 1.0]), "b": np.array([0.05, 0.9]), "c": np.array([1.0, 2.0])}
    >>> scores, w = {k: v.mean() for k, v in lls.items()}, np.ones(2)
    >>> gains_beyond_se("a", "b", scores, lls, w), gains_beyond_se("c", "a", scores, lls, w)
    (False, True)
    """
    return not within_se(key, [reference], scores, lls, weights, n_se)


def out_of_reach(key, lead, gained, scores, lls, weights):
    """Whether the EM fit ``key`` trails ``lead`` beyond two paired standard errors and
    by more than ``gained``, what its last rung of EM iterations gained it: at that rate
    another rung as long would not close the gap, and EM's gains shrink, so it stops.

    >>> lls = {"a": np.array([0.0, 1.0]), "b": np.array([-2.0, -1.1])}
    >>> scores, w = {k: v.mean() for k, v in lls.items()}, np.ones(2)
    >>> out_of_reach("b", "a", 0.5, scores, lls, w), out_of_reach("b", "a", 3.0, scores, lls, w)
    (True, False)
    """
    behind = scores[lead] - scores[key]
    return bool(behind > gained) and gains_beyond_se(lead, key, scores, lls, weights, 2.0)


def grow(values, evaluate, patience=PATIENCE, tol=TIE_TOL, best=-np.inf):
    """Walk ``values`` in order while the held-out score improves.

    ``evaluate(value)`` returns the held-out score of a value, or ``None`` to stop
    before it (a budget). The walk stops after ``patience`` values in a row that do not
    improve the best score so far (initially ``best``) by more than ``tol``.

    Returns
    -------
    dict value -> score
        Every value evaluated, in order.

    >>> grow([1, 2, 3, 4, 5], lambda k: -abs(k - 2), patience=1)
    {1: -1, 2: 0, 3: -1}
    """
    scores, stale = {}, 0
    for value in values:
        score = evaluate(value)
        if score is None:
            break
        scores[value] = score
        if score > best + tol:
            best, stale = score, 0
        else:
            stale += 1
            if stale >= patience:
                break
    return scores


def race(candidates, advance, rungs, keep=None, batch=False):
    """Successive halving at equal effort.

    Every candidate is advanced to the first rung's effort (EM iterations, say) and
    scored; the better half (at least ``keep``) goes on to the next rung, and so on: two
    candidates are only ever compared at the same effort, and the effort goes to the
    candidates that lead. Once no more than ``keep`` are left (from the start, when
    there are no more than ``keep``), no rung would prune: they go to the final rung in
    one step, so that a batch holds all their work.

    Parameters
    ----------
    candidates : list
        Keys, in the order that breaks ties.
    advance : callable
        ``advance(key, effort, last) -> score``: bring the candidate to the cumulative
        ``effort`` and return its held-out score; ``last`` is true at the final rung
        (where the candidate may run to its own stopping rule).
    rungs : sequence of int
        Increasing cumulative efforts.
    keep : int, default=None
        Fewest candidates kept at a rung (default 1).
    batch : bool, default=False
        ``advance(keys, effort, last) -> scores`` (a list, in the order of ``keys``)
        brings all the candidates of a rung at once, so that they may run side by side.

    Returns
    -------
    scores : dict key -> float
        Each candidate's score at the last rung it reached.
    reached : dict key -> int
        The index of that rung.
    """
    alive = list(candidates)
    scores, reached = {}, {}
    keep = 1 if keep is None else max(1, int(keep))

    def run(keys, effort, last, r):
        if batch:
            values = advance(list(keys), effort, last)
        else:
            values = [advance(key, effort, last) for key in keys]
        for key, value in zip(keys, values):
            scores[key], reached[key] = value, r

    r = 0
    while True:
        if len(alive) <= keep:
            # no rung would prune: the candidates left run to the final rung at once
            r = len(rungs) - 1
        last = r == len(rungs) - 1
        run(alive, rungs[r], last, r)
        if last:
            break
        n_keep = max(keep, math.ceil(len(alive) / 2))
        ranked = sorted(alive, key=lambda k: (-round(scores[k] / TIE_TOL), candidates.index(k)))
        alive = [k for k in candidates if k in ranked[:n_keep]]
        r += 1
    return scores, reached


def paired_se(a, b, weights):
    """Standard error of the weighted mean of ``a - b`` (held-out log-likelihoods of two
    models on the same rows)."""
    d = np.asarray(a) - np.asarray(b)
    w = np.asarray(weights, dtype=float)
    mean = np.average(d, weights=w)
    var = np.average((d - mean) ** 2, weights=w)
    n_eff = w.sum() ** 2 / np.sum(w**2)
    return float(np.sqrt(var / max(n_eff, 1.0)))
