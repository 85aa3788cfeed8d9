"""``partial_fit`` of the discrete estimators: statistics of batches, and the model built
from them when it is first read.

:class:`PartialFitMixin` keeps the exact additive statistics of every batch
(:class:`~ltm_sklearn._sources.streaming.RowStatistics`) and marks the model stale; the
first read of a fitted attribute after a call (``tree_``, ``cpts_``, ... - the names of
:data:`STREAM_BUILT`, each a :class:`BuiltFromStream` descriptor of the class) builds it
with the estimator's own ``_fit_moments``, so a stream of batches costs about one fit,
however many batches there are.
"""

from __future__ import annotations

import warnings

from sklearn.utils import check_random_state

from .._algorithms.leaves import CategoricalLeaves
from .._engine.encoding import declared_categories
from .._engine.user_frames import user_stacklevel
from .._sources.streaming import RowStatistics
from .sklearn_internals import check_sample_weight
from .validation import reset_fitted_state

__all__ = ["PartialFitMixin", "STREAM_BUILT", "BuiltFromStream"]

#: what partial_fit rebuilds from its statistics (when first read after a call)
STREAM_BUILT = (
    "_leaves",
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
    "min_state_rows_",
    "min_state_rows_scores_",
    "hidden_state_counts_",
    "root_marginal_",
    "cpts_",
    "lower_bound_",
    "n_iter_",
    "converged_",
    "raw_estimate_",
)


class PartialFitMixin:
    """``partial_fit`` for an estimator with ``_validate_X``, ``_fit_moments`` and the
    parameters ``categories``, ``random_state`` and ``n_jobs``."""

    def partial_fit(self, X, y=None, sample_weight=None):
        """Add a batch of rows to the statistics, for data that arrive in batches or do
        not fit in memory.

        The exact additive statistics (every pair and singleton table) and a uniform
        sample of at most :data:`~ltm_sklearn._sources.streaming.SAMPLE_ROWS` rows are kept
        (:mod:`ltm_sklearn._sources.streaming`); the model is rebuilt from them - tree, moment
        estimate, EM on the sample - when it is first used after a call, so a stream of
        batches costs about one fit. While at most ``SAMPLE_ROWS`` rows, or at most
        ``SAMPLE_ROWS`` distinct rows (counted with their weights), have been seen the
        model equals ``fit`` on the concatenated batches; beyond, the tree still comes
        from the exact pair tables of every row and the parameters from the sample.
        Categories may first appear in any batch (the encoding grows; earlier counts are
        kept); with ``categories`` given or pandas-declared, a value outside them is an
        error as in ``fit``. ``fit`` starts again from nothing; a model fitted by
        ``fit`` keeps no statistics of its rows, so ``partial_fit`` after it starts a
        new model from its batch, with a warning.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            A batch, with the columns of the first one, of at least one row (as in
            scikit-learn's incremental estimators, an empty batch is an error: skip it).
        y : None
            Ignored.
        sample_weight : array-like of shape (n_samples,), default=None
            Frequency weights (non-negative): a row of weight 2 counts as two copies of
            it, so scaling every weight changes the model as more rows would (the prior
            weighs less).

        Returns
        -------
        self
        """
        first = "_stream" not in self.__dict__
        if first and "tree_" in self.__dict__:
            warnings.warn(
                f"This {type(self).__name__} was fitted with fit, which keeps no statistics "
                "of its rows for partial_fit to add a batch to: the model starts again from "
                "this batch. Pass every batch, the first one too, to partial_fit, or fit on "
                "all the rows.",
                UserWarning,
                stacklevel=user_stacklevel(),
            )
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
        reset_fitted_state(self, STREAM_BUILT)  # built again when first read
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
        self._set_leaves(CategoricalLeaves.from_encoder(encoder, self.categories))
        self._fit_moments(self._stream.moments(encoder, perms, self.n_jobs))


class BuiltFromStream:
    """A fitted attribute that ``partial_fit`` builds when it is first read after a call.

    A data descriptor of the estimator's class: the value lives in the instance's
    ``__dict__`` (where ``fit`` puts it and ``vars`` finds it), and a read while the
    model is stale first builds the model from the statistics
    (:meth:`PartialFitMixin._build_from_stream`)."""

    def __init__(self, name):
        self.name = name

    def __get__(self, est, owner=None):
        if est is None:
            return self
        if est.__dict__.get("_stream_stale"):
            est._build_from_stream()
        try:
            return est.__dict__[self.name]
        except KeyError:
            raise AttributeError(
                f"{type(est).__name__!r} object has no attribute {self.name!r}"
            ) from None

    def __set__(self, est, value):
        est.__dict__[self.name] = value

    def __delete__(self, est):
        if est.__dict__.pop(self.name, _MISSING) is _MISSING:
            raise AttributeError(self.name)


_MISSING = object()
for _name in STREAM_BUILT:
    setattr(PartialFitMixin, _name, BuiltFromStream(_name))
del _name
