"""Leaf models: how an estimator's columns enter its latent tree.

One concept: everything of an estimator that depends on what its columns hold - the
encoding of the rows, their moments, the evidence the observed nodes send to message
passing, the scoring of a fitted model, and the drawing of values. The estimators'
fit, selection and queries read their data only through a leaf model
(:class:`LeafModel`), so a model of other data is a leaf model, not a set of overrides:

* :class:`CategoricalLeaves` - categorical columns: every column a node whose states are
  its categories (the discrete estimators);
* :class:`BumpLeaves` - continuous columns (and categorical ones of a mixed table) of
  the kernel model: given its parent's state, a continuous column is a mixture of
  Gaussian bumps at fixed landmarks (:mod:`~ltm_sklearn._algorithms.kernel_leaves`), and
  its moments are those of kernel feature maps (Song, Parikh & Xing, "Kernel Embeddings
  of Latent Tree Graphical Models", NIPS 2011).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import pandas as pd
from sklearn.utils import check_random_state

from .._engine.encoding import CategoricalEncoder, declared_categories
from .._engine.evidence import CodeEvidence, DenseEvidence
from .._engine.inference import log_likelihood
from .._engine.kernel_features import KernelMoments, RBFFeatureMap
from .._engine.mixed_columns import MixedEncoder, categorical_mask
from .._engine.moments import MomentEstimator
from .kernel_leaves import bump_evidence, code_evidence, nearest_centre, select_bandwidth

__all__ = ["LeafModel", "CategoricalLeaves", "BumpLeaves", "KernelEvaluation", "SCORE_BLOCK"]

#: leaf bandwidths tried per column, as multiples of Silverman's ``1.06 n^(-1/5)`` (in
#: standard deviations of the column)
BANDWIDTH_FACTORS = (0.125, 0.25, 0.5, 1.0, 2.0)
#: bandwidth of the wide bump of every column (centred at its mean, in standard
#: deviations): values beyond the landmarks keep a sensible density
WIDE_BUMP = 3.0
#: the bandwidths a user may give, in standard deviations of the column
_BANDWIDTH_SDS = (1e-8, 1e8)
#: rows scored per block by the bump model (bounds the evidence held at once)
SCORE_BLOCK = 8192


def categorical_dtypes(X):
    """The pandas Categorical dtypes of the columns of a DataFrame (``None`` for the
    other columns and for non-DataFrame input)."""
    if not isinstance(X, pd.DataFrame):
        return None
    return [dtype if isinstance(dtype, pd.CategoricalDtype) else None for dtype in X.dtypes]


def restore_categorical_dtypes(frame, dtypes):
    """``frame`` with the Categorical ``dtypes`` (:func:`categorical_dtypes`) of its
    columns: their categories and order, observed or not."""
    for j, dtype in enumerate(dtypes or ()):
        if dtype is not None:
            frame.isetitem(j, frame.iloc[:, j].astype(dtype))
    return frame


class LeafModel(Protocol):
    """What an estimator reads of its columns (see the module docstring).

    ``data`` is what :meth:`fit_transform` and :meth:`transform` return and the other
    methods read (category codes, or standardised values); ``fitted`` a
    :class:`~ltm_sklearn._estimators.fits.FittedModel`-like object with ``tree``,
    ``root_marginal`` and ``cpts``.
    """

    def inspect(self, X) -> None:
        """Read what validation loses from the raw input (pandas dtypes)."""

    def restore_dtypes(self, frame):
        """Drawn rows (a DataFrame with the fitted names) with the dtypes that
        :meth:`inspect` read (:func:`restore_categorical_dtypes`)."""

    def fit_transform(self, X, sample_weight=None, names=None, random_state=None): ...

    def transform(self, X): ...

    def fitted_attributes(self) -> dict:
        """The estimator's public fitted attributes of the encoding."""

    def moments(self, data, sample_weight, n_jobs=None): ...

    def unseen_proba(self, moments) -> np.ndarray: ...

    def row_values(self, moments) -> np.ndarray:
        """The rows of ``moments``, feature-major (what the held-out split hashes)."""

    def rows(self, moments, rows):
        """The ``data`` of some rows of ``moments``."""

    def evidence(self, data, unseen_proba): ...

    def log_likelihood(self, fitted, data, unseen_proba) -> np.ndarray: ...

    def decode(self, codes, random_state=None): ...

    def shared_encoding(self, X, declared) -> dict: ...

    def shared_params(self) -> dict: ...


