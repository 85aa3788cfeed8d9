"""``partial_fit`` of the discrete estimators: statistics of batches, and the model built
from them when it is first read.

:class:`PartialFitMixin` keeps the exact additive statistics of every batch
(:class:`~ltm_sklearn._sources.streaming.RowStatistics`), forgets the model of the
earlier batches (every fitted attribute but :data:`STREAM_KEPT`) and marks it stale; the
first read of a fitted attribute after a call (``tree_``, ``cpts_``, ``softening_``, ...)
builds the model with the estimator's own ``_fit_moments``, so a stream of batches costs
about one fit, however many batches there are, and no attribute of an earlier model
outlives a batch.
"""

from __future__ import annotations

from sklearn.utils import check_random_state

from .._algorithms.leaves import CategoricalLeaves
from .._engine.encoding import declared_categories
from .._engine.user_warnings import warn
from .._sources.streaming import RowStatistics
from .sklearn_internals import check_sample_weight
from .validation import fitted_state, reset_fitted_state

__all__ = ["PartialFitMixin", "STREAM_KEPT"]

#: what a batch leaves of the fitted state: the statistics and what describes the rows;
#: everything else (the model: tree, tables, choices and their scores, a raw estimate,
#: statistics of a structure test) is forgotten and built again when first read
STREAM_KEPT = (
    "n_features_in_",
    "feature_names_in_",
    "n_samples_seen_",
    "_stream",
    "_stream_declared",
    "_stream_stale",
)

#: private state of the model that its first read builds as well
_BUILT_PRIVATE = ("_leaves", "_held_out_fit")


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
            warn(
                f"This {type(self).__name__} was fitted with fit, which keeps no statistics "
                "of its rows for partial_fit to add a batch to: the model starts again from "
                "this batch. Pass every batch, the first one too, to partial_fit, or fit on "
                "all the rows.",
                UserWarning,
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
        # the model of the earlier batches is forgotten: built again when first read
        reset_fitted_state(self, [n for n in fitted_state(self) if n not in STREAM_KEPT])
        self._stream_stale = True
        return self

    def __getattr__(self, name):
        # reached only for a name the instance and its class lack: a fitted attribute of
        # a model that partial_fit made stale is built from the statistics on first read
        # (what a batch keeps is not built: feature_names_in_ is absent for arrays, and
        # the validation of every batch asks for it)
        fitted = (name.endswith("_") and name[0] != "_") or name in _BUILT_PRIVATE
        if fitted and name not in STREAM_KEPT and self.__dict__.get("_stream_stale"):
            self._build_from_stream()
            return getattr(self, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

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
