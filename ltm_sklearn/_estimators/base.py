"""Shared machinery of the discrete latent tree estimators.

:class:`BaseLatentTree` owns validation, categorical encoding, the tree (given, learned or
selected), EM polishing and every public method (``fit``, ``score_samples``, ``score``,
``conditional_proba``, ``predict_hidden_proba``, ``sample``); a subclass fills one hook:

* ``_initial_parameters(tree, moments, random_state)`` -> ``(root_marginal, cpts,
  extras)``: an explicit starting point on ``tree`` recovered from the moments (the
  estimator's own algorithm), and anything it wants to keep (``extras``, e.g. the raw
  observable representation of the spectral algorithm).

The model
---------
Every estimator is a latent tree model with explicit conditional probability tables
(``root_marginal_`` and ``cpts_`` on ``tree_``): hidden nodes have ``n_hidden_states``
states, observed nodes - leaves or internal - their categories. ``score_samples`` is the
exact log-likelihood of this normalised distribution, computed by message passing
(:mod:`ltm_sklearn._engine.inference`); over all configurations of the categories
``exp(score_samples)`` sums to one. No floor, no absolute value.

* Moments to start, likelihood to finish: the starting point is polished by up to
  ``max_iter`` EM iterations (:func:`~ltm_sklearn._algorithms.em.fit_em`, identical rows merged),
  maximising the likelihood plus a symmetric Dirichlet prior: every table entry gets the
  pseudo-count ``alpha`` (additive smoothing, as in ``CategoricalNB``), so no entry is zero
  and categories rare in training keep a sensible probability. ``max_iter=0`` keeps the
  moment estimate.
* A category never seen in training (at score time) lies outside the model's support; it
  is scored with the constant likelihood ``unseen_proba_[j] = 1 / (n_j + W_j + 1)`` (the
  add-one probability of a new category, ``n_j`` categories, ``W_j`` the training weight
  observing column ``j``), the same for every state of its parent - never an exception,
  never NaN.
* A missing entry (NaN/None) is marginalised out exactly.
"""

from __future__ import annotations

import warnings
from abc import ABCMeta
from numbers import Integral, Real

import numpy as np
import pandas as pd
from scipy.special import logsumexp
from sklearn.base import BaseEstimator, DensityMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from .._algorithms.em import (
    can_average_members,
    fit_em,
    node_states,
    polish,
    random_cpts,
)
from .._algorithms.structure import (
    STRUCTURE_METHODS,
    chow_liu,
    grouped_chow_liu,
    hidden_chow_liu,
    learn_tree,
    learn_tree_quartets,
    mutual_information,
    spectral_distance,
)
from .._algorithms.structure.learn import DISTANCE_METHODS
from .._algorithms.tensor import expand_states, tensor_cpts
from .._engine.encoding import CategoricalEncoder, declared_categories
from .._engine.inference import CodeEvidence, hidden_posteriors, log_likelihood, sample_states
from .._engine.moments import MomentEstimator
from .._engine.tree import LatentTree, attach_columns
from .._sources.distributed import dask_moments
from .._sources.streaming import RowStatistics
from .auto_fit import select_model
from .fits import DEFAULT_ALPHA, TABLE_MEMORY, FittedModel, ModelChoice, average_fits, moment_states
from .selection import held_out_split
from .sklearn_internals import Interval, StrOptions, check_sample_weight, fit_context

__all__ = ["BaseLatentTree", "FittedModel", "ModelChoice", "AUTO_CANDIDATES"]

#: candidate structures compared by ``structure="auto"``, in the order that breaks ties
#: (held-out scores within ``TIE_TOL``)
AUTO_CANDIDATES = ("me", "clnj", "hclt", "grouped_hclt", "chow_liu", "star")
#: structures whose tree does not depend on ``k'`` (learned once per selection)
_K_FREE_STRUCTURES = ("given", "chow_liu", "hclt", "grouped_hclt", "star")
#: ``n_hidden_states="auto"``: the ``k'`` tried, grown while the held-out likelihood improves
AUTO_HIDDEN_STATES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)
#: most entries of a table between two hidden nodes per row of data (``k'^2`` against
#: the rows): admits k' = 128 on 15,000 rows and refuses k' = 1,000 on 3,000 rows
_ENTRIES_PER_ROW = 10
#: from this many hidden states on, EM's messages are float32 (2x faster; the held-out
#: likelihood moves by under 1e-6 nats per row, see the user guide)
_FLOAT32_STATES = 16
#: relative perturbation of the copied states when a start has fewer hidden states than k'
_EXPAND_NOISE = 0.05
#: EM iterations on every row after a selection that trained on most of them: the
#: selection's fits stopped at their held-out optimum on fewer rows, and all the rows move
#: it on (test log-likelihood per row after 10 / 40 / 300 iterations: jester -52.270 /
#: -52.251 / -52.244, the last costing 4x the refit time; digits demo -27.568 / -27.536)
_REFIT_MAX_ITER = 40