class CategoricalLeaves:
    """Categorical columns, each a node whose states are its categories.

    Parameters
    ----------
    categories : "auto" or list, default="auto"
        Per column, its categories; ``"auto"``: the pandas-declared ones, else those
        observed in rows of positive weight.
    """

    def __init__(self, categories="auto"):
        self.categories = categories
        self.declared = self.categorical_dtypes = None
        self.encoder = None

    @classmethod
    def from_encoder(cls, encoder, categories="auto"):
        """Leaves of an encoder built elsewhere (streamed or distributed statistics)."""
        leaves = cls(categories)
        leaves.encoder = encoder
        return leaves

    def inspect(self, X):
        self.declared = declared_categories(X)
        self.categorical_dtypes = categorical_dtypes(X)

    def restore_dtypes(self, frame):
        return restore_categorical_dtypes(frame, getattr(self, "categorical_dtypes", None))

    def fit_transform(self, X, sample_weight=None, names=None, random_state=None):
        """Learn the categories (given, declared by pandas, or observed) and encode ``X``."""
        given = self.categories
        if isinstance(given, str):
            given = self.declared
        self.encoder = CategoricalEncoder("auto" if given is None else given)
        if sample_weight is not None and not np.all(sample_weight > 0):
            # a row of weight zero is a row left out: its values are not categories
            self.encoder.fit_transform(X[sample_weight > 0], names)
            return self.encoder.transform(X)
        return self.encoder.fit_transform(X, names)

    def transform(self, X):
        return self.encoder.transform(X)

    def fitted_attributes(self):
        return {"categories_": self.encoder.categories_}

    def moments(self, codes, sample_weight, n_jobs=None):
        return MomentEstimator(codes, self.encoder.n_states_, sample_weight, n_jobs=n_jobs)

    def unseen_proba(self, moments):
        """``1 / (n_j + W_j + 1)``: the add-one probability of a new category of column
        ``j`` (``n_j`` categories, ``W_j`` the weight observing the column)."""
        return np.array([1.0 / (c.size + t + 1.0) for c, t in moments.singleton_counts()])

    def row_values(self, moments):
        return moments.codes

    def rows(self, moments, rows):
        return moments.codes[:, rows]

    def evidence(self, codes, unseen_proba):
        return CodeEvidence(codes, self.encoder.n_states_, unseen_proba)

    def log_likelihood(self, fitted, codes, unseen_proba):
        ev = self.evidence(codes, unseen_proba)
        return log_likelihood(fitted.tree, fitted.root_marginal, fitted.cpts, ev)

    def decode(self, codes, random_state=None):
        return self.encoder.inverse_transform(codes)

    def shared_encoding(self, X, declared):
        """The categories of all rows of ``X``, for models of parts of it (a
        classifier's classes)."""
        names = list(X.columns) if isinstance(X, pd.DataFrame) else None
        encoder = CategoricalEncoder(declared if declared is not None else "auto")
        encoder.fit_transform(X, names)
        return {"categories": encoder.categories_}

    def shared_params(self):
        return {}


class _KernelData:
    """Standardised training rows with their stacked features (shared by the moments of
    every part of the rows)."""

    def __init__(self, X, features):
        self.X = X
        self.features = features


class KernelEvaluation:
    """Rows to score, evaluated lazily column by column on the fitted feature maps.

    Plays the role of the category codes in
    :func:`~ltm_sklearn._algorithms.spectral.spectral_log_abs`: the message of leaf ``j``
    is ``table^T phi_j(x_j)``; a NaN entry sends the integral row of the table.
    """

    def __init__(self, feature_map, X):
        self.feature_map = feature_map
        self.X = X
        self._features = {}

    @property
    def shape(self):
        return (self.X.shape[1], self.X.shape[0])

    def leaf_messages(self, j, table):
        m = table.shape[0] - 2
        if j not in self._features:
            self._features[j] = self.feature_map.transform_column(j, self.X[:, j])
        msg = (self._features[j] @ table[:m]).T
        missing = np.isnan(self.X[:, j])
        if missing.any():
            msg[:, missing] = table[m][:, None]
        return msg


