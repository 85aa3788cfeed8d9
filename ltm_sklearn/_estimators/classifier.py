"""Classification by latent tree densities: one per class, one over the columns and the
class, or the two pooled.

One concept, the :class:`LatentTreeClassifier` estimator: its models, their out-of-fold
choice of ``k'`` and of the hidden variables' form, and its posteriors; about a quarter of
the module is the class docstring. The calibration of the posterior is in
:mod:`.calibration`.
"""

from __future__ import annotations

import contextlib
import functools
import re
import time
from numbers import Integral
from typing import NamedTuple

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, ClassifierMixin, MetaEstimatorMixin, clone
from sklearn.metrics import accuracy_score
from sklearn.utils import assert_all_finite, check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import (
    check_is_fitted,
    column_or_1d,
    has_fit_parameter,
    validate_data,
)

from .._engine.encoding import declared_categories
from .._engine.mixed_columns import categorical_mask
from .._engine.row_keys import holdout_weights, row_values
from .._engine.threads import block_threads
from .._engine.user_warnings import collected_warnings, warn
from .._engine.workers import run_in_workers, worth_workers
from .base import BaseLatentTree
from .calibration import choose_pool, pooled_log_posterior, tempered_log_posterior
from .kernel import KernelLatentTree
from .selection import MIN_SPLIT_WEIGHT, TIE_TOL, VALIDATION_SHARE, best_key, paired_se
from .sklearn_internals import (
    N_JOBS_CONSTRAINT,
    HasMethods,
    Interval,
    StrOptions,
    check_sample_weight,
    fit_context,
    safe_indexing,
)
from .spectral import SpectralLatentTree
from .structures import (
    AUTO_HIDDEN_STATES,
    estimable_rows,
    estimable_states,
    most_estimable_states,
)
from .validation import refuse_dask, reset_fitted_state

__all__ = ["LatentTreeClassifier"]

#: ``n_hidden_states="auto"`` compares its candidates by out-of-fold log-loss over this
#: many folds (keyed on the rows' values and classes) when the training rows are at most
#: ``_AUTO_CV_ROWS`` (a single 20% split above: 400 held-out rows or more, and one fit
#: per candidate; on the 4,813 training rows of marketing it chose the same k' and model
#: as five folds in half the time, 15 s instead of 30 s)
_AUTO_FOLDS = 5
_AUTO_CV_ROWS = 2000
#: the most hidden states the default estimator's joint model gets for its classes (a
#: state per class; a ``k' x k'`` table on every edge makes the E-step grow with the
#: square, so a table of hundreds of classes keeps this many)
_JOINT_MAX_STATES = 32
#: the name of the class column of the joint model (underscores are added while a column
#: of X has it)
_LABEL_COLUMN = "__class__"
#: the structure of the default estimator's models: a hidden Chow-Liu tree, learned from
#: mutual information at any k' (the race of structure="auto" costs about three times
#: the fit and, on a class's few held-out rows, chooses little better: "Tuning
#: constants" in docs/architecture.md)
DEFAULT_STRUCTURE = "hclt"


