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
* C. K. Chow and C. N. Liu, "Approximating Discrete Probability Distributions with
  Dependence Trees", IEEE Transactions on Information Theory 14(3), 1968 (Chow-Liu trees).
* M. J. Choi, V. Y. F. Tan, A. Anandkumar and A. S. Willsky, "Learning Latent Tree
  Graphical Models", JMLR 12, 2011 (information distances, recursive grouping, CLRG,
  CLNJ, linear-Gaussian latent trees).
* M. Meila and M. I. Jordan, "Learning with Mixtures of Trees", JMLR 1, 2000 (mixtures of
  trees).
* N. Saitou and M. Nei, "The Neighbor-Joining Method: A New Method for Reconstructing
  Phylogenetic Trees", Molecular Biology and Evolution 4(4), 1987 (neighbor joining).
* O. Gascuel, "BIONJ: An Improved Version of the NJ Algorithm Based on a Simple Model of
  Sequence Data", Molecular Biology and Evolution 14(7), 1997 (BIONJ).
* R. Desper and O. Gascuel, "Fast and Accurate Phylogeny Reconstruction Algorithms Based
  on the Minimum-Evolution Principle", Journal of Computational Biology 9(5), 2002
  (balanced minimum evolution and its NNI search).
* V. Lefort, R. Desper and O. Gascuel, "FastME 2.0: A Comprehensive, Accurate, and Fast
  Distance-Based Phylogeny Inference Program", Molecular Biology and Evolution 32(10),
  2015 (SPR moves under balanced minimum evolution).
* M. N. Price, P. S. Dehal and A. P. Arkin, "FastTree 2 - Approximately
  Maximum-Likelihood Trees for Large Alignments", PLoS ONE 5(3), 2010, and B. Q. Minh,
  H. A. Schmidt, O. Chernomor, D. Schrempf, M. D. Woodhams, A. von Haeseler and
  R. Lanfear, "IQ-TREE 2: New Models and Efficient Methods for Phylogenetic Inference in
  the Genomic Era", Molecular Biology and Evolution 37(5), 2020 (the structure
  benchmark's peers).
* H. Liu, J. Lafferty and L. Wasserman, "The Nonparanormal: Semiparametric Estimation of
  High Dimensional Undirected Graphs", JMLR 10, 2009 (the nonparanormal distance).
* I.-K. Yeo and R. A. Johnson, "A New Family of Power Transformations to Improve
  Normality or Symmetry", Biometrika 87(4), 2000 (Yeo-Johnson margins).
* C. K. I. Williams and M. Seeger, "Using the Nystrom Method to Speed Up Kernel
  Machines", Advances in Neural Information Processing Systems 13 (NIPS 2000), 2001
  (Nystrom features).
* R. Salakhutdinov and S. Roweis, "Adaptive Overrelaxed Bound Optimization Methods",
  ICML 2003 (over-relaxed EM).
* M. Sato and S. Ishii, "On-line EM Algorithm for the Normalized Gaussian Network",
  Neural Computation 12(2), 2000, and P. Liang and D. Klein, "Online EM for Unsupervised
  Models", NAACL 2009 (stepwise EM).
* A. Liu and G. Van den Broeck, "Tractable Regularization of Probabilistic Circuits",
  NeurIPS 2021 (hidden Chow-Liu trees, data softening, entropy regularisation, EM
  stopped on held-out rows).
* N. R. Selvam, H. Zhang and G. Van den Broeck, "Mixtures of All Trees", AISTATS 2023
  (the density benchmark's published figures).
* C. Guo, G. Pleiss, Y. Sun and K. Q. Weinberger, "On Calibration of Modern Neural
  Networks", ICML 2017 (temperature scaling).
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
