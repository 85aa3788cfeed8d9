"""Shared machinery of the discrete latent tree estimators.

:class:`BaseLatentTree` owns validation, categorical encoding, ``fit``, the moment start
and EM polishing, members, and scoring; it is assembled from one-role mixins - the tree
of a fit and a selection's candidates (:mod:`.structures`), the queries (:mod:`.queries`),
``partial_fit`` (:mod:`.partial_fit`) - and the automatic fit is
:func:`~.auto_fit.select_model`. A subclass implements one abstract hook:

* ``_initial_parameters(tree, moments, k, random_state)`` -> ``(root_marginal, cpts,
  extras)``: an explicit starting point on ``tree`` with ``k`` hidden states, recovered
  from the moments (the estimator's own algorithm), and anything it wants to keep
  (``extras``, e.g. the raw observable representation of the spectral algorithm).

Everything that depends on what the columns hold - encoding, moments, evidence,
scoring, decoding - is the estimator's leaf model, made by the hook ``_make_leaves``
(:mod:`~ltm_sklearn._algorithms.leaves`; categorical columns here). A model of other
data (:class:`~ltm_sklearn.KernelLatentTree`) gives its own leaf model and overrides the
model hooks ``_fit_parameters`` and ``_tensor_start`` and the structure hooks
``_learn_tree`` and ``_tree_rank`` (with the class attribute ``_auto_structures``).

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

import copy
from abc import ABCMeta, abstractmethod
from numbers import Integral, Real

import numpy as np
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
from .._algorithms.hidden_states import hidden_state_counts
from .._algorithms.leaves import CategoricalLeaves
from .._algorithms.structure import (
    STRUCTURE_METHODS,
)
from .._algorithms.tensor import expand_states, tensor_cpts
from .._engine.inference import release_buffers
from .._engine.moments import beyond_memory
from .._engine.tree import LatentTree, canonical_root
from .._engine.user_warnings import warn
from .._sources.distributed import dask_moments
from .auto_fit import select_model
from .candidates import CandidateTask, run_tasks, task_seed
from .fits import (
    DEFAULT_ALPHA,
    FittedModel,
    ModelChoice,
    average_fits,
    moment_states,
    pruned_fit,
)
from .partial_fit import PartialFitMixin
from .queries import QueryMixin
from .sklearn_internals import (
    N_JOBS_CONSTRAINT,
    Interval,
    StrOptions,
    check_sample_weight,
    fit_context,
)
from .structures import StructureMixin
from .validation import (
    check_frame_dtypes,
    extension_columns_as_objects,
    is_dask_collection,
    mean_score,
    refuse_dask,
    reset_fitted_state,
    warn_empty_columns,
)

__all__ = ["BaseLatentTree", "FittedModel", "ModelChoice"]

#: from this many hidden states on, EM's messages are float32: on 1,797 rows x 64 columns
#: (hidden Chow-Liu tree) an E-step at k' = 4 / 8 / 12 took 2.95 / 4.70 / 7.15 ms against
#: float64's 5.03 / 8.91 / 14.38, every row's log-likelihood within 2e-6 nats; on the
#: hidden Chow-Liu trees of jester / plants at k' = 2 16.6 / 7.7 ms against 32.6 / 15.3 ms
#: (k' = 1, every hidden node constant, needs no E-step to speak of)
_FLOAT32_STATES = 2
#: relative perturbation of the copied states when a start has fewer hidden states than k'
_EXPAND_NOISE = 0.05
#: EM iterations on every row after a selection that trained on most of them: the
#: selection's fits stopped at their held-out optimum on fewer rows, and all the rows move
#: it on a little (docs/architecture.md, "Tuning constants")
_REFIT_MAX_ITER = 40


class BaseLatentTree(
    StructureMixin, QueryMixin, PartialFitMixin, DensityMixin, BaseEstimator, metaclass=ABCMeta
):
    """Base class of the discrete latent tree estimators (see the module docstring)."""

    #: ``alpha`` of the naive-Bayes candidate of ``LatentTreeClassifier(n_hidden_states=
    #: "auto")``: add-one on the category tables, as ``CategoricalNB``'s default (0.5 is
    #: worse: docs/architecture.md, "Tuning constants"); ``None`` keeps the estimator's own
    _independence_alpha = 1.0
    #: estimators without the ``n_members`` parameter (``KernelLatentTree``) fit one member
    n_members = 1
    #: and fit their data as observed without entropy regularisation (no ``softening``
    #: or ``entropy`` parameter)
    softening = 0.0
    entropy = 0.0
    #: and keep every hidden state (no ``min_state_rows`` parameter)
    min_state_rows = 0.0
    #: whether a fit can go on from where it stopped (EM on category codes), so that the
    #: candidates of a selection can race; otherwise each is fitted once
    _resumable_fits = True
    #: whether a fit with a selection keeps the selection's model of its training rows
    #: with the held-out split (:meth:`_take_held_out_model`): set on an instance by
    #: ``LatentTreeClassifier``, which calibrates its pool on those held-out rows instead
    #: of fitting the model once more (a second set of tables, so not by default)
    _keeps_held_out_fit = False
    #: whether a fit keeps what only a reader of the fitted model uses: a moment
    #: estimator's raw estimate (``raw_estimate_``, :meth:`_raw_extras`). Set to ``False``
    #: on an instance by ``LatentTreeClassifier`` for the trial fits it scores and drops
    #: (the raw estimates of its trial fits took 6-14% of the classifier's fit in one
    #: process on car, breast and contraceptive; the explicit models are the same)
    _keeps_raw_estimate = True

    _parameter_constraints: dict = {
        "n_hidden_states": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "tree": "no_validation",  # LatentTree, edge list, Newick string or networkx graph
        "structure": [StrOptions(set(STRUCTURE_METHODS))],
        "categories": [StrOptions({"auto"}), list],
        "alpha": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
        "softening": [Interval(Real, 0, 0.5, closed="left"), StrOptions({"auto"})],
        "entropy": [Interval(Real, 0, None, closed="left"), StrOptions({"auto"})],
        "n_members": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "min_state_rows": [Interval(Real, 0, None, closed="left"), StrOptions({"auto"})],
        "max_iter": [Interval(Integral, 0, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "n_jobs": N_JOBS_CONSTRAINT,
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
        softening=0.0,
        entropy=0.0,
        n_members="auto",
        min_state_rows="auto",
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
        self.softening = softening
        self.entropy = entropy
        self.n_members = n_members
        self.min_state_rows = min_state_rows
        self.max_iter = max_iter
        self.tol = tol
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------------ hook
    @abstractmethod
    def _initial_parameters(self, tree, moments, k, rng):
        """Explicit starting point ``(root_marginal, cpts, extras)`` on ``tree`` with
        ``k`` states per hidden node, from ``moments``: the estimator's own algorithm."""

    # ------------------------------------------------------------------ validation
    #: numpy dtype kinds of DataFrame columns the estimator reads
    _allowed_kinds = "biufOSUb"

    def _validate_X(self, X, reset):
        refuse_dask(X, type(self).__name__)
        check_frame_dtypes(X, self._allowed_kinds, type(self).__name__)
        return validate_data(
            self,
            extension_columns_as_objects(X),
            reset=reset,
            dtype=None,
            ensure_all_finite="allow-nan",
            ensure_min_samples=1,
        )

    def _make_leaves(self):
        """The leaf model of the columns (:mod:`~ltm_sklearn._algorithms.leaves`):
        categorical columns, their categories given, declared by pandas or observed."""
        return CategoricalLeaves(self.categories)

    def _encode(self, X):
        return self._leaves.transform(X)

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
            Frequency weights (non-negative): a row of weight 2 counts as two copies of
            it, so scaling every weight changes the model as more rows would (the prior
            weighs less).

        Returns
        -------
        self
        """
        reset_fitted_state(self)
        if is_dask_collection(X):
            check_frame_dtypes(X, self._allowed_kinds, type(self).__name__)
            if sample_weight is not None:
                raise ValueError(
                    "sample_weight is not supported with Dask input; fit in memory, or repeat rows."
                )
            moments, encoder, names = dask_moments(
                X, self.categories, self.random_state, self.n_jobs
            )
            if names is not None:
                self.feature_names_in_ = np.asarray(names, dtype=object)
            self.n_features_in_ = len(moments.n_states)
            leaves = CategoricalLeaves.from_encoder(encoder, self.categories)
            warn_empty_columns(leaves.fitted_attributes()["categories_"], names)
            self._set_leaves(leaves)
            self._fit_moments(moments)
            return self
        leaves = self._make_leaves()
        leaves.inspect(X)  # before validation turns a DataFrame into an array
        X = self._validate_X(X, reset=True)
        sample_weight = check_sample_weight(sample_weight, X, dtype=float, ensure_non_negative=True)
        if sample_weight.sum() <= 0:
            raise ValueError("sample_weight sums to zero: there is nothing to fit.")
        names = getattr(self, "feature_names_in_", None)
        data = leaves.fit_transform(X, sample_weight, names, self.random_state)
        warn_empty_columns(leaves.fitted_attributes()["categories_"], names)
        self._set_leaves(leaves)
        self._fit_moments(leaves.moments(data, sample_weight, self.n_jobs))
        return self

    def _set_leaves(self, leaves):
        """Keep the fitted leaf model and set its public attributes (``categories_``)."""
        self._leaves = leaves
        for name, value in leaves.fitted_attributes().items():
            setattr(self, name, value)

    def _fit_moments(self, moments):
        """Everything after the encoding: ``k'`` and the tree (given, learned or selected)
        and the explicit parameters, from ``moments``."""
        self.unseen_proba_ = self._unseen_proba(moments)
        rng = check_random_state(self.random_state)
        self.structure_scores_ = {}
        # "auto": the default until select_alpha (select_softening) chooses
        self.alpha_ = DEFAULT_ALPHA if isinstance(self.alpha, str) else float(self.alpha)
        self.softening_ = 0.0 if isinstance(self.softening, str) else float(self.softening)
        self.entropy_ = 0.0 if isinstance(self.entropy, str) else float(self.entropy)
        # "auto" without a selection (no held-out rows to choose on): every state kept
        given = not isinstance(self.min_state_rows, str)
        self.min_state_rows_ = float(self.min_state_rows) if given else 0.0
        names = self._candidate_structures()
        if not isinstance(self.n_hidden_states, str) and names not in (["chow_liu"], ["given"]):
            # refuse before fitting any candidate (a learned latent tree has hidden nodes)
            self._check_table_memory(moments, int(self.n_hidden_states))
            self._check_rows_for_states(moments, int(self.n_hidden_states))
        choice = None
        chosen = (self.n_hidden_states, self.alpha, self.softening, self.entropy)
        if len(names) > 1 or any(isinstance(value, str) for value in chosen):
            choice = select_model(self, moments, rng)
            k, structure = choice.k, choice.structure
            self.structure_scores_ = choice.structure_scores
            if isinstance(self.n_hidden_states, str):
                self.n_hidden_states_scores_ = choice.k_scores
            if choice.alpha is not None:
                self.alpha_, self.alpha_scores_ = choice.alpha, choice.alpha_scores
            if choice.softening is not None:
                self.softening_ = choice.softening
                self.softening_scores_ = choice.softening_scores
            if choice.entropy is not None:
                self.entropy_, self.entropy_scores_ = choice.entropy, choice.entropy_scores
            if choice.member_scores is not None:
                self.n_members_scores_ = choice.member_scores
            if choice.min_state_rows_scores is not None:
                self.min_state_rows_ = choice.min_state_rows
                self.min_state_rows_scores_ = choice.min_state_rows_scores
        else:
            k, structure = int(self.n_hidden_states), names[0]
        self._check_table_memory(moments, k)
        self.n_hidden_states_ = k
        self.structure_ = structure
        parameters = moments.for_parameters()
        grown = k > moment_states(moments.n_states)
        reuse = choice is not None and choice.fit is not None and self._resumable_fits
        starts = None
        if reuse and (grown or len(choice.members or ()) > 1):
            # beyond the k' the moments identify, or with members, EM from the
            # selection's fits on their tree (learned on the selection's training rows:
            # the members share it); within and with one fit, the tree and the tensor
            # start on every row (see _fit_parameters)
            starts = choice.members or [choice.fit]
            names = getattr(self, "feature_names_in_", None)
            names = None if names is None else [str(f) for f in names]
            edges = choice.fit.tree.edges
            self.tree_ = LatentTree(edges, len(moments.n_states), feature_names=names)
        else:
            self.tree_ = self._resolve_tree(moments, structure, k)
        if self.tree_.hidden_nodes:
            self._check_rows_for_states(moments, k)
        if starts is not None:
            # EM on every row from the selection's fits (on most of the same rows)
            refit = self._refit_iterations(moments, choice)
            seed = rng.randint(np.iinfo(np.int32).max)
            tasks = [
                CandidateTask(k, f.tree, "resume", refit, False, task_seed(seed, m), f)
                for m, f in enumerate(starts)
            ]
            fits = [fit for fit, _ in run_tasks(self, tasks, parameters)]
            for fit in fits:
                # stopped by the training tolerance, or by the budget it was given below
                # max_iter (the selection's fits stopped on their held-out rule)
                fit.converged = fit.converged or refit < self.max_iter
            if len(fits) > 1:  # the members n_members="auto" chose
                fitted = average_fits(fits, choice.member_weights)
                self.n_members_ = len(fits)
            else:  # a given n_members: the others from random starts, as without a choice
                fitted = self._fit_members(fits[0], parameters, k, rng)
            if not grown:  # the raw estimate of every row, as without a selection
                fitted.extras = self._raw_extras(self.tree_, parameters, k)
        else:
            fitted = self._fit_parameters(self.tree_, parameters, k, rng, tensor_start=True)
            if reuse and choice.fit.tree.edges == self.tree_.edges:
                # and from the selection's fit, which ran on to its held-out rule: the
                # better training objective is kept (on an 8-leaf truth with k = 3,
                # EM from the moment starts stopped at tol 0.0049 nats per row from the
                # truth on test rows, 0.0012 from the selection's fit); the raw estimate
                # stays the one of every row
                resumed = self._resume(choice.fit, parameters, k, rng, self.max_iter)
                if resumed.objective > fitted.objective:
                    resumed.extras = fitted.extras
                    fitted = resumed
            fitted = self._fit_members(fitted, parameters, k, rng)
        total = getattr(moments, "total_weight", None) or float(moments.sample_weight.sum())
        self._set_fitted(pruned_fit(fitted, self.min_state_rows_ / total))
        if self._keeps_held_out_fit and choice is not None and choice.held_out is not None:
            trained = choice.model_of_training_rows()
            if trained is not None:
                self._held_out_fit = (choice.held_out, trained, choice.unseen_proba)
        release_buffers()
        if not fitted.converged:
            warn(
                f"EM did not converge in max_iter={self.max_iter} iterations (tol="
                f"{self.tol}); increase max_iter or tol.",
                ConvergenceWarning,
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

    def _resume(self, fit, moments, k, rng, max_iter, early_stopping=None, **settings):
        """EM from ``fit`` (``k`` states per hidden node) for at most ``max_iter`` more
        iterations on ``moments``, with the ``_polish`` arguments ``settings``; the
        iterations of ``fit`` are counted in the result's ``n_iter``. With an
        ``em_state`` in ``settings`` (a copy of ``fit.em_state``), EM goes on from where
        the run of ``fit`` stopped, as one run."""
        more = self._polish(
            fit.tree, moments, k, fit.root_marginal, fit.cpts, fit.extras, rng, max_iter,
            early_stopping=early_stopping, **settings,
        )  # fmt: skip
        more.n_iter += fit.n_iter
        return more

    def _fit_members(self, fitted, moments, k, rng):
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
        if count == 1 or not tree.hidden_nodes or k == 1:
            # without hidden nodes, or with one state each, EM has one optimum: members
            # would agree
            return fitted
        if not can_average_members(tree) or self.max_iter == 0:
            why = (
                "max_iter=0 keeps the moment estimate, and the other members would be "
                "their random starts"
                if self.max_iter == 0
                else f"the tree of structure {self.structure_!r} has columns at internal "
                "nodes, and members are averaged over the hidden states"
            )
            warn(
                f"n_members={self.n_members} averages EM fits; {why}: one fit is kept.",
                UserWarning,
            )
            return fitted
        fits = [fitted]
        n_states = node_states(tree, moments.n_states, k)
        for m in range(1, count):
            if self.verbose:
                print(f"member {m + 1} of {count}: EM from a random start")
            root, cpts = random_cpts(tree, n_states, rng)
            fits.append(self._polish(tree, moments, k, root, cpts, {}, rng))
        self.n_members_ = count
        return average_fits(fits)

    def _tensor_start(self, tree, moments, k, rng):
        """The three-view tensor decomposition of the empirical moments (Anandkumar, Ge,
        Hsu, Kakade & Telgarsky, "Tensor Decompositions for Learning Latent Variable
        Models", JMLR 15, 2014; :func:`~ltm_sklearn.tensor.tensor_cpts`) as
        ``(root_marginal, cpts)``, for trees with hidden nodes and ``k'`` within what the
        moments identify; ``None`` otherwise, or where the estimator's own start is this
        one."""
        if not tree.hidden_nodes or k > moment_states(moments.n_states):
            return None
        return tensor_cpts(tree, moments, k, random_state=rng)

    def _raw_extras(self, tree, moments, k):
        """What the estimator keeps of its own algorithm (``extras`` of
        :meth:`_initial_parameters`) when EM starts from :meth:`_tensor_start` instead:
        nothing here; the moment estimators' raw representation."""
        return {}

    def _unseen_proba(self, moments):
        return self._leaves.unseen_proba(moments)

    def _fit_parameters(
        self, tree, moments, k, rng, max_iter=None, tensor_start=False, early_stopping=None
    ):
        """Explicit starting point with ``k`` states per hidden node polished by EM (at
        most ``max_iter`` iterations, default ``self.max_iter``, stopped early on a
        held-out score with ``early_stopping``): the estimator's own
        (:meth:`_initial_parameters`), or with ``tensor_start`` :meth:`_tensor_start`
        where it applies and EM runs (the estimator's raw estimate still kept,
        :meth:`_raw_extras`).

        The tensor start is the one EM ends higher from: polished side by side with the
        spectral start, it ended higher on all 10 fits at k' = 2 and 3 on the digits
        (neighbour-joining trees, by 0.43 nats per row of training objective in the
        median) in half the EM iterations (73 against 144), and on 35 of 46 fits of
        ground-truth trees; polished alone, it ends within 0.0002 nats per row of the
        better of the two on test rows at k' = k in all 48 ground-truth fits measured
        (docs/results.md, "Time to a result")."""
        # max_iter=0 keeps the start: the estimator's own
        polished = (self.max_iter if max_iter is None else max_iter) > 0
        identified = moment_states(moments.n_states)
        if tree.hidden_nodes and k > identified:
            if not polished:
                # the moment estimate at the states the moments identify, its states
                # copied to k' (the same distribution), instead of random tables kept
                if max_iter is None:
                    warn(
                        f"n_hidden_states={k} is more than the moments identify "
                        f"({identified}): max_iter=0 keeps the moment estimate at "
                        f"{identified} states, each copied (the same distribution). EM "
                        "(max_iter > 0) puts the other states to use.",
                        UserWarning,
                    )
                root, cpts, _ = self._initial_parameters(tree, moments, identified, rng)
                root, cpts = expand_states(tree, root, cpts, k)
                return self._polish(tree, moments, k, root, cpts, {}, rng, 0)
            # more hidden states than the moments identify: EM from a random start, which
            # ends above the moment start copied to k' states (docs/architecture.md,
            # "Tuning constants")
            n_states = node_states(tree, moments.n_states, k)
            root, cpts = random_cpts(tree, n_states, rng)
            return self._polish(
                tree, moments, k, root, cpts, {}, rng, max_iter, early_stopping=early_stopping
            )

        def start(r):
            # one hidden state: every hidden node is constant and the tensor start's tables
            # are the maximum-likelihood ones (each column's frequencies, or its pair table
            # under a column), which a rank-one moment estimate only approximates
            use_tensor = (tensor_start and polished) or k == 1
            tensor = self._tensor_start(tree, moments, k, r) if use_tensor else None
            if tensor is None:
                return self._initial_parameters(tree, moments, k, r)
            return (*tensor, self._raw_extras(tree, moments, k))

        moments.prefetch(start, rng)  # distributed data: its moments in one pass
        root, cpts, extras = start(rng)
        return self._polish(
            tree, moments, k, root, cpts, extras, rng, max_iter, early_stopping=early_stopping
        )

    def _polish(
        self,
        tree,
        moments,
        k,
        root,
        cpts,
        extras,
        rng=None,
        max_iter=None,
        noise=None,
        alpha=None,
        early_stopping=None,
        softening=None,
        entropy=None,
        tol=None,
        em_state=None,
    ):
        """EM from ``(root, cpts)``, hidden states first expanded to ``k``; pseudo-count
        ``alpha`` (default ``alpha_``), data softening ``softening`` (default
        ``softening_``) and entropy regularisation ``entropy`` (default ``entropy_``);
        stopped early on a held-out score with ``early_stopping``
        (:class:`~ltm_sklearn._algorithms.em.EarlyStopping`), and by the training
        tolerance ``tol`` (default ``self.tol``). ``em_state``
        (:class:`~ltm_sklearn._algorithms.em.EMState`): filled with where EM stopped and
        kept on the result; if filled, EM goes on from it. Rows beyond this process
        (distributed data) take no state: their EM restarts from the result."""
        tol = self.tol if tol is None else tol
        noise = _EXPAND_NOISE if noise is None else noise
        alpha = self.alpha_ if alpha is None else alpha
        softening = self.softening_ if softening is None else softening
        entropy = self.entropy_ if entropy is None else entropy
        start = expand_states(tree, root, cpts, k, random_state=rng, noise=noise)
        max_iter = self.max_iter if max_iter is None else max_iter
        dtype = np.float32 if k >= _FLOAT32_STATES else np.float64
        distributed = beyond_memory(moments)
        if distributed:  # EM ends over the partitions below: no state to keep
            em_state = None
        root, cpts, objective, n_iter, converged, _, _ = polish(
            tree,
            *start,
            moments.codes,
            moments.sample_weight,
            moments.n_states,
            alpha=alpha,
            softening=softening,
            entropy=entropy,
            max_iter=max_iter,
            tol=tol,
            verbose=self.verbose,
            n_jobs=self.n_jobs,
            dtype=dtype,
            early_stopping=early_stopping,
            state=em_state,
        )
        if max_iter > 0 and distributed:
            # distributed data beyond the sample: EM goes on over every partition
            root, cpts, objective, more, converged, _ = fit_em(
                tree,
                root,
                cpts,
                moments.evidence(softening),
                None,
                alpha=alpha,
                entropy=entropy,
                max_iter=max_iter,
                tol=tol,
                verbose=self.verbose,
            )
            n_iter += more
        return FittedModel(tree, root, cpts, objective, n_iter, converged, extras, em_state)

    def _set_fitted(self, fitted):
        root, cpts = canonical_root(fitted.tree, fitted.root_marginal, fitted.cpts)
        self.root_marginal_ = root
        self.cpts_ = cpts
        self.hidden_state_counts_ = hidden_state_counts(fitted.tree, root, cpts)
        self.lower_bound_ = fitted.objective
        self.n_iter_ = fitted.n_iter
        self.converged_ = fitted.converged
        for name, value in fitted.extras.items():
            setattr(self, name, value)

    def _take_held_out_model(self):
        """``(split, model)``: the held-out split of this fit's selection (a
        :class:`~.selection.HeldOutSplit` of the rows given to ``fit``) and a copy of the
        estimator with the model the selection fitted on the split's training rows; or
        ``None`` when the fit kept none (:attr:`_keeps_held_out_fit`). The estimator
        forgets it."""
        kept = self.__dict__.pop("_held_out_fit", None)
        if kept is None:
            return None
        split, fitted, unseen_proba = kept
        model = copy.copy(self)
        model.tree_ = fitted.tree
        model._set_fitted(fitted)
        model.unseen_proba_ = unseen_proba
        return split, model

    # ------------------------------------------------------------------ scoring
    def _held_out_log_likelihood(self, fitted, moments, rows, unseen_proba):
        """Log-likelihood of the training ``rows`` of ``moments`` under ``fitted`` (the
        held-out rows of a selection)."""
        return self._leaves.log_likelihood(fitted, self._leaves.rows(moments, rows), unseen_proba)

    def _evidence(self, data):
        """Evidence of the observed nodes for encoded rows."""
        return self._leaves.evidence(data, self.unseen_proba_)

    def _log_likelihood(self, data, unseen_proba=None):
        """Log-likelihood of encoded rows; ``unseen_proba`` (default ``unseen_proba_``)
        is the likelihood of a category unseen in training, per column."""
        fitted = FittedModel(self.tree_, self.root_marginal_, self.cpts_)
        unseen = self.unseen_proba_ if unseen_proba is None else unseen_proba
        return self._leaves.log_likelihood(fitted, data, unseen)

    def score_samples(self, X):
        """Log-likelihood ``log p(x)`` of each row; NaN entries are marginalised out.

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        return self._log_likelihood(self._encode(self._validate_X(X, reset=False)))

    def _class_score_samples(self, X):
        """:meth:`score_samples` with a category unseen in training read as a missing
        entry: what :class:`~ltm_sklearn.LatentTreeClassifier` compares across its
        classes. The likelihood ``unseen_proba_`` of a new category is larger for a
        class of few rows (``1 / (n_j + W_j + 1)``), so read as evidence it would speak
        for the smallest class: on car one unseen value moved a row from 0.03 to 0.93."""
        check_is_fitted(self)
        data = self._encode(self._validate_X(X, reset=False))
        return self._log_likelihood(data, np.ones_like(self.unseen_proba_))

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
            Frequency weights (non-negative): a row of weight 2 counts as two copies of
            it, so scaling every weight changes the model as more rows would (the prior
            weighs less).

        Returns
        -------
        float
        """
        return mean_score(self.score_samples(X), sample_weight)

    def _shared_params(self):
        """Parameters that make per-class models of a classifier share this fit's tree
        (and its leaves' settings)."""
        return {"tree": self.tree_, **self._leaves.shared_params()}

    def _shared_encoding(self, X, declared):
        """Parameters that make per-class models of a classifier share one encoding,
        learned from all rows (``declared``: pandas' declared categories)."""
        return self._make_leaves().shared_encoding(X, declared)

    # ------------------------------------------------------------------ tags
    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.categorical = True
        return tags