#: private state of a fit, beside its public attributes (names with a trailing underscore)
_PRIVATE_FIT_STATE = (
    "_encoder",
    "_columns",
    "_leaf_widths",
    "_stream",
    "_stream_declared",
    "_stream_stale",
)
#: what partial_fit rebuilds from its statistics (when first read after a call)
_STREAM_BUILT = (
    "_encoder",
    "categories_",
    "unseen_proba_",
    "tree_",
    "structure_",
    "structure_scores_",
    "n_hidden_states_",
    "n_hidden_states_scores_",
    "alpha_",
    "alpha_scores_",
    "n_members_",
    "n_members_scores_",
    "root_marginal_",
    "cpts_",
    "lower_bound_",
    "n_iter_",
    "converged_",
    "raw_estimate_",
)


def reset_fitted_state(est, names=None):
    """Forget what an earlier fit set: the one way the estimators do it.

    ``names=None`` removes every fitted attribute (a public name with a trailing
    underscore) and the private state of a fit (:data:`_PRIVATE_FIT_STATE`), so that
    nothing of an earlier fit - a raw estimate, selection scores, the other form of a
    kernel model - outlives a new one; ``names`` removes those only (what
    ``partial_fit`` rebuilds)."""
    if names is None:
        names = [
            n
            for n in vars(est)
            if (n.endswith("_") and not n.startswith("_")) or n in _PRIVATE_FIT_STATE
        ]
    for name in names:
        est.__dict__.pop(name, None)


def is_dask_collection(X):
    """Whether ``X`` is a Dask array or DataFrame (without importing Dask)."""
    return type(X).__module__.split(".")[0] == "dask" and hasattr(X, "to_delayed")


def target_index(estimator, target):
    """Index of the column ``target`` (an index, or a feature name seen in ``fit``)."""
    names = getattr(estimator, "feature_names_in_", None)
    n_features = estimator.n_features_in_
    if isinstance(target, str):
        if names is None or target not in list(names):
            raise ValueError(f"Unknown target column {target!r}.")
        return int(list(names).index(target))
    if not isinstance(target, (Integral, np.integer)) or not 0 <= target < n_features:
        raise ValueError(
            f"target must be a column index in [0, {n_features}) or a feature name, got {target!r}."
        )
    return int(target)


def check_frame_dtypes(X, allowed, estimator):
    """Reject DataFrame columns whose dtype the estimator cannot read, naming them."""
    if not isinstance(X, pd.DataFrame):
        return
    for name, dtype in X.dtypes.items():
        kind = getattr(dtype, "kind", "O")
        if kind not in allowed:
            raise TypeError(
                f"{estimator} cannot read column {name!r} of dtype {dtype}: convert it first "
                "(e.g. dates to numbers or categories)."
            )