class BumpLeaves:
    """The leaves of the kernel model: Gaussian bumps at landmarks for a continuous
    column, categories for a categorical one.

    Continuous columns are standardised
    (:class:`~ltm_sklearn._engine.mixed_columns.MixedEncoder`); each gets the Nystroem
    features of the normalised Gaussian kernel
    (:class:`~ltm_sklearn._engine.kernel_features.RBFFeatureMap`) for its moments, and
    bumps at the feature map's landmarks plus one wide bump for the tails for its
    explicit density, with the bump bandwidth chosen per column by held-out likelihood
    (:func:`~ltm_sklearn._algorithms.kernel_leaves.select_bandwidth`) unless given.

    Parameters are those of :class:`~ltm_sklearn.KernelLatentTree` of the same names;
    ``owner`` is the estimator named in messages.
    """

    def __init__(
        self,
        categorical_features="from_dtype",
        categories="auto",
        n_landmarks=50,
        bandwidth_scale=None,
        bandwidth=None,
        owner="KernelLatentTree",
    ):
        self.categorical_features = categorical_features
        self.categories = categories
        self.n_landmarks = n_landmarks
        self.bandwidth_scale = bandwidth_scale
        self.bandwidth = bandwidth
        self.owner = owner
        self.declared = self.is_categorical = self.categorical_dtypes = None

    def inspect(self, X):
        self.declared = declared_categories(X)
        self.categorical_dtypes = categorical_dtypes(X)
        self.is_categorical = categorical_mask(X, self.categorical_features)

    def restore_dtypes(self, frame):
        return restore_categorical_dtypes(frame, getattr(self, "categorical_dtypes", None))

    def fit_transform(self, X, sample_weight=None, names=None, random_state=None):
        self.encoder = MixedEncoder(self.categorical_features, self.categories, owner=self.owner)
        Z = self.encoder.fit_transform(X, self.is_categorical, self.declared, sample_weight, names)
        scale = self.encoder.scale_
        d = X.shape[1]
        numeric = ~self.is_categorical
        bandwidths = None
        if self.bandwidth is not None:
            bandwidths = np.asarray(self.bandwidth, dtype=float).ravel()
            if bandwidths.shape != (d,) or not np.all(bandwidths[numeric] > 0):
                raise ValueError(
                    f"bandwidth must hold {d} values (one per column), positive for the "
                    f"continuous columns, got {self.bandwidth!r}."
                )
            bandwidths = bandwidths / scale
            # in standard deviations of the column: beyond these a bump is a point or
            # flat, and its normalising constants underflow or overflow
            low, high = _BANDWIDTH_SDS
            bad = numeric & ~((bandwidths >= low) & (bandwidths <= high))
            if bad.any():
                j = int(np.flatnonzero(bad)[0])
                raise ValueError(
                    f"bandwidth of column {j} is {bandwidths[j] * scale[j]:g}, {bandwidths[j]:g} "
                    f"standard deviations of the column: give a finite bandwidth between "
                    f"{low:g} and {high:g} of them."
                )
        factor = 1.0 if self.bandwidth_scale is None else self.bandwidth_scale
        self.feature_map = RBFFeatureMap(
            self.n_landmarks, factor, bandwidths, n_categories=self.encoder.n_categories_
        )
        self.feature_map.fit(Z, sample_weight)
        # the landmarks, and one wide bump at the centre that holds the tails
        self.centres = [
            np.append(c, 0.0) if num else None
            for c, num in zip(self.feature_map.landmarks_, numeric)
        ]
        if bandwidths is not None or self.bandwidth_scale is not None:
            leaf = np.asarray(self.feature_map.bandwidths_, dtype=float)
            self.bandwidth_scores = None
        else:
            leaf, self.bandwidth_scores = self._select_bandwidths(Z, sample_weight, random_state)
        self.widths = [
            None if c is None else np.append(np.full(c.size - 1, b), WIDE_BUMP)
            for c, b in zip(self.centres, leaf)
        ]
        self.bandwidths = np.where(numeric, leaf * scale, np.nan)
        return _KernelData(Z, self.feature_map.transform(Z))

    def _select_bandwidths(self, Z, sample_weight, random_state):
        """Per continuous column, the bump bandwidth of highest held-out likelihood of the
        column's marginal mixture among ``BANDWIDTH_FACTORS`` x Silverman's rule."""
        rng = check_random_state(random_state)
        w = np.ones(Z.shape[0]) if sample_weight is None else np.asarray(sample_weight, float)
        chosen, scores = np.full(Z.shape[1], np.nan), [None] * Z.shape[1]
        for j in np.flatnonzero(~self.is_categorical):
            # the observed weight: rows count as often as their (frequency) weights say
            n_obs = max(float(np.sum(w[~np.isnan(Z[:, j])])), 2.0)
            silverman = 1.06 * n_obs**-0.2
            chosen[j], scores[j] = select_bandwidth(
                Z[:, j],
                w,
                self.centres[j],
                [f * silverman for f in BANDWIDTH_FACTORS],
                rng,
                wide=WIDE_BUMP,
            )
        return chosen, scores

    def fitted_attributes(self):
        return {
            "is_categorical_": self.is_categorical,
            "categories_": self.encoder.categories_,
            "center_": self.encoder.center_,
            "scale_": self.encoder.scale_,
            "feature_map_": self.feature_map,
            "centers_": self.centres,
            "bandwidth_scores_": self.bandwidth_scores,
            "bandwidths_": self.bandwidths,
        }

    def transform(self, X):
        return KernelEvaluation(self.feature_map, self.encoder.transform(X))

    def moments(self, data, sample_weight, n_jobs=None):
        return KernelMoments(self.feature_map, data.X, sample_weight, features=data.features)

    def unseen_proba(self, moments):
        """``1 / (n_j + W_j + 1)`` for a categorical column (as in
        :class:`CategoricalLeaves`), 0 for a continuous one."""
        n_cat = self.encoder.n_categories_
        weight = moments.sample_weight @ ~np.isnan(moments.X)
        return np.where(n_cat > 0, 1.0 / (n_cat + weight + 1.0), 0.0)

    def row_values(self, moments):
        return moments.X.T

    def rows(self, moments, rows):
        return moments.X[rows]

    def leaf_sizes(self):
        """States of every column's leaf: its bumps, or its categories."""
        return [
            len(c) if c is not None else n for c, n in zip(self.centres, self.encoder.n_categories_)
        ]

    def coarse_moments(self, moments):
        """Category moments of the columns discretised to their nearest landmark
        (categorical columns: their codes)."""
        Z = moments.X
        codes = np.stack(
            [
                nearest_centre(Z[:, j], c[:-1]) if c is not None else np.nan_to_num(Z[:, j], nan=-1)
                for j, c in enumerate(self.centres)
            ]
        )
        return MomentEstimator(codes.astype(np.int32), self.leaf_sizes(), moments.sample_weight)

    def evidence(self, Z, unseen_proba=None):
        """Leaf evidence of standardised rows (a :class:`KernelEvaluation` or an array):
        bump densities of the continuous columns (scaled per row and column; the log of
        the scales is ``evidence.log_scale``), indicators of the categorical ones."""
        Z = getattr(Z, "X", Z)
        vectors, log_scale = {}, np.zeros(Z.shape[0])
        unseen = np.zeros(Z.shape[1]) if unseen_proba is None else unseen_proba
        for j in range(Z.shape[1]):
            if self.centres[j] is None:
                vectors[j] = code_evidence(Z[:, j], self.encoder.n_categories_[j], unseen[j])
                continue
            vectors[j], scale = bump_evidence(Z[:, j], self.centres[j], self.widths[j])
            log_scale += scale
        evidence = DenseEvidence(vectors)
        evidence.log_scale = log_scale
        return evidence

    def log_likelihood(self, fitted, Z, unseen_proba):
        """Log-density of standardised rows under ``fitted``, in the units of ``X``."""
        Z = getattr(Z, "X", Z)
        out = np.empty(Z.shape[0])
        for start in range(0, Z.shape[0], SCORE_BLOCK):
            ev = self.evidence(Z[start : start + SCORE_BLOCK], unseen_proba)
            out[start : start + SCORE_BLOCK] = (
                log_likelihood(fitted.tree, fitted.root_marginal, fitted.cpts, ev) + ev.log_scale
            )
        return out - self.log_jacobian(Z)

    def log_jacobian(self, Z):
        """``log |dz/dx|`` of every row's observed continuous entries: a density of the
        standardised columns is this much above the density in the units of ``X``."""
        return np.where(np.isnan(Z), 0.0, np.log(self.encoder.scale_)).sum(axis=1)

    def decode(self, codes, random_state=None):
        """Sampled leaf states to values: a bump's centre plus Gaussian noise of its
        bandwidth, in the units of ``X``, or a category (an object array when there are
        categorical columns)."""
        rng = check_random_state(random_state)
        columns = []
        for j in range(codes.shape[1]):
            c = codes[:, j]
            if self.centres[j] is None:
                columns.append(np.asarray(self.encoder.categories_[j], dtype=object)[c])
                continue
            z = self.centres[j][c] + self.widths[j][c] * rng.standard_normal(c.size)
            columns.append(z * self.encoder.scale_[j] + self.encoder.center_[j])
        if self.is_categorical.any():
            out = np.empty(codes.shape, dtype=object)
            for j, col in enumerate(columns):
                out[:, j] = col
            return out
        return np.column_stack(columns)

    def shared_encoding(self, X, declared):
        """Column types and categories learned from all rows of ``X``, for models of parts
        of it (a classifier's classes)."""
        mask = categorical_mask(X, self.categorical_features)
        cat = np.flatnonzero(mask)
        categories = [None] * len(mask)
        if cat.size:
            sub = X.iloc[:, cat] if isinstance(X, pd.DataFrame) else np.asarray(X)[:, cat]
            given = "auto" if declared is None else [declared[j] for j in cat]
            encoder = CategoricalEncoder(given)
            encoder.fit_transform(sub)
            for t, j in enumerate(cat):
                categories[j] = encoder.categories_[t]
        return {"categorical_features": mask, "categories": categories}

    def shared_params(self):
        """What makes models of parts of the rows share these leaves' smoothing and
        column types."""
        return {
            "bandwidth": self.bandwidths,
            "categorical_features": self.is_categorical,
            "categories": self.encoder.categories_,
        }
