"""ltm_sklearn: scikit-learn compatible estimators for latent tree graphical models."""

from ._engine.tree import LatentTree
from ._estimators.classifier import LatentTreeClassifier
from ._estimators.em import LatentTreeEM
from ._estimators.gaussian import GaussianLatentTree
from ._estimators.hierarchical import HierarchicalTensorLTM
from ._estimators.kernel import KernelLatentTree
from ._estimators.quartet import QuartetTreeLearner
from ._estimators.spectral import SpectralLatentTree

__all__ = [
    "GaussianLatentTree",
    "HierarchicalTensorLTM",
    "KernelLatentTree",
    "LatentTree",
    "LatentTreeClassifier",
    "LatentTreeEM",
    "QuartetTreeLearner",
    "SpectralLatentTree",
]
__version__ = "0.1.0.dev0"