class LatentTreeClassifier(ClassifierMixin, MetaEstimatorMixin, BaseEstimator):
    """Generative classifier by latent tree densities.

    Two models of the pair (columns, class), and their pool:

    * ``"per_class"``: ``fit`` clones ``estimator`` once per class and fits each clone on
      the rows of its class; ``predict_proba`` is Bayes' rule ``P(c | x) = P(c) p(x | c)
      / sum_c' P(c') p(x | c')`` with the clones' ``score_samples`` as ``log p(x | c)``
      (the latent tree classifier of Wang, Zhang, Chen & Poon, "Latent Tree Classifier",
      ECSQARU 2011). The class models of a discrete estimator share one encoding of the
      categories (learned from all rows), so every ``p(x | c)`` is normalised over the
      same configurations. A category no training row holds is read as a missing
      entry: its likelihood, larger under a class of few rows, says nothing of the
      class.
    * ``"joint"``: one clone of ``estimator`` fitted on the columns and the class as one
      more observed column; ``predict_proba`` is its exact conditional ``P(c | x)``
      (:meth:`~ltm_sklearn.SpectralLatentTree.conditional_proba`). Structure and hidden
      states are shared by the classes, and the class sits in the tree where it
      explains the columns best (as the class of a tree-augmented naive Bayes model
      reaches every column: Friedman, Geiger & Goldszmidt, "Bayesian Network
      Classifiers", Machine Learning 29, 1997). The class hangs below a hidden node, so
      ``P(c | x) = sum_h P(c | h) P(h | x)`` over that node's ``k'`` states: with fewer
      states than classes every row's posterior lies in a ``k'``-dimensional family,
      and the default estimator's joint model gets a state per class.
    * ``"pooled"``: a linear opinion pool of the two posteriors, ``w P_per_class(c | x)
      + (1 - w) P_joint(c | x)`` (each part is a normalised model, and so is the pool's
      conditional); ``w = 1/2`` unless ``calibrate`` chooses it.

    With ``calibrate=True`` (the default) the per-class posterior is Bayes' rule at a
    temperature ``T >= 1``, ``P_T(c | x) ∝ P(c) p(x | c)^(1 / T)``, and ``T`` and the
    pool's weight ``w`` are chosen by log-loss on held-out rows (about a fifth of every
    row's weight, by keys of the row's values; every model refitted on the rest, the
    joint model with the choices - ``k'``, structure, members - of its fit on every
    row; on more than 2,000 rows, where the joint model chose on held-out rows of its
    own, those rows and its model of the rest), and kept only where they beat ``w =
    1/2, T = 1`` (``T = 1`` for ``"per_class"``) by more than one standard error of the
    paired difference.
    Densities fitted one class at a time, each with more parameters than its rows pin
    down, give overconfident posteriors (temperature scaling: Guo, Pleiss, Sun &
    Weinberger, "On Calibration of Modern Neural Networks", ICML 2017); the class
    densities themselves are unchanged.
    This costs the fits once more on four fifths of the rows.

    Missing entries are marginalised in every model. ``score`` is the accuracy, as for
    every scikit-learn classifier.

    Measured (stratified 5-fold log-loss, the default estimator;
    ``benchmarks/results/bench_classify.md``): the per-class models lead on tables whose
    classes differ in structure (lymphography 0.019 against one-hot
    ``LogisticRegression``'s 0.071), the joint model where the classes share it (german
    0.531 against 0.534 per class). The calibrated pool follows the better part: it is at
    or below the better of ``CategoricalNB`` and ``LogisticRegression`` on six of the
    seven bundled categorical tables (breast 0.540, monk2 0.052, car 0.051, lymphography
    0.029, contraceptive 1.013, german 0.516) and above it on marketing (1.757 against
    1.752; its nine classes need the joint model's state per class); so it is the
    default. ``n_hidden_states="auto"`` leads on marketing (1.707) and german (0.509) in
    four to seven times the fit. ``model="select"`` costs about four times the
    fit. Gradient boosting wins the two tables whose class is a rule of the columns
    (monk2 0.0005, car 0.014).

    Parameters
    ----------
    estimator : estimator object, default=None
        A density estimator of this package (``fit``, ``score_samples``, a ``tree``
        parameter); ``None`` means ``SpectralLatentTree(structure="hclt")``: a hidden
        Chow-Liu tree for every model, at its ``k' = 2`` for the class models and with
        ``k'`` raised to the number of classes (as far as the rows estimate it) for the
        joint model. ``SpectralLatentTree()`` races its six structures
        on held-out rows instead, in 2.5-6 times the fit: it leads on monk2 (0.031
        against 0.052) and by 0.001-0.002 on lymphography and contraceptive, and is
        0.003-0.024 worse on breast, car, german and marketing
        (``benchmarks/results/bench_classify.md``).
    model : {"auto", "pooled", "per_class", "joint", "select"}, default="auto"
        Which model gives the class posteriors (see above). ``"select"``: the one of
        lowest out-of-fold log-loss on the training rows (3 folds keyed on the rows'
        values and classes, about four times the fit; ties go to the pool), with the
        scores in ``model_scores_``.
        ``"auto"``: ``"pooled"`` with an estimator of this package that learns its
        tree (a :class:`~ltm_sklearn.KernelLatentTree`'s joint model has the class
        declared categorical), ``"per_class"`` with a given tree, given categories or
        bandwidths (over the columns only), ``hidden="gaussian"`` (no categorical
        column) or another estimator.
    calibrate : bool, default=True
        Choose the temperature of the per-class posterior and the weight of the pool on
        held-out rows (see above), in ``temperature_`` and ``pool_weight_``. ``False``:
        Bayes' rule as it is, and the mean of the two posteriors for the pool. With
        ``n_hidden_states="auto"`` and ``model="per_class"`` the held-out rows are those
        of the choice of ``k'`` (no further fits). The joint model's posterior is its
        exact conditional either way.
    shared_tree : bool, default=False
        ``False``: every class learns its own tree (measured better on the bundled
        categorical tables: log-loss 0.044 vs 0.094 on monk2, 0.050 vs 0.057 on car, k'
        = 1 and 2). ``True``: one tree learned from all rows (an ``estimator`` fitted on
        the whole data) serves every class model, and a kernel model also shares its
        bandwidths, so that the class densities smooth alike. Ignored when ``estimator``
        has a given ``tree``; an error for an ``estimator`` without a ``tree``
        parameter.
    n_hidden_states : int, "auto" or None, default=None
        ``None`` keeps the ``estimator``'s own; an integer is set on every class model.
        ``"auto"`` chooses the class models for classification inside ``fit``, by
        out-of-fold log-loss on the training rows (5 folds when at most 2,000 rows are in
        classes of 5 rows or more, a 20% split above, each holding out the share of
        every row's weight whose keys of the row's values and class fall in it: the
        same folds in any order of the rows and for an integer weight as for copies;
        classes of fewer than 5 rows stay whole in training). The candidates: the independence model
        of each class (naive Bayes: ``structure="star"``, ``k' = 1``, add-one smoothing -
        ``CategoricalNB``'s model - with the default estimator or a structure of
        ``"auto"``; a :class:`~ltm_sklearn.KernelLatentTree` keeps its own ``alpha``),
        then the
        estimator's own structure at ``k' = 1, 2, 3, 4, 8, ...`` (from ``k' = 2`` with the
        default estimator, whose ``k' = 1`` model is the independence model)
        (:data:`~ltm_sklearn._estimators.structures.AUTO_HIDDEN_STATES`, at most the rows of the
        smallest class, or of the smallest class of 5 rows or more when the independence
        model is a candidate: a smaller class gets it when ``k'`` exceeds its rows),
        growing while the log-loss improves by more than the standard error of the
        paired difference (the first ``k'`` that does not stops the growth and stays a
        candidate). With ``structure="auto"`` each ``k'`` first fits the class models
        on all their rows, where each chooses its structure, and the folds' fits keep it
        (one structure per fit instead of the whole race: on the bundled car, german and
        marketing tables the classifier fits in 0.4-0.7 of the time, with the same
        log-loss). The candidate with the lowest log-loss (within 1e-6: the simpler)
        keeps those models; otherwise it is fitted on all rows once chosen.
        ``GridSearchCV`` with ``scoring="neg_log_loss"``
        over the estimator's ``n_hidden_states`` remains the alternative.
        A :class:`~ltm_sklearn.KernelLatentTree` with ``hidden="auto"`` has the form of
        its hidden variables chosen the same way, once for all classes: the discrete
        form (at the ``k'`` above when ``"auto"``) against the Gaussian one, by
        out-of-fold log-loss (ties: discrete; tables with a categorical column keep the
        discrete form). Per class, the Gaussian form often fits the density better and
        classifies worse: on the segment table its per-class fits are overconfident
        (log-loss 7.9 vs 0.51 on one fold).
    random_state : int, RandomState instance or None, default=None
        The held-out folds of ``n_hidden_states="auto"`` (``None``: fixed folds) and,
        when given, the ``random_state`` of class models whose estimator has none, so
        that the classifier is reproducible.
    n_jobs : int, default=None
        Worker processes for the class models' fits of the out-of-fold choices
        (``n_hidden_states="auto"``, an estimator's ``hidden="auto"``: every fold's fits
        side by side); ``None`` uses the cores the process may use (at most
        ``OMP_NUM_THREADS`` when it is set, as in the workers of an outer ``n_jobs``),
        ``1`` fits them here. The final models are fitted here, and the models are the
        same whatever it is.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    class_prior_ : ndarray of shape (n_classes,)
        Weighted class frequencies.
    model_ : str
        The model used: ``"pooled"``, ``"per_class"`` or ``"joint"``.
    model_scores_ : dict
        Out-of-fold log-loss of each model (``model="select"`` only).
    estimators_ : list of estimators
        The fitted density of every class, in the order of ``classes_``
        (``model_`` ``"per_class"`` or ``"pooled"``).
    joint_estimator_ : estimator
        The density over the columns and the class, whose last column is the class
        index into ``classes_`` (``model_`` ``"joint"`` or ``"pooled"``).
    n_hidden_states_ : int
        ``k'`` of the class models, or of the joint model with ``model_="joint"``
        (``n_hidden_states`` not None only).
    n_hidden_states_scores_ : dict
        Out-of-fold log-loss per ``k'`` tried with the estimator's own structure
        (``n_hidden_states="auto"`` only). With the default estimator ``k' = 1`` is the
        independence candidate's score (its hidden Chow-Liu tree at one state is that
        model, up to the smoothing), which is not fitted twice.
    independence_score_ : float
        Out-of-fold log-loss of the independence candidate (``n_hidden_states="auto"``
        with the default estimator or one whose structure is ``"auto"``).
    hidden_ : str
        The form set on every class model (an estimator with ``hidden="auto"`` only).
    hidden_scores_ : dict
        Out-of-fold log-loss of each form (an estimator with ``hidden="auto"`` only).
    pool_weight_ : float
        Weight ``w`` of the per-class posterior (1 for ``"per_class"``, 0 for
        ``"joint"``).
    temperature_ : float
        Temperature ``T`` of the per-class posterior (1: Bayes' rule).
    calibration_scores_ : dict
        Held-out log-loss of ``"default"`` (``w = 1/2`` or 1, ``T = 1``) and of
        ``"chosen"`` (the minimiser, kept when better beyond noise); ``calibrate=True``
        with at least 10 rows held out only.
    class_params_ : dict
        The parameters ``n_hidden_states="auto"`` set on every class model, e.g.
        ``{"n_hidden_states": 2}`` or ``{"structure": "star", "n_hidden_states": 1,
        "alpha": 1.0}``.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` has feature names.

    Examples
    --------
    >>> import numpy as np
    >>> from ltm_sklearn import LatentTreeClassifier, SpectralLatentTree
    >>> from ltm_sklearn.datasets import LatentTreeModel, balanced_binary_tree
    >>> tree = balanced_binary_tree(6)
    >>> a = LatentTreeModel.random(tree, 2, 3, noise=0.4, random_state=0)
    >>> b = LatentTreeModel.random(tree, 2, 3, noise=0.4, random_state=1)
    >>> X = np.vstack([a.sample(2000, random_state=0), b.sample(2000, random_state=1)])
    >>> y = np.repeat(["a", "b"], 2000)
    >>> clf = LatentTreeClassifier(SpectralLatentTree(2, tree=tree)).fit(X, y)
    >>> clf.predict_proba(X[:2]).sum(axis=1)
    array([1., 1.])
    >>> bayes = np.mean(np.where(b.log_likelihood(X) > a.log_likelihood(X), "b", "a") == y)
    >>> bool(clf.score(X, y) > bayes - 0.02)
    True
    """

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["fit", "score_samples"]), None],
        "model": [StrOptions({"auto", "pooled", "per_class", "joint", "select"})],
        "shared_tree": ["boolean"],
        "n_hidden_states": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"}), None],
        "calibrate": ["boolean"],
        "random_state": ["random_state"],
        "n_jobs": N_JOBS_CONSTRAINT,
    }

    def __init__(
        self,
        estimator=None,
        *,
        model="auto",
        shared_tree=False,
        n_hidden_states=None,
        calibrate=True,
        random_state=None,
        n_jobs=None,
    ):
        self.estimator = estimator
        self.model = model
        self.shared_tree = shared_tree
        self.n_hidden_states = n_hidden_states
        self.calibrate = calibrate
        self.random_state = random_state
        self.n_jobs = n_jobs

    def _base_estimator(self):
        if self.estimator is not None:
            return self.estimator
        return SpectralLatentTree(structure=DEFAULT_STRUCTURE)

    @fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y, sample_weight=None):
        """Fit one density per class.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            What the density estimator reads (categories, or numbers for
            :class:`~ltm_sklearn.KernelLatentTree`); NaN marks a missing entry.
        y : array-like of shape (n_samples,)
            Class labels (no missing labels).
        sample_weight : array-like of shape (n_samples,), default=None
            Frequency weights (non-negative): a row of weight 2 counts as two copies of
            it, in the class models and the class prior.

        Returns
        -------
        self
        """
        # the class models and the joint model read the same columns: a warning about
        # them is issued once, not once a model (a kernel model's column of a few numbers
        # warned ten times), also when the fit fails
        caught = []
        try:
            # in this thread only: warnings.catch_warnings would change the filters of
            # every thread (two fits in two threads left the process recording)
            with collected_warnings() as caught:
                self._fit(X, y, sample_weight)
        finally:
            _issue_once(caught)
        return self

    def _fit(self, X, y, sample_weight):
        reset_fitted_state(self)
        # its class models are fitted on rows of X in memory
        refuse_dask(X, type(self).__name__, in_fit=True)
        declared = declared_categories(X)
        if isinstance(X, pd.DataFrame):
            validate_data(self, X, skip_check_array=True)
        else:
            X = validate_data(self, X, dtype=None, ensure_all_finite="allow-nan")
        y = column_or_1d(y, warn=True)
        if y.shape[0] != X.shape[0]:
            raise ValueError(f"X has {X.shape[0]} rows but y has {y.shape[0]} labels.")
        missing = pd.isna(y)
        if np.any(missing):
            raise ValueError(
                f"y has {int(np.sum(missing))} missing labels (None/NaN): every row needs a "
                "class; drop the unlabelled rows first."
            )
        if y.dtype.kind == "f":  # named here, before a cast of an infinity warns
            assert_all_finite(y, input_name="y")
        check_classification_targets(y)
        sample_weight = check_sample_weight(
            sample_weight, np.empty((len(y), 0)), dtype=float, ensure_non_negative=True
        )
        if not np.all(sample_weight > 0):  # a row of weight zero is a row left out
            keep = np.flatnonzero(sample_weight > 0)
            left_out = np.setdiff1d(np.unique(y), np.unique(y[keep]))
            if len(left_out):
                warn(
                    f"The classes {left_out.tolist()} have rows of weight zero only: they "
                    "are not classes of the model (classes_ and the columns of "
                    "predict_proba list the classes with a positive weight).",
                    UserWarning,
                )
            X, y, sample_weight = safe_indexing(X, keep), y[keep], sample_weight[keep]
        self.classes_, y_idx = np.unique(y, return_inverse=True)
        if len(self.classes_) < 2:
            raise ValueError(
                "The number of classes has to be greater than one; got "
                f"{len(self.classes_)} class (rows of positive weight)."
            )
        base = self._base_estimator()
        if self.n_hidden_states is not None and "n_hidden_states" not in base.get_params():
            raise ValueError(
                f"n_hidden_states={self.n_hidden_states!r} is set on every class model, and "
                f"{type(base).__name__} has no n_hidden_states parameter: set its own (such "
                "as n_components) on the estimator, and leave n_hidden_states=None."
            )
        self.model_ = self._resolve_model(base)
        if not has_fit_parameter(base, "sample_weight"):
            raise TypeError(
                f"LatentTreeClassifier fits its estimator with sample_weight (its folds and "
                f"the class models' rows), which {type(base).__name__}.fit does not take: "
                "use one of this package's estimators, or a density estimator whose fit "
                "takes sample_weight."
            )
        if self.model_ == "select":
            self.model_scores_ = self._model_scores(X, y, y_idx, sample_weight)
            # the lowest log-loss; ties within TIE_TOL: the first of the order listed
            listed = list(self.model_scores_)
            negated = {m: -v for m, v in self.model_scores_.items()}
            self.model_ = best_key(negated, order=listed.index)
        self.class_prior_ = self._class_prior(y_idx, sample_weight)
        if self.model_ != "per_class":
            # on many rows the pool is calibrated on the held-out rows of the joint
            # model's own selection, where it made one (see _joint_held_out)
            keep = self.calibrate and self.model_ == "pooled" and _many_rows(y_idx)
            self.joint_estimator_ = self._fit_joint(base, X, y_idx, sample_weight, keep=keep)
        self.pool_weight_ = {"per_class": 1.0, "pooled": 0.5, "joint": 0.0}[self.model_]
        self.temperature_ = 1.0
        if self.model_ != "joint":
            shared, scores = self._fit_per_class(base, X, y_idx, sample_weight, declared)
            self._warn_of_fewer_states(base, shared, y_idx)
            if self.calibrate:
                default = (self.pool_weight_, self.temperature_)
                (self.pool_weight_, self.temperature_), self.calibration_scores_ = self._calibrate(
                    base, shared, X, y_idx, sample_weight, scores, default
                )
        elif self.n_hidden_states is not None:
            # the joint model's own k' (chosen in its fit with "auto")
            chosen = getattr(self.joint_estimator_, "n_hidden_states_", self.n_hidden_states)
            if not isinstance(chosen, str):
                self.n_hidden_states_ = int(chosen)
        return self

    def _model_scores(self, X, y, y_idx, sample_weight):
        """``model="select"``: out-of-fold log-loss of the pooled, per-class and joint
        models (stratified 3-fold; the pool's posteriors are the mean of the other two's,
        so two fits per fold serve all three)."""
        folds = self._selection_folds(
            X, y_idx, sample_weight, "model='select'", "Pass model='pooled' (the default).",
            n_splits=3,
        )  # fmt: skip
        losses = {"pooled": [], "per_class": [], "joint": []}
        weights = []
        for train, val, w_train, w_val in folds:
            X_train, X_val = safe_indexing(X, train), safe_indexing(X, val)
            log_proba = {}
            for model in ("per_class", "joint"):
                # the chosen model is calibrated afterwards (on its own held-out rows)
                part = clone(self).set_params(model=model, calibrate=False)
                part.fit(X_train, y[train], sample_weight=w_train)
                # columns in the order of this fit's classes (a class absent from the
                # training fold gets probability 0)
                out = np.full((len(val), len(self.classes_)), -np.inf)
                out[:, np.searchsorted(self.classes_, part.classes_)] = part.predict_log_proba(
                    X_val
                )
                log_proba[model] = out
            log_proba["pooled"] = np.logaddexp(log_proba["per_class"], log_proba["joint"])
            log_proba["pooled"] -= np.log(2)
            rows = np.arange(len(val))
            for model, lp in log_proba.items():
                losses[model].append(-lp[rows, y_idx[val]])
            weights.append(w_val)
        w = np.concatenate(weights)
        return {m: float(np.average(np.concatenate(v), weights=w)) for m, v in losses.items()}

    def _resolve_model(self, base):
        """The model of ``model="auto"``, and a clear error for a joint model that the
        estimator cannot be."""
        ours = isinstance(base, BaseLatentTree)
        params = base.get_params()
        # the joint model's table has one more column than X: a tree given over X's
        # columns, or their categories or bandwidths given one by one, do not cover it
        # (and the Gaussian form of a kernel model has no categorical column to be the
        # class)
        learns_tree = (
            params.get("tree") is None
            # without a structure parameter (QuartetTreeLearner) it learns its own tree
            and isinstance(params.get("structure", "learned"), str)
            and isinstance(params.get("categories", "auto"), str)
            and params.get("bandwidth") is None
            and params.get("hidden") != "gaussian"
        )
        if self.model == "auto":
            return "pooled" if ours and learns_tree else "per_class"
        if self.model != "per_class" and not ours:
            raise ValueError(
                f"model={self.model!r} fits one density over the columns and the class, "
                "which needs an estimator of this package that holds the class as a "
                f"categorical column; {type(base).__name__} does not. Use model='per_class'."
            )
        if self.model != "per_class" and not learns_tree:
            raise ValueError(
                f"model={self.model!r} learns a tree over the columns and the class; the "
                "estimator has a given tree, or given categories or bandwidths, over the "
                "columns only, or continuous hidden variables (hidden='gaussian'), which "
                "cannot have the class as a column. Use model='per_class', or an estimator "
                "without them."
            )
        return self.model

    def _with_label(self, X, codes):
        """``X`` with the class codes as one more column (the last). A table whose
        column names are not all strings gets them as strings (a mixed set of names is
        not a set of feature names)."""
        if isinstance(X, pd.DataFrame):
            Z = X.copy()
            if not all(isinstance(c, str) for c in Z.columns):
                Z.columns = [str(c) for c in Z.columns]
            name = _LABEL_COLUMN
            while name in Z.columns:
                name = f"_{name}_"
            Z[name] = codes
            return Z
        X = np.asarray(X)
        dtype = X.dtype if X.dtype.kind in "iuf" else object
        return np.column_stack([X.astype(dtype, copy=False), codes.astype(dtype)])

    def _seeded(self, base):
        """``{"random_state": seed}`` for models whose estimator has no random state of
        its own when the classifier has one (so that it is reproducible), else ``{}``."""
        if self.random_state is not None and base.get_params().get("random_state", 0) is None:
            return {"random_state": check_random_state(self.random_state).randint(2**31 - 1)}
        return {}

    def _fit_joint(self, base, X, y_idx, sample_weight, like=None, keep=False, trial=False):
        """One density over the columns and the class index (a kernel model gets the
        class declared categorical: its column mask, with the class column appended).
        ``like``: a fitted joint model whose choices (each ``"auto"`` parameter's fitted
        value) the fit takes instead of choosing again. ``keep``: an estimator of this
        package keeps its selection's model of the training rows
        (``_take_held_out_model``). ``trial``: a fit to score and drop
        (:func:`_as_trial`)."""
        params = self._seeded(base)
        n_rows = estimable_rows(sample_weight)
        if self.n_hidden_states is not None:
            params["n_hidden_states"] = self.n_hidden_states
        elif self.estimator is None:
            params["n_hidden_states"] = self._joint_states(base, n_rows)
        if like is not None:
            params.update(_choices_of(like))
            k = params.get("n_hidden_states")
            if isinstance(k, Integral) and not estimable_states(k, n_rows):
                # the fit on every row may choose more states than a part of its rows can
                # estimate (lymphography: k' = 32 on 118 rows, 100 in the calibration
                # fold): the most that these rows can
                params["n_hidden_states"] = most_estimable_states(AUTO_HIDDEN_STATES, n_rows)
        if isinstance(base, KernelLatentTree):
            mask = categorical_mask(X, base.categorical_features)
            params["categorical_features"] = np.append(mask, True)
        est = clone(base).set_params(**params)
        if trial:
            _as_trial(est)
        Z = self._with_label(X, y_idx)
        label = repr(str(Z.columns[-1])) if isinstance(Z, pd.DataFrame) else str(Z.shape[1] - 1)
        # the class codes are categories, however many: the user gave no such column
        with collected_warnings(
            "ignore", message=f"Column {re.escape(label)} has .* distinct whole numbers"
        ):
            if not (keep and isinstance(est, BaseLatentTree)):
                return est.fit(Z, sample_weight=sample_weight)
            est._keeps_held_out_fit = True  # for this fit only
            try:
                return est.fit(Z, sample_weight=sample_weight)
            finally:
                del est._keeps_held_out_fit

    def _joint_states(self, base, n_rows):
        """``k'`` of the default estimator's joint model: its own, raised to the number
        of classes (at most ``_JOINT_MAX_STATES``, and as far as ``n_rows`` rows
        estimate).
        The class is a column below a hidden node, so ``P(c | x) = sum_h P(c | h) P(h |
        x)`` over that node's ``k'`` states: with fewer states than classes the
        posteriors of every row lie in a ``k'``-dimensional family (on marketing's nine
        classes, k' = 2 gave the joint model a log-loss of 1.97 against the per-class
        models' 1.79)."""
        k = base.get_params()["n_hidden_states"]
        top = min(len(self.classes_), _JOINT_MAX_STATES)
        wanted = most_estimable_states(range(k, top + 1), n_rows)
        return k if wanted is None else wanted

    def _joint_log_proba(self, X, est=None):
        """``log P(c | x)`` of the joint model (``est``, default ``joint_estimator_``),
        columns in the order of ``classes_``."""
        est = self.joint_estimator_ if est is None else est
        d = len(est.categories_) - 1
        Z = self._with_label(X, np.zeros(len(X), dtype=np.int64))  # the class is ignored
        proba = est.conditional_proba(Z, target=d)
        with np.errstate(divide="ignore"):
            return np.log(proba)

    def _fit_per_class(self, base, X, y_idx, sample_weight, declared):
        """The per-class models (``n_hidden_states="auto"`` chooses them first); returns
        the parameters set on every class model and, when the choice of ``k'`` made them,
        the chosen models' out-of-fold scores (an :class:`_OutOfFold`, else ``None``)."""
        shared = {}
        if isinstance(base.get_params().get("categories"), str):
            shared = base._shared_encoding(X, declared)
        shared.update(self._seeded(base))
        # the form of a continuous model's hidden variables, chosen for classification
        choose_form = (
            base.get_params().get("hidden") == "auto"
            and clone(base).set_params(**shared)._fixed_form(X) is None
        )
        if choose_form:
            shared["hidden"] = "discrete"  # k' is chosen for the discrete form
            # under 10 rows to hold out, the discrete form (as the estimator keeps it)
            choose_form = _held_out_rows(y_idx).size >= MIN_SPLIT_WEIGHT
        folds = loss = fitted = scores = None
        if self.n_hidden_states == "auto" or choose_form:
            if self.n_hidden_states == "auto":
                what = ("n_hidden_states='auto'", "Pass an integer n_hidden_states.")
            else:
                what = ("hidden='auto'", "Give the estimator hidden='discrete' or 'gaussian'.")
            folds = self._selection_folds(X, y_idx, sample_weight, *what)
        if self.n_hidden_states == "auto":
            self.class_params_, loss, fitted, scores = self._choose_hidden_states(
                base, shared, X, y_idx, sample_weight, folds
            )
            shared.update(self.class_params_)
        elif self.n_hidden_states is not None:
            shared["n_hidden_states"] = int(self.n_hidden_states)
        if choose_form:
            self.hidden_ = self._choose_form(base, shared, X, y_idx, sample_weight, folds, loss)
            shared["hidden"] = self.hidden_
            if self.hidden_ != "discrete":
                scores = None  # the chosen candidate's scores are those of the discrete form
        if "n_hidden_states" in shared:
            self.n_hidden_states_ = shared["n_hidden_states"]
        if fitted is not None and shared.get("hidden", "discrete") == "discrete":
            # the chosen candidate's models on every row, fitted during the choice with
            # these parameters: their warnings now reach the user's filters
            self.estimators_ = [_replay(model, caught) for model, caught in fitted]
        else:
            jobs = self._class_jobs(base, shared, X, y_idx, sample_weight)
            self.estimators_ = [_fit_class_model(*job) for job in jobs]
        return shared, scores

    def _calibrate(self, base, shared, X, y_idx, sample_weight, scores, default):
        """``calibrate=True``: ``((pool_weight_, temperature_), calibration_scores_)``
        by :func:`~.calibration.choose_pool` on held-out rows. For the pool, those of the
        joint model's own selection, when it made one (:meth:`_joint_held_out`), with
        the class models (``base`` + ``shared``) fitted on its training rows; else those
        of ``scores`` (the per-class model's out-of-fold scores of the choice of ``k'``),
        else those of :meth:`_calibration_split` with the models (and the joint model of
        the pool, with the choices of its fit on every row) fitted on the rest. Under 10
        rows to hold out: ``default``."""
        joint = None
        if self.model_ == "pooled":
            kept = self._joint_held_out(X, y_idx, sample_weight)
            if kept is not None:
                fold, joint = kept
                scores = self._out_of_fold(base, shared, {}, [fold], X, y_idx, sample_weight)
        if scores is None or (self.model_ == "pooled" and joint is None):
            fold = self._calibration_split(X, y_idx, sample_weight)
            if fold is None:
                return default, {}
            scores = self._out_of_fold(base, shared, {}, [fold], X, y_idx, sample_weight)
        if self.model_ == "pooled" and joint is None:
            train, val, w_train, _ = fold
            with collected_warnings("ignore"):  # a trial fit: the final fit warns
                # the choices of the joint model on every row (its k', members, prior):
                # choosing them again on the calibration fold's rows cost 3-5x the fit
                train_X, like = safe_indexing(X, train), self.joint_estimator_
                est = self._fit_joint(base, train_X, y_idx[train], w_train, like, trial=True)
            joint = self._joint_log_proba(safe_indexing(X, val), est)
        return choose_pool(
            scores.log_likelihood, scores.log_prior, joint, scores.y, scores.weights, default
        )

    def _joint_held_out(self, X, y_idx, sample_weight):
        """``(fold, log P(c | x))``: the held-out rows of the joint model's selection
        as a fold of :meth:`_calibration_fold`, and the class posteriors of those rows
        under the model that the selection fitted on the fold's training rows; ``None``
        without such a model (kept on more than ``_AUTO_CV_ROWS`` rows only), or under 10
        rows held out.

        That model was chosen and stopped on those rows, so they rate it a little
        better than new rows would, and the pool leans to it: on the six smaller
        bundled tables (20-240 held-out rows) test log-loss rose on 10 of 30 splits, by
        up to 0.086 (four of breast's five, 40 rows). On marketing's 960 it did not
        (five splits, mean 1.7102 against 1.7110 with the joint model fitted again on a
        calibration fold, and 8.6 s a fit against 13.3)."""
        kept = getattr(self.joint_estimator_, "_take_held_out_model", lambda: None)()
        if kept is None:
            return None
        split, model = kept
        held, train = np.zeros(len(y_idx)), np.zeros(len(y_idx))
        held[split.rows], train[split.train] = split.weights, split.train_weights
        fold = self._calibration_fold(held, train, y_idx, sample_weight)
        if fold is None:
            return None
        return fold, self._joint_log_proba(safe_indexing(X, fold[1]), model)

    def _class_prior(self, y_idx, sample_weight):
        """Weighted class frequencies of the rows with classes ``y_idx``."""
        weights = np.bincount(y_idx, weights=sample_weight, minlength=len(self.classes_))
        return weights / weights.sum()

    def _class_jobs(self, base, shared, X, y_idx, sample_weight, per_class=None):
        """The fits of the class models of the rows ``X`` with classes ``y_idx``: one
        ``(estimator, rows of X, their weights, class label)`` per class; ``per_class``:
        parameters of each class's model over ``shared`` (one dict per class)."""
        shared = dict(shared)
        if self.shared_tree and "tree" not in base.get_params():
            raise ValueError(
                "shared_tree=True gives the class models the tree of one fit on every row "
                f"through the estimator's tree parameter, which {type(base).__name__} does "
                "not have."
            )
        if self.shared_tree and base.get_params()["tree"] is None:
            pooled = _as_trial(clone(base).set_params(**shared))  # for its tree only
            pooled.fit(X, sample_weight=sample_weight)
            shared.update(pooled._shared_params())
        jobs = []
        k = shared.get("n_hidden_states", base.get_params().get("n_hidden_states"))
        independence = self._independence_candidate(base)
        for c in range(len(self.classes_)):
            rows = np.flatnonzero(y_idx == c)
            params = shared if per_class is None else dict(shared, **per_class[c])
            # a class with fewer rows than its model can be estimated from (more hidden
            # states than rows, or a held-out choice on under 10 rows) gets the
            # independence model: its prior and smoothed category tables; with the
            # structure the user fixed, that structure with the states its rows estimate
            if _too_few_rows(k, len(rows)):
                if independence is not None:
                    params = dict(params, **independence)
                else:
                    params = dict(params, n_hidden_states=_states_for_rows(k, len(rows)))
            est = clone(base).set_params(**params)
            jobs.append((est, safe_indexing(X, rows), sample_weight[rows], self.classes_[c]))
        return jobs

    def _run_trial_fits(self, jobs, record=False):
        """The fitted estimators of ``jobs`` (:meth:`_class_jobs`) of a held-out choice, in
        order. The first is fitted here, and the others side by side in worker processes
        when ``n_jobs`` allows several and they are worth them, as long as the first took
        (:func:`~ltm_sklearn._engine.workers.worth_workers`); each fit is seeded alike
        wherever it runs, so the models are the same. The package's warnings in them are
        dropped: the final models' fits on every row warn about what concerns the user.
        ``record``: ``(model, warnings)`` pairs instead, for fits that may become the
        final models (:func:`_replay`)."""
        if not jobs:
            return []
        start = time.perf_counter()
        # a recorded fit may become a final model; the others are trials
        fit = functools.partial(_fit_class_model, quiet=True, record=record, trial=not record)
        out = [fit(*jobs[0])]
        rest = jobs[1:]
        n_jobs = min(block_threads(self.n_jobs), len(rest))
        if worth_workers(n_jobs, (time.perf_counter() - start) * len(rest)):
            return out + run_in_workers(fit, rest, n_jobs)
        return out + [fit(*job) for job in rest]

    def _warn_of_fewer_states(self, base, shared, y_idx):
        """Name the classes whose model has fewer hidden states than asked, for want of
        rows, with the structure the user fixed (:meth:`_class_jobs`)."""
        k = shared.get("n_hidden_states", base.get_params().get("n_hidden_states"))
        if self._independence_candidate(base) is not None:
            return
        counts = np.bincount(y_idx, minlength=len(self.classes_))
        few = [(self.classes_[c], n) for c, n in enumerate(counts) if _too_few_rows(k, n)]
        if few:
            # numpy labels as Python values (1, not np.int64(1))
            labels = [label.item() if isinstance(label, np.generic) else label for label, _ in few]
            listed = ", ".join(f"{label!r} ({n} rows)" for label, (_, n) in zip(labels, few[:5]))
            warn(
                f"n_hidden_states={k!r} needs more rows than classes {listed} have: their "
                "models use as many hidden states as their rows estimate (one with "
                "n_hidden_states='auto').",
                UserWarning,
            )

    def _independence_candidate(self, base):
        """Parameters that make ``base`` the independence model of each class (naive
        Bayes, add-one smoothing as ``CategoricalNB``'s default), or ``None`` when the
        user fixed the structure (a given tree or a structure other than "auto"; the
        default estimator's structure is the package's choice, not the user's)."""
        params = base.get_params()
        chosen_here = params.get("structure") == "auto" or self._hidden_chow_liu_default(params)
        if not chosen_here or params.get("tree") is not None:
            return None
        candidate = {"structure": "star", "n_hidden_states": 1}
        alpha = getattr(base, "_independence_alpha", None)  # the estimator's to say
        if alpha is not None:
            candidate["alpha"] = alpha
        return candidate

    def _hidden_chow_liu_default(self, params):
        """Whether models with estimator parameters ``params`` are the default
        estimator's hidden Chow-Liu trees: the package's choice of structure, not the
        user's, and at ``k' = 1`` the independence model up to its smoothing (every column
        a leaf below a hidden node of one state; a race may choose a Chow-Liu tree)."""
        return self.estimator is None and params.get("structure") == DEFAULT_STRUCTURE

    def _selection_folds(self, X, y_idx, sample_weight, what, fix, n_splits=_AUTO_FOLDS):
        """Folds of the out-of-fold choices (see ``n_hidden_states``): ``(training rows,
        held-out rows, their weights, their weights)``. ``what`` names the choice in the
        error of too few rows, ``fix`` says how to avoid it.

        ``n_splits`` folds (one 80/20 split beyond ``_AUTO_CV_ROWS`` rows): fold ``k``
        holds out the units of every row's weight whose keys of the row's values and
        class fall in ``[k / n_splits, (k + 1) / n_splits)``
        (:func:`~ltm_sklearn._engine.row_keys.holdout_weights`, as the calibration
        split), so that the folds, and the choice, are the same in any order of the rows
        and for an integer weight as for as many copies of a row. A class of fewer than
        5 rows keeps its weight for training."""
        large = _held_out_rows(y_idx)
        if large.size < MIN_SPLIT_WEIGHT:
            raise ValueError(
                f"{what} holds out rows to choose by log-loss and needs at least "
                f"{MIN_SPLIT_WEIGHT} rows in "
                f"classes of 5 rows or more, got {large.size}. {fix}"
            )
        values = np.vstack([row_values(X), y_idx.astype(float)])
        seed = self.random_state if isinstance(self.random_state, Integral) else 0
        bands = [(0.0, 0.2)] if _many_rows(y_idx) else [
            (k / n_splits, (k + 1) / n_splits) for k in range(n_splits)
        ]  # fmt: skip
        kept = ~np.isin(np.arange(len(y_idx)), large)  # small classes: training only
        folds = []
        for lo, hi in bands:
            held, train, _ = holdout_weights(values, sample_weight, hi, seed, low=lo)
            train[kept], held[kept] = train[kept] + held[kept], 0.0
            train_rows, val_rows = np.flatnonzero(train > 0), np.flatnonzero(held > 0)
            if val_rows.size:  # a band may hold out nothing of few rows
                folds.append((train_rows, val_rows, train[train_rows], held[val_rows]))
        return folds

    def _out_of_fold(self, base, shared, params, folds, X, y_idx, sample_weight, per_class=None):
        """The class log-likelihoods of every held-out row of ``folds`` under the class
        models ``base`` + ``shared`` + ``params`` (+ ``per_class``, see
        :meth:`_class_jobs`) fitted on the rest (the fits of every fold side by side,
        see :meth:`_run_trial_fits`): an :class:`_OutOfFold`. A fold is ``(train,
        held_out)`` rows, or ``(train, held_out, their weights, their weights)`` when it
        splits the rows' weights (:meth:`_calibration_split`)."""
        params = dict(shared, **params)
        folds = [
            f if len(f) == 4 else (*f, sample_weight[f[0]], sample_weight[f[1]]) for f in folds
        ]
        jobs, priors = [], []
        for train, _, w_train, _ in folds:
            X_train, y_train = safe_indexing(X, train), y_idx[train]
            part = self._class_jobs(base, params, X_train, y_train, w_train, per_class)
            jobs.extend(part)
            priors.append(self._class_prior(y_train, w_train))
        models = iter(self._run_trial_fits(jobs))
        log_lik, log_prior = [], []
        for (_, val, _, _), prior in zip(folds, priors):
            X_val = safe_indexing(X, val)
            fold_models = [next(models) for _ in self.classes_]
            log_lik.append(np.column_stack([_class_log_likelihood(m, X_val) for m in fold_models]))
            with np.errstate(divide="ignore"):  # a class absent from the fold's training
                log_prior.append(np.broadcast_to(np.log(prior), log_lik[-1].shape))
        rows = np.concatenate([f[1] for f in folds])
        weights = np.concatenate([f[3] for f in folds])
        return _OutOfFold(np.vstack(log_lik), np.vstack(log_prior), y_idx[rows], weights)

    def _calibration_split(self, X, y_idx, sample_weight):
        """The fold of ``calibrate=True``: about a fifth of the weight of every row held
        out, by keys of the row's values and class
        (:func:`~ltm_sklearn._engine.row_keys.holdout_weights`), so that a row of weight 3
        is split as three copies of it are, in any order of the rows
        (:meth:`_calibration_fold`)."""
        # the values as numbers, so that the split is the same for every container and
        # dtype that hold them (ints in a NumPy array, floats, objects, a DataFrame), as
        # the class models read them alike
        values = np.vstack([row_values(X), y_idx.astype(float)])
        seed = self.random_state if isinstance(self.random_state, Integral) else 0
        held, train, _ = holdout_weights(values, sample_weight, VALIDATION_SHARE, seed)
        return self._calibration_fold(held, train, y_idx, sample_weight)

    def _calibration_fold(self, held, train, y_idx, sample_weight):
        """``(training rows, held-out rows, their weights, their weights)`` of the row
        weights ``held`` and ``train`` (arrays over the rows, changed in place): a class
        of under 5 rows (by ``sample_weight``), or one left without training weight,
        stays whole in training. ``None`` when under 10 rows (by weight) are held out."""
        for c in range(len(self.classes_)):
            rows = y_idx == c
            if sample_weight[rows].sum() < 5 or train[rows].sum() <= 0:
                train[rows] += held[rows]
                held[rows] = 0.0
        if held.sum() < MIN_SPLIT_WEIGHT:
            return None
        train_rows, val_rows = np.flatnonzero(train > 0), np.flatnonzero(held > 0)
        return train_rows, val_rows, train[train_rows], held[val_rows]

    def _choose_hidden_states(self, base, shared, X, y_idx, sample_weight, folds):
        """``n_hidden_states="auto"``: the class models' parameters by out-of-fold
        log-loss (see the class docstring) and their losses; sets
        ``n_hidden_states_scores_`` and ``independence_score_``."""
        w_val = np.concatenate([f[3] for f in folds])

        def scores_of(params, per_class=None):
            return self._out_of_fold(
                base, shared, params, folds, X, y_idx, sample_weight, per_class
            )

        def mean(loss):
            return float(np.average(loss, weights=w_val))

        def se(a, b):
            return max(TIE_TOL, paired_se(a, b, w_val))

        # candidates from the simplest: the independence model, then the estimator's own
        # structure at k' = 1, 2, 3, 4, 8, ... while the log-loss improves beyond noise
        candidates, losses, scored = [], [], []
        independence = self._independence_candidate(base)
        if independence is not None:
            candidates.append(independence)
            scored.append(scores_of(independence))
            losses.append(scored[-1].losses())
            self.independence_score_ = mean(losses[-1])
        # k' up to the training rows of the smallest class; with the independence model
        # at hand, of the smallest class of 5 rows or more (a smaller class gets that
        # model when k' exceeds its rows, see _class_jobs, instead of holding every
        # class down to naive Bayes)
        counts = [
            np.bincount(y_idx[f[0]], weights=f[2], minlength=len(self.classes_)).astype(int)
            for f in folds
        ]
        if independence is not None:
            counts = [c[c >= 5] if np.any(c >= 5) else c for c in counts]
        smallest = min(int(c.min()) for c in counts)
        models = [None] * len(candidates)
        scores, best = {}, None
        grid = [k for k in AUTO_HIDDEN_STATES if k <= smallest]
        if independence is not None and self._hidden_chow_liu_default(base.get_params()):
            # k' = 1 is the independence model, a candidate already: growth starts from it
            grid = [k for k in grid if k > 1] or grid
            if grid[0] > 1:
                scores[1] = self.independence_score_
                best = (scores[1], losses[0])
        choosing = self._class_models_choose_structure(base, shared)
        for k in grid:
            params = {"n_hidden_states": k}
            fitted = per_class = None
            if choosing:
                # the class models on every row first (the final models if this k'
                # wins): the structure each chooses is fixed in the folds' fits, which
                # then fit one structure each instead of racing them all
                jobs = self._class_jobs(base, dict(shared, **params), X, y_idx, sample_weight)
                fitted = self._run_trial_fits(jobs, record=True)
                if all(hasattr(m, "structure_") for m, _ in fitted):
                    per_class = [{"structure": m.structure_} for m, _ in fitted]
            scored.append(scores_of(params, per_class))
            loss = scored[-1].losses()
            scores[k] = mean(loss)
            candidates.append(params)
            losses.append(loss)
            models.append(fitted)
            if best is not None and best[0] - scores[k] <= se(best[1], loss):
                break
            best = (scores[k], loss)
        self.n_hidden_states_scores_ = scores
        # the best out-of-fold log-loss (ties within TIE_TOL: the simpler candidate)
        chosen = best_key({i: -mean(loss) for i, loss in enumerate(losses)}, order=lambda i: i)
        return candidates[chosen], losses[chosen], models[chosen], scored[chosen]

    def _class_models_choose_structure(self, base, shared):
        """Whether the class models ``base`` + ``shared`` choose their structures
        (``structure="auto"``, no given or shared tree)."""
        params = dict(base.get_params(), **shared)
        if params.get("structure") != "auto" or params.get("tree") is not None:
            return False
        return not self.shared_tree

    def _choose_form(self, base, shared, X, y_idx, sample_weight, folds, discrete_loss):
        """``hidden="auto"`` of the estimator: the form of lower out-of-fold log-loss
        (ties: discrete), set in ``hidden_scores_``; ``discrete_loss`` when known."""
        w_val = np.concatenate([f[3] for f in folds])

        def loss_of(form):
            params = {"hidden": form}
            return self._out_of_fold(base, shared, params, folds, X, y_idx, sample_weight).losses()

        losses = {
            "discrete": loss_of("discrete") if discrete_loss is None else discrete_loss,
            "gaussian": loss_of("gaussian"),
        }
        self.hidden_scores_ = {f: float(np.average(v, weights=w_val)) for f, v in losses.items()}
        better = self.hidden_scores_["gaussian"] < self.hidden_scores_["discrete"] - TIE_TOL
        return "gaussian" if better else "discrete"

    def _validated(self, X):
        check_is_fitted(self)
        refuse_dask(X, type(self).__name__)
        if isinstance(X, pd.DataFrame):
            validate_data(self, X, skip_check_array=True, reset=False)
            if len(X) == 0:  # as an array is refused (the class models would name theirs)
                raise ValueError(
                    f"Found array with 0 sample(s) (shape={X.shape}) while a minimum of 1 "
                    f"is required by {type(self).__name__}."
                )
            return X
        X = validate_data(self, X, dtype=None, ensure_all_finite="allow-nan", reset=False)
        names = getattr(self, "feature_names_in_", None)
        if names is not None:
            # fitted on a DataFrame and given an array: warned above once, and the models
            # of the classes read the array under the fitted names (not once more each)
            X = pd.DataFrame(X, columns=names)
        return X

    def predict_log_proba(self, X):
        """Log class posteriors ``log P(c | x)``, columns in the order of ``classes_``."""
        X = self._validated(X)
        if self.model_ == "joint":
            return self._joint_log_proba(X)
        log_lik = np.column_stack([_class_log_likelihood(est, X) for est in self.estimators_])
        joint = self._joint_log_proba(X) if self.pool_weight_ < 1 else None
        return pooled_log_posterior(
            log_lik, np.log(self.class_prior_), joint, self.pool_weight_, self.temperature_
        )

    def predict_proba(self, X):
        """Class posteriors ``P(c | x)``; rows sum to 1."""
        return np.exp(self.predict_log_proba(X))

    def predict(self, X):
        """Most probable class of each row."""
        best = np.argmax(self.predict_log_proba(X), axis=1)
        return self.classes_[best]

    def score(self, X, y, sample_weight=None):
        """Accuracy of ``predict(X)`` against ``y`` (the classifier convention of
        scikit-learn, so ``cross_val_score`` without ``scoring=`` measures accuracy).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), default=None
            Weights of the rows in the accuracy.

        Returns
        -------
        float
        """
        return float(accuracy_score(y, self.predict(X), sample_weight=sample_weight))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.categorical = True
        return tags


