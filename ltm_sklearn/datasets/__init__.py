"""Ground-truth latent tree models (topologies, random CPTs, sampling and exact
likelihoods) and the bundled data (public tables and the density benchmark).

Every test, benchmark and example measures estimators against these models: they sample
data from a known latent tree and give the exact ``log P(x)`` of any row (NaN entries
marginalised), so estimation errors can be computed, not guessed.

Examples
--------
>>> import numpy as np
>>> from ltm_sklearn.datasets import LatentTreeModel, balanced_binary_tree
>>> model = LatentTreeModel.random(balanced_binary_tree(4), n_hidden_states=2,
...                                n_observed_states=3, random_state=0)
>>> X = model.sample(5, random_state=0)
>>> X.shape
(5, 4)
>>> bool(abs(np.exp(model.log_likelihood(model.all_configurations())).sum() - 1) < 1e-12)
True
"""

from ._loaders import DEBD_PUBLISHED, DEBD_SETS, TABLES, UCI_NAMES, load_debd, load_table
from ._simulators import (
    GaussianLatentTreeModel,
    GaussianLeafTreeModel,
    LatentTreeModel,
    balanced_binary_tree,
    broad_tree,
    deep_tree,
    hmm_chain,
    random_binary_tree,
    sample_sign_flip_tree,
    star_tree,
)

__all__ = [
    "LatentTreeModel",
    "balanced_binary_tree",
    "random_binary_tree",
    "star_tree",
    "hmm_chain",
    "broad_tree",
    "deep_tree",
    "sample_sign_flip_tree",
    "GaussianLeafTreeModel",
    "GaussianLatentTreeModel",
    "TABLES",
    "UCI_NAMES",
    "load_table",
    "DEBD_SETS",
    "DEBD_PUBLISHED",
    "load_debd",
]
