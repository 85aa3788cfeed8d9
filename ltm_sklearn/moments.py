"""The shared marginal-estimation backend: categorical encoding, moment statistics and
kernel feature maps (public path of :mod:`ltm_sklearn._engine.moments`)."""

from ._engine.encoding import MISSING, UNSEEN, CategoricalEncoder, declared_categories
from ._engine.kernel_features import KernelMoments, RBFFeatureMap, rbf_features, weighted_quantiles
from ._engine.moments import MomentEstimator

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