def _too_few_rows(k, n_rows):
    """Whether ``n_rows`` rows of a class are too few for ``k`` hidden states: more states
    than rows, or a held-out choice (``"auto"``) on under ``MIN_SPLIT_WEIGHT`` rows."""
    if isinstance(k, str):
        return n_rows < MIN_SPLIT_WEIGHT
    return k is not None and n_rows < k


def _class_log_likelihood(est, X):
    """A class model's log-likelihood of the rows ``X`` as the classes compare it: a
    category unseen in training as a missing entry (the package's estimators,
    ``_class_score_samples``), or ``score_samples`` (any other density estimator)."""
    scores = getattr(est, "_class_score_samples", None)
    return est.score_samples(X) if scores is None else scores(X)


def _states_for_rows(k, n_rows):
    """The hidden states of a class model of ``n_rows`` rows (:func:`_too_few_rows`):
    ``k``, at most one a row; one for ``"auto"``."""
    return 1 if isinstance(k, str) else max(1, min(int(k), int(n_rows)))


def _fit_class_model(est, X, sample_weight, label, quiet=False, record=False, trial=False):
    """``est`` fitted on the rows ``X`` of class ``label`` (an error names the class;
    ``quiet``: without the package's warnings). ``record``: ``(est, warnings)`` with
    the package's warnings of the fit as ``(message, category)`` pairs, for
    :func:`_replay`. ``trial``: a fit to score and drop, which keeps nothing that only a
    reader of the model uses (:func:`_as_trial`)."""
    if trial:
        _as_trial(est)
    try:
        rule = "record" if record else "ignore" if quiet else None
        with collected_warnings(rule) if rule else contextlib.nullcontext() as caught:
            fitted = est.fit(X, sample_weight=sample_weight)
    except ValueError as e:
        raise ValueError(f"The model of class {label!r} ({len(X)} rows): {e}") from e
    if record:
        return fitted, caught
    return fitted


