"""ltm_sklearn: scikit-learn compatible estimators for latent tree graphical models.

The docstrings cite their sources by authors, venue and year; in full:

* A. P. Parikh, L. Song and E. P. Xing, "A Spectral Algorithm for Latent Tree Graphical
  Models", ICML 2011.
* L. Song, M. Ishteva, A. Parikh, E. Xing and H. Park, "Hierarchical Tensor Decomposition
  of Latent Tree Graphical Models", ICML 2013.
* L. Song, A. P. Parikh and E. P. Xing, "Kernel Embeddings of Latent Tree Graphical
  Models", NIPS 2011.
* M. Ishteva, H. Park and L. Song, "Unfolding Latent Tree Structures using 4th Order
  Tensors", ICML 2013.
* A. Anandkumar, R. Ge, D. Hsu, S. M. Kakade and M. Telgarsky, "Tensor Decompositions for
  Learning Latent Variable Models", JMLR 15, 2014.
"""

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