class BaseLatentTree(DensityMixin, BaseEstimator, metaclass=ABCMeta):
    """Base class of the discrete latent tree estimators (see the module docstring)."""

    #: ``alpha`` of the naive-Bayes candidate of ``LatentTreeClassifier(n_hidden_states=
    #: "auto")``: add-one on the category tables, ``CategoricalNB``'s default (0.5 measured
    #: worse on 6 of the 8 bundled tables, e.g. lymphography 5-fold log-loss 0.049 vs
    #: 0.041); ``None`` keeps the estimator's own
    _independence_alpha = 1.0
    #: estimators without the ``n_members`` parameter (``KernelLatentTree``) fit one member
    n_members = 1
    #: whether a fit can go on from where it stopped (EM on category codes), so that the
    #: candidates of a selection can race; otherwise each is fitted once
    _resumable_fits = True

    _parameter_constraints: dict = {
        "n_hidden_states": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "tree": "no_validation",  # LatentTree, edge list, Newick string or networkx graph
        "structure": [StrOptions(set(STRUCTURE_METHODS))],
        "categories": [StrOptions({"auto"}), list],
        "alpha": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
        "n_members": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "max_iter": [Interval(Integral, 0, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "n_jobs": [None, Integral],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        n_hidden_states=2,
        *,
        tree=None,
        structure="auto",
        categories="auto",
        alpha=0.5,
        n_members="auto",
        max_iter=300,
        tol=1e-4,
        n_jobs=None,
        random_state=None,
        verbose=0,
    ):
        self.n_hidden_states = n_hidden_states
        self.tree = tree
        self.structure = structure
        self.categories = categories
        self.alpha = alpha
        self.n_members = n_members
        self.max_iter = max_iter
        self.tol = tol
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------------ hook
    def _initial_parameters(self, tree, moments, rng):
        """Explicit starting point ``(root_marginal, cpts, extras)`` on ``tree``."""
        raise NotImplementedError

    # ------------------------------------------------------------------ validation
    #: frames from the warning in ``fit`` up to the caller of ``fit``
    _warning_stacklevel = 3

    #: numpy dtype kinds of DataFrame columns the estimator reads
    _allowed_kinds = "biufOSUb"

    def _validate_X(self, X, reset):
        check_frame_dtypes(X, self._allowed_kinds, type(self).__name__)
        return validate_data(
            self,
            X,
            reset=reset,
            dtype=None,
            ensure_all_finite="allow-nan",
            ensure_min_samples=1,
        )

    def _fit_encoding(self, X, declared, sample_weight=None):
        """Learn the categories (given, declared by pandas, or observed) and encode ``X``."""
        given = self.categories
        if isinstance(given, str):
            given = declared
        self._encoder = CategoricalEncoder("auto" if given is None else given)
        names = getattr(self, "feature_names_in_", None)
        if sample_weight is not None and not np.all(sample_weight > 0):
            # a row of weight zero is a row left out: its values are not categories
            self._encoder.fit_transform(X[sample_weight > 0], names)
            codes = self._encoder.transform(X)
        else:
            codes = self._encoder.fit_transform(X, names)
        self.categories_ = self._encoder.categories_
        return codes

    def _encode(self, X):
        return self._encoder.transform(X)

    def _moments(self, codes, sample_weight):
        return MomentEstimator(codes, self._encoder.n_states_, sample_weight, n_jobs=self.n_jobs)

    # ------------------------------------------------------------------ structure
    def _build_tree(self, moments, method):
        """A tree over the columns of ``moments`` learned with ``method``."""
        d = len(moments.n_states)
        if method == "star" or d == 1:
            return LatentTree.star(d)
        if method == "chow_liu":
            return chow_liu(mutual_information(moments))
        if method == "hclt":
            return hidden_chow_liu(mutual_information(moments))
        if method == "grouped_hclt":
            return grouped_chow_liu(mutual_information(moments))
        if method == "quartet":  # on Dask the tests, asked one after another, read the sample
            sample = moments.sample_moments() if hasattr(moments, "sample_moments") else moments
            return learn_tree_quartets(sample, self.n_hidden_states_)[0]
        D = spectral_distance(moments, self.n_hidden_states_)
        return learn_tree(
            D,
            method,
            n_samples=moments.sample_weight.sum(),
            n_jobs=self.n_jobs,
            verbose=self.verbose,
        )

    def _learn_tree(self, moments, method):
        """:meth:`_build_tree` on the informative columns (at least two categories); the
        others carry no information (a factor of one) and hang off the root as leaves."""
        d = len(moments.n_states)
        informative = np.flatnonzero(moments.n_states >= 2)
        if informative.size == d or informative.size < 2:
            return self._build_tree(moments, method)
        sub = moments.subset(informative)
        tree = self._build_tree(sub, method)
        return attach_columns(tree, informative, d)

    def _tree_rank(self, name, k, moments):
        """What the tree that ``name`` learns depends on in ``k'``: the selection of
        ``n_hidden_states="auto"`` learns each structure once per value. Nothing for the
        structures of mutual information; ``min(k', most categories of a column)`` for
        those of the spectral metric, whose pair terms keep ``min(k', n_i, n_j)`` singular
        values (on binary columns the metric, so the tree and the search, is the same at
        every ``k' >= 2``); ``k'`` for the others."""
        if name in _K_FREE_STRUCTURES:
            return None
        if name in DISTANCE_METHODS:
            return min(int(k), int(np.max(moments.n_states, initial=1)))
        return k

    def _resolve_tree(self, moments, structure):
        """The given tree (``structure="given"``) or one learned with ``structure`` from
        the data; rooted at its centre."""
        names = getattr(self, "feature_names_in_", None)
        names = None if names is None else [str(f) for f in names]
        d = len(moments.n_states)
        if structure == "given":
            tree = LatentTree.coerce(
                self._structure_spec()[0], d, feature_names=names, observed_leaves_only=False
            )
        else:
            tree = self._learn_tree(moments, structure)
        return LatentTree(tree.edges, d, feature_names=names)

    def _structure_spec(self):
        """``(given tree or None, structure method)``."""
        return self.tree, self.structure

    def _auto_candidates(self):
        return AUTO_CANDIDATES

    def _candidate_structures(self):
        """The structures a selection compares: the given tree, the named method, or the
        ``structure="auto"`` candidates."""
        given, method = self._structure_spec()
        if given is not None:
            return ["given"]
        return list(self._auto_candidates()) if method == "auto" else [method]

    def _row_values(self, moments):
        """The rows of ``moments``, feature-major (what :func:`holdout_weights` hashes)."""
        return moments.codes

    def _selection_split(self, moments):
        """``(training moments, held-out split, unseen probabilities)`` for model
        selection (:func:`~ltm_sklearn._estimators.selection.held_out_split` on
        :meth:`_row_values`), or ``None`` with a total weight under 10 rows."""
        split = held_out_split(self._row_values(moments), moments.sample_weight, self.random_state)
        if split is None:
            return None
        train_moments = moments.rows(split.train, split.train_weights)
        return train_moments, split, self._unseen_proba(train_moments)

    def _hidden_state_grid(self, moments):
        """The ``k'`` that ``n_hidden_states="auto"`` may try: at most the rows, and tables
        within the memory budget."""
        n_rows = int(np.count_nonzero(moments.sample_weight > 0))
        grid = [k for k in AUTO_HIDDEN_STATES if k <= n_rows and k * k <= _ENTRIES_PER_ROW * n_rows]
        return [k for k in grid if k == 1 or self._table_bytes(moments, k) <= TABLE_MEMORY]

    def _table_bytes(self, moments, k):
        """Bytes of the tables of a model with ``k`` hidden states (about one hidden node
        per column, a ``k x k`` table each)."""
        d = len(moments.n_states)
        return 8 * d * (k * k + k * int(np.max(moments.n_states, initial=1)))

    def _check_rows_for_states(self, moments, k):
        """Refuse more hidden states than rows (as scikit-learn's mixtures refuse more
        components than samples), and a ``k' x k'`` table between hidden nodes with more
        entries than ``_ENTRIES_PER_ROW`` times the rows: neither can be estimated."""
        n_rows = int(np.count_nonzero(moments.sample_weight > 0))
        if k > n_rows:
            raise ValueError(
                f"n_hidden_states={k} is more than the n_samples={n_rows} rows of positive "
                "weight: a hidden state needs rows to be estimated. Use fewer hidden states, "
                "n_hidden_states='auto', or a structure without hidden nodes "
                "(structure='chow_liu')."
            )
        if k * k > _ENTRIES_PER_ROW * n_rows:
            raise ValueError(
                f"n_hidden_states={k} gives tables of {k * k} entries between hidden nodes, "
                f"more than {_ENTRIES_PER_ROW} per row of the n_samples={n_rows} rows: they "
                f"cannot be estimated. Use at most {int(np.sqrt(_ENTRIES_PER_ROW * n_rows))} "
                "hidden states, or n_hidden_states='auto'."
            )

    def _given_members(self):
        """The members fitted without a choice: ``n_members``, or 1 for ``"auto"`` (whose
        members are chosen, memory permitting, by :func:`~.auto_fit.select_members`)."""
        return 1 if isinstance(self.n_members, str) else int(self.n_members)

    def _check_table_memory(self, moments, k):
        """Refuse a ``k'`` (times ``n_members``) whose tables do not fit in the memory
        budget."""
        m = self._given_members()
        need = self._table_bytes(moments, k * m)
        if need > TABLE_MEMORY:
            members = f" with n_members={m}" if m > 1 else ""
            raise ValueError(
                f"n_hidden_states={k}{members} needs about {need / 2**30:.1f} GiB of tables for "
                f"{len(moments.n_states)} columns (the limit is {TABLE_MEMORY / 2**30:.0f} "
                "GiB); use fewer hidden states or n_hidden_states='auto'."
            )

    # ------------------------------------------------------------------ fit
    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, sample_weight=None):
        """Fit the latent tree model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Categorical data: ints, bools, strings, whole-number floats or pandas
            categoricals (whose declared categories are kept); NaN/None marks a missing
            entry.
        y : None
            Ignored (a density estimator). For classification by per-class likelihoods
            use :class:`~ltm_sklearn.LatentTreeClassifier`.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative row weights.

        Returns
        -------
        self
        """
        reset_fitted_state(self)
        if is_dask_collection(X):
            if sample_weight is not None:
                raise ValueError(
                    "sample_weight is not supported with Dask input; fit in memory, or repeat rows."
                )
            moments, self._encoder, names = dask_moments(
                X, self.categories, self.random_state, self.n_jobs
            )
            if names is not None:
                self.feature_names_in_ = np.asarray(names, dtype=object)
            self.n_features_in_ = len(moments.n_states)
            self.categories_ = self._encoder.categories_
            self._fit_moments(moments, self._warning_stacklevel)
            return self
        declared = declared_categories(X)
        X = self._validate_X(X, reset=True)
        sample_weight = check_sample_weight(sample_weight, X, dtype=float, ensure_non_negative=True)
        if sample_weight.sum() <= 0:
            raise ValueError("sample_weight sums to zero: there is nothing to fit.")
        codes = self._fit_encoding(X, declared, sample_weight)
        moments = self._moments(codes, sample_weight)
        self._fit_moments(moments, self._warning_stacklevel)
        return self

    def _fit_moments(self, moments, stacklevel):
        """Everything after the encoding: ``k'`` and the tree (given, learned or selected)
        and the explicit parameters, from ``moments``."""
        self.unseen_proba_ = self._unseen_proba(moments)
        rng = check_random_state(self.random_state)
        self.structure_scores_ = {}
        # "auto": the default until select_alpha chooses
        self.alpha_ = DEFAULT_ALPHA if isinstance(self.alpha, str) else float(self.alpha)
        names = self._candidate_structures()
        if not isinstance(self.n_hidden_states, str) and names not in (["chow_liu"], ["given"]):
            # refuse before fitting any candidate (a learned latent tree has hidden nodes)
            self._check_table_memory(moments, int(self.n_hidden_states))
            self._check_rows_for_states(moments, int(self.n_hidden_states))
        choice = None
        if isinstance(self.n_hidden_states, str) or len(names) > 1 or isinstance(self.alpha, str):
            choice = select_model(self, moments, rng)
            k, structure = choice.k, choice.structure
            self.structure_scores_ = choice.structure_scores
            if isinstance(self.n_hidden_states, str):
                self.n_hidden_states_scores_ = choice.k_scores
            if choice.alpha is not None:
                self.alpha_, self.alpha_scores_ = choice.alpha, choice.alpha_scores
            if choice.member_scores is not None:
                self.n_members_scores_ = choice.member_scores
        else:
            k, structure = int(self.n_hidden_states), names[0]
        self._check_table_memory(moments, k)
        self.n_hidden_states_ = k
        self.structure_ = structure
        parameters = moments.for_parameters()
        grown = k > moment_states(moments.n_states)
        reuse = choice is not None and choice.fit is not None and self._resumable_fits
        starts = None
        if reuse and (grown or choice.members):
            # beyond the k' the moments identify, EM from the selection's fits on their
            # tree (learned on the selection's training rows); within, the tree and the
            # moment starts on every row (the tensor start beside the estimator's own
            # ends higher on identifiable truths: see _second_start)
            starts = choice.members or [choice.fit]
            names = getattr(self, "feature_names_in_", None)
            names = None if names is None else [str(f) for f in names]
            edges = choice.fit.tree.edges
            self.tree_ = LatentTree(edges, len(moments.n_states), feature_names=names)
        else:
            self.tree_ = self._resolve_tree(moments, structure)
        if self.tree_.hidden_nodes:
            self._check_rows_for_states(moments, k)
        if starts is not None:
            # EM on every row from the selection's fits (on most of the same rows)
            refit = self._refit_iterations(moments, choice)
            fits = [self._refit(f, parameters, rng, refit) for f in starts]
            fitted = fits[0] if len(fits) == 1 else average_fits(fits)
            self.n_members_ = len(fits)
        else:
            fitted = self._fit_parameters(self.tree_, parameters, rng, second_start=True)
            fitted = self._fit_members(fitted, parameters, rng, stacklevel)
        self._set_fitted(fitted)
        if not fitted.converged:
            warnings.warn(
                f"EM did not converge in max_iter={self.max_iter} iterations (tol="
                f"{self.tol}); increase max_iter or tol.",
                ConvergenceWarning,
                stacklevel=stacklevel + 1,
            )

    def _refit_iterations(self, moments, choice):
        """EM iterations on every row after a selection. With ``n_hidden_states="auto"``
        and a selection that trained on most of the weight, ``_REFIT_MAX_ITER``: its fit
        already stopped at the best held-out score, and the held-out fifth moves the
        optimum little. Otherwise ``max_iter``, to the training tolerance: a given
        ``k'`` is fitted to convergence (a grid search over ``k'`` compares converged
        fits), and a selection on a subsample (large data) is only a start."""
        auto_k = isinstance(self.n_hidden_states, str)
        if auto_k and choice.train_weight >= 0.5 * float(moments.sample_weight.sum()):
            return min(self.max_iter, _REFIT_MAX_ITER)
        return self.max_iter

    def _resume(self, fit, moments, rng, max_iter, early_stopping=None):
        """EM from ``fit`` for at most ``max_iter`` more iterations on ``moments``; the
        iterations of ``fit`` are counted in the result's ``n_iter``."""
        more = self._polish(
            fit.tree, moments, fit.root_marginal, fit.cpts, fit.extras, rng, max_iter,
            early_stopping=early_stopping,
        )  # fmt: skip
        more.n_iter += fit.n_iter
        return more

    def _refit(self, start, moments, rng, max_iter):
        """``start`` (a fit of the selection) polished by EM on ``moments``. It counts
        as converged when the refit stopped by the training tolerance or used the budget
        ``max_iter`` it was given below ``self.max_iter`` (the selection's own fits stop
        on their held-out rule or their ranking budget)."""
        fitted = self._resume(start, moments, rng, max_iter)
        fitted.converged = fitted.converged or max_iter < self.max_iter
        return fitted

    def _fit_members(self, fitted, moments, rng, stacklevel):
        """``n_members`` EM fits averaged into one model
        (:func:`~ltm_sklearn._algorithms.em.average_members`): ``fitted`` and
        ``n_members - 1`` more on the same tree, from random starts; sets
        ``n_members_``.

        Measured on the density benchmark (bnetflix, hidden Chow-Liu tree over column
        groups, k' = 24, test log-likelihood per row): one fit -56.358, the average of two
        -56.206, of three -56.140; a single fit with twice the states overfits instead
        (k' = 48: best -56.341 after 60 EM iterations, -56.587 after 400)."""
        tree = fitted.tree
        self.n_members_ = 1
        count = self._given_members()
        if count == 1 or not tree.hidden_nodes:
            return fitted  # without hidden nodes EM has one optimum: members would agree
        if not can_average_members(tree):
            warnings.warn(
                f"n_members={self.n_members} averages fits over the hidden states and needs "
                f"every column at a leaf; the tree of structure {self.structure_!r} has "
                "columns at internal nodes, so one fit is kept.",
                UserWarning,
                stacklevel=stacklevel + 2,
            )
            return fitted
        fits = [fitted]
        n_states = node_states(tree, moments.n_states, self.n_hidden_states_)
        for m in range(1, count):
            if self.verbose:
                print(f"member {m + 1} of {count}: EM from a random start")
            root, cpts = random_cpts(tree, n_states, rng)
            fits.append(self._polish(tree, moments, root, cpts, {}, rng))
        self.n_members_ = count
        return average_fits(fits)

    # ------------------------------------------------------------------ streaming
    def partial_fit(self, X, y=None, sample_weight=None):
        """Add a batch of rows to the statistics, for data that arrive in batches or do
        not fit in memory.

        The exact additive statistics (every pair and singleton table) and a uniform
        sample of at most :data:`~ltm_sklearn._sources.streaming.SAMPLE_ROWS` rows are kept
        (:mod:`ltm_sklearn._sources.streaming`); the model is rebuilt from them - tree, moment
        estimate, EM on the sample - when it is first used after a call, so a stream of
        batches costs about one fit. While at most ``SAMPLE_ROWS`` rows have been seen the
        model equals ``fit`` on the concatenated batches; beyond, the tree still comes
        from the exact pair tables of every row and the parameters from the sample.
        Categories may first appear in any batch (the encoding grows; earlier counts are
        kept); with ``categories`` given or pandas-declared, a value outside them is an
        error as in ``fit``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            A batch, with the columns of the first one.
        y : None
            Ignored.
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        self
        """
        first = "_stream" not in self.__dict__
        if first:
            self._validate_params()
            declared = declared_categories(X)
        X = self._validate_X(X, reset=first)
        sample_weight = check_sample_weight(sample_weight, X, dtype=float, ensure_non_negative=True)
        if first:
            seed = check_random_state(self.random_state).randint(2**31 - 1)
            self._stream = RowStatistics(X.shape[1], random_state=seed)
            self._stream_declared = declared
        self._stream.add(X, sample_weight)
        if self._stream.weight <= 0:
            raise ValueError("sample_weight sums to zero: there is nothing to fit.")
        self.n_samples_seen_ = self._stream.n_rows
        reset_fitted_state(self, _STREAM_BUILT)  # built again when first read
        self._stream_stale = True
        return self

    def _build_from_stream(self):
        """The model of the statistics accumulated by :meth:`partial_fit`."""
        self._stream_stale = False
        given = self.categories
        if isinstance(given, str):
            given = self._stream_declared or "auto"
        names = getattr(self, "feature_names_in_", None)
        encoder, perms = self._stream.final_encoder(given, names)
        self._encoder = encoder
        self.categories_ = encoder.categories_
        self._fit_moments(self._stream.moments(encoder, perms, self.n_jobs), 3)

    def __getattr__(self, name):
        # after partial_fit the model is built when first read
        if name in _STREAM_BUILT and self.__dict__.get("_stream_stale"):
            self._build_from_stream()
            if name in self.__dict__:
                return self.__dict__[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _second_start(self, tree, moments, rng):
        """A second explicit start polished beside the estimator's own, the better
        training objective kept: the three-view tensor decomposition of the empirical
        moments (Anandkumar et al. (JMLR 2014), :func:`~ltm_sklearn.tensor.tensor_cpts`), for trees
        with
        hidden nodes and ``k'`` within what the moments identify. EM stops on a plateau
        of slow progress (``tol``), and two starts land on it at different heights: on
        8-leaf ground truths (k = 3, 5 categories, 30,000 rows) the spectral start alone
        stopped 0.002-0.008 nats per row below EM from the tensor start."""
        k = self.n_hidden_states_
        if not tree.hidden_nodes or k > moment_states(moments.n_states):
            return None
        return tensor_cpts(tree, moments, k, random_state=rng)

    def _unseen_proba(self, moments):
        return np.array([1.0 / (c.size + t + 1.0) for c, t in moments.singleton_counts()])

    def _fit_parameters(
        self, tree, moments, rng, max_iter=None, second_start=False, early_stopping=None
    ):
        """Explicit starting point (:meth:`_initial_parameters`) polished by EM (at most
        ``max_iter`` iterations, default ``self.max_iter``, stopped early on a held-out
        score with ``early_stopping``); with ``second_start`` also :meth:`_second_start`,
        the better one kept."""
        if tree.hidden_nodes and self.n_hidden_states_ > moment_states(moments.n_states):
            # more hidden states than the moments identify: EM from a random start (on the
            # density benchmark's hidden Chow-Liu trees it ends above the moment start
            # copied to k' states at k' >= 4: nltcs valid -6.083 vs -6.128 at k' = 4,
            # -5.944 vs -5.970 at k' = 32; plants -13.02 vs -13.61 at k' = 16)
            n_states = node_states(tree, moments.n_states, self.n_hidden_states_)
            root, cpts = random_cpts(tree, n_states, rng)
            return self._polish(
                tree, moments, root, cpts, {}, rng, max_iter, early_stopping=early_stopping
            )

        def starts(r):
            first = self._initial_parameters(tree, moments, r)
            return first, (self._second_start(tree, moments, r) if second_start else None)

        if hasattr(moments, "prefetch"):  # distributed data: its moments in one pass
            moments.prefetch(starts, rng)
        (root, cpts, extras), second = starts(rng)
        # the better training objective is kept (the raw estimate stays the estimator's)
        others = () if second is None else (second,)
        return self._polish(
            tree, moments, root, cpts, extras, rng, max_iter, others=others,
            early_stopping=early_stopping,
        )  # fmt: skip

    def _polish(
        self,
        tree,
        moments,
        root,
        cpts,
        extras,
        rng=None,
        max_iter=None,
        noise=None,
        others=(),
        alpha=None,
        early_stopping=None,
    ):
        """EM from ``(root, cpts)`` (and from each start of ``others``, the best kept),
        hidden states first expanded to ``k'``; pseudo-count ``alpha`` (default
        ``alpha_``); stopped early on a held-out score with ``early_stopping``
        (:class:`~ltm_sklearn._algorithms.em.EarlyStopping`)."""
        noise = _EXPAND_NOISE if noise is None else noise
        alpha = self.alpha_ if alpha is None else alpha
        starts = [
            expand_states(tree, r, c, self.n_hidden_states_, random_state=rng, noise=noise)
            for r, c in [(root, cpts), *others]
        ]
        max_iter = self.max_iter if max_iter is None else max_iter
        dtype = np.float32 if self.n_hidden_states_ >= _FLOAT32_STATES else np.float64
        root, cpts, objective, n_iter, converged, _, _ = polish(
            tree,
            *starts[0],
            moments.codes,
            moments.sample_weight,
            moments.n_states,
            others=starts[1:],
            alpha=alpha,
            max_iter=max_iter,
            tol=self.tol,
            random_state=rng,
            verbose=self.verbose,
            n_jobs=self.n_jobs,
            dtype=dtype,
            early_stopping=early_stopping,
        )
        if max_iter > 0 and getattr(moments, "n_rows_total", 0) > moments.n_samples:
            # distributed data beyond the sample: EM goes on over every partition
            root, cpts, objective, more, converged, _ = fit_em(
                tree,
                root,
                cpts,
                moments.evidence(),
                None,
                alpha=alpha,
                max_iter=max_iter,
                tol=self.tol,
                verbose=self.verbose,
            )
            n_iter += more
        return FittedModel(tree, root, cpts, objective, n_iter, converged, extras)

    def _set_fitted(self, fitted):
        root, cpts = _canonical_root(fitted.tree, fitted.root_marginal, fitted.cpts)
        self.root_marginal_ = root
        self.cpts_ = cpts
        self.lower_bound_ = fitted.objective
        self.n_iter_ = fitted.n_iter
        self.converged_ = fitted.converged
        for name, value in fitted.extras.items():
            setattr(self, name, value)

    # ------------------------------------------------------------------ scoring
    def _held_out_log_likelihood(self, fitted, moments, rows, unseen_proba):
        """Log-likelihood of the training ``rows`` of ``moments`` under ``fitted`` (the
        held-out rows of ``structure="auto"``)."""
        return self._model_log_likelihood(fitted, moments.codes[:, rows], unseen_proba)

    def _model_log_likelihood(self, fitted, codes, unseen_proba):
        ev = CodeEvidence(codes, self._encoder.n_states_, unseen_proba)
        return log_likelihood(fitted.tree, fitted.root_marginal, fitted.cpts, ev)

    def _evidence(self, codes):
        """Evidence of the observed nodes for encoded rows (the hook of the continuous
        model, whose leaves send densities instead of category codes)."""
        return CodeEvidence(codes, self._encoder.n_states_, self.unseen_proba_)

    def _log_likelihood(self, codes):
        fitted = FittedModel(self.tree_, self.root_marginal_, self.cpts_)
        return self._model_log_likelihood(fitted, codes, self.unseen_proba_)

    def score_samples(self, X):
        """Log-likelihood ``log p(x)`` of each row; NaN entries are marginalised out.

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        return self._log_likelihood(self._encode(self._validate_X(X, reset=False)))

    def score(self, X, y=None, sample_weight=None):
        """Mean log-likelihood per row (weighted by ``sample_weight``): the density
        convention of scikit-learn, so ``GridSearchCV`` selects ``n_hidden_states`` by
        held-out likelihood.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : None
            Ignored.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative row weights.

        Returns
        -------
        float
        """
        values = self.score_samples(X)
        if sample_weight is None:
            return float(np.mean(values))
        sample_weight = check_sample_weight(
            sample_weight, values.reshape(-1, 1), dtype=float, ensure_non_negative=True
        )
        if sample_weight.sum() <= 0:
            raise ValueError("sample_weight sums to zero: the weighted mean is undefined.")
        return float(np.average(values, weights=sample_weight))

    # ------------------------------------------------------------------ queries
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
            ``n_members_ * n_hidden_states_``.
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
        for the ``n_members_ * n_hidden_states_`` states of the root ``tree_.root`` (a
        hidden node at the centre of the tree); NaN entries are marginalised out. For
        every hidden node use :meth:`predict_hidden_proba`; to classify rows by per-class
        likelihoods use :class:`~ltm_sklearn.LatentTreeClassifier`.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_states)
            ``n_states`` is ``n_members_ * n_hidden_states_``; rows sum to 1. A tree without hidden
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
        ndarray of shape (n_samples, n_features)
            Values from ``categories_`` (object dtype when the columns hold non-numbers).
        """
        check_is_fitted(self)
        if not isinstance(n_samples, (Integral, np.integer)) or n_samples < 1:
            raise ValueError(f"n_samples must be a positive integer, got {n_samples!r}.")
        tree = self.tree_
        rng = check_random_state(random_state)
        states = sample_states(tree, self.root_marginal_, self.cpts_, int(n_samples), rng)
        return self._decode(states[: tree.n_observed].T.copy(), random_state)

    def _decode(self, codes, random_state=None):
        """Values of sampled codes ``(n_samples, n_features)``."""
        return self._encoder.inverse_transform(codes)

    def _shared_params(self):
        """Parameters that make per-class models of a classifier share this fit's tree."""
        return {"tree": self.tree_}

    def _shared_encoding(self, X, declared):
        """Parameters that make per-class models of a classifier share one encoding,
        learned from all rows (``declared``: pandas' declared categories)."""
        given = declared if declared is not None else "auto"
        names = list(X.columns) if isinstance(X, pd.DataFrame) else None
        encoder = CategoricalEncoder(given)
        encoder.fit_transform(X, names)
        return {"categories": encoder.categories_}

    # ------------------------------------------------------------------ tags
    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.categorical = True
        return tags


def _canonical_root(tree, root_marginal, cpts):
    """The root's hidden states ordered by decreasing probability (children's tables
    permuted alike): the same distribution, with state labels that do not depend on the
    start, so that ``predict_proba`` is comparable between fits."""
    if tree.root < tree.n_observed or len(root_marginal) < 2:
        return root_marginal, cpts
    perm = np.argsort(-np.asarray(root_marginal), kind="stable")
    cpts = dict(cpts)
    for c in tree.children[tree.root]:
        cpts[c] = cpts[c][perm]
    return np.asarray(root_marginal)[perm], cpts