#: the model choices of a density estimator that ``"auto"`` makes in its fit
_CHOICES = (
    "n_hidden_states",
    "structure",
    "n_members",
    "alpha",
    "softening",
    "entropy",
    "min_state_rows",
    "hidden",
)


def _choices_of(fitted):
    """``{parameter: fitted value}`` of the model choices (:data:`_CHOICES`) that were
    ``"auto"`` in ``fitted`` and made in its fit (``n_hidden_states`` ->
    ``n_hidden_states_``, and so on)."""
    params = fitted.get_params(deep=False)
    return {
        name: getattr(fitted, f"{name}_")
        for name in _CHOICES
        if params.get(name) == "auto" and hasattr(fitted, f"{name}_")
    }


def _as_trial(est):
    """``est`` (unfitted) made a trial fit: an estimator of this package then skips its
    raw estimate (``_keeps_raw_estimate``), which only a reader of a final model uses;
    the fitted model is the same."""
    if isinstance(est, BaseLatentTree):
        est._keeps_raw_estimate = False
    return est


def _issue_once(caught):
    """Issue the recorded warnings ``caught`` here, where the user's filters apply, each
    once: messages of one category that differ only in their numbers (the rows of the
    model that warned) are one warning, the first."""
    issued = set()
    for message, category in caught:
        key = (re.sub(r"\d+(\.\d+)?", "#", message), category)
        if key not in issued:
            issued.add(key)
            warn(message, category)


