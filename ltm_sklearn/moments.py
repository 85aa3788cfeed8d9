"""The shared marginal-estimation backend: categorical encoding, moment statistics and
kernel feature maps (public path of :mod:`ltm_sklearn._engine.moments`)."""

from ._engine.moments import (
    MISSING,
    UNSEEN,
    CategoricalEncoder,
    KernelMoments,
    MomentEstimator,
    RBFFeatureMap,
    declared_categories,
    rbf_features,
    weighted_quantiles,
)

__all__ = [
    "CategoricalEncoder",
    "declared_categories",
    "MomentEstimator",
    "RBFFeatureMap",
    "KernelMoments",
    "rbf_features",
    "weighted_quantiles",
    "MISSING",
    "UNSEEN",
]
