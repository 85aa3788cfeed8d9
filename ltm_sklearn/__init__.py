"""ltm_sklearn: scikit-learn compatible estimators for latent tree graphical models."""

from ._classifier import LatentTreeClassifier
from ._em import LatentTreeEM
from ._hierarchical import HierarchicalTensorLTM
from ._kernel import KernelLatentTree
from ._quartet import QuartetTreeLearner
from ._spectral import SpectralLatentTree
from .tree import LatentTree

__all__ = [
    "HierarchicalTensorLTM",
    "KernelLatentTree",
    "LatentTree",
    "LatentTreeClassifier",
    "LatentTreeEM",
    "QuartetTreeLearner",
    "SpectralLatentTree",
]
__version__ = "0.1.0.dev0"