def _replay(model, caught):
    """``model`` after its fit's recorded warnings (:func:`_fit_class_model`) are
    issued here, where the user's warning filters apply, pointing at the user's line."""
    for message, category in caught:
        warn(message, category)
    return model


def _many_rows(y_idx):
    """Whether the out-of-fold choices hold out one split of rows rather than folds:
    more than ``_AUTO_CV_ROWS`` rows in classes of 5 rows or more."""
    return _held_out_rows(y_idx).size > _AUTO_CV_ROWS


def _held_out_rows(y_idx):
    """The rows the out-of-fold choices may hold out: those of classes of 5 rows or more
    (a smaller class keeps every row for training)."""
    counts = np.bincount(y_idx)
    return np.flatnonzero(np.isin(y_idx, np.flatnonzero(counts >= 5)))


class _OutOfFold(NamedTuple):
    """Out-of-fold class log-likelihoods of held-out rows: ``log_likelihood`` and
    ``log_prior`` of shape (n_rows, n_classes), the rows' class indices ``y`` and
    weights."""

    log_likelihood: np.ndarray
    log_prior: np.ndarray
    y: np.ndarray
    weights: np.ndarray

    def losses(self, temperature=1.0):
        """``-log P(y | x)`` of every row, by Bayes' rule at ``temperature``."""
        log_post = tempered_log_posterior(self.log_likelihood, self.log_prior, temperature)
        return -log_post[np.arange(len(self.y)), self.y]
