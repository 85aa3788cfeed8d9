"""Structure learning: tree metrics and tree reconstruction, functions first (public path
of :mod:`ltm_sklearn._algorithms.structure`)."""

from ._algorithms.structure import (
    STRUCTURE_METHODS,
    binary_leaf_tree,
    bionj,
    bme_length,
    build_tree_quartets,
    censored_residual,
    chow_liu,
    clnj,
    clrg,
    gaussian_distance,
    grouped_chow_liu,
    hidden_chow_liu,
    kernel_distance,
    learn_tree,
    learn_tree_quartets,
    minimum_evolution_search,
    mutual_information,
    neighbor_joining,
    nonparanormal_distance,
    pairwise_correlation,
    quartet_tables,
    quartet_test,
    recursive_grouping,
    sample_threshold,
    spanning_tree_edges,
    spectral_distance,
    spectral_variance,
)
from ._engine.user_warnings import warn

__all__ = [
    "spectral_distance",
    "gaussian_distance",
    "pairwise_correlation",
    "kernel_distance",
    "nonparanormal_distance",
    "neighbor_joining",
    "recursive_grouping",
    "spanning_tree_edges",
    "chow_liu_tree",
    "chow_liu",
    "hidden_chow_liu",
    "grouped_chow_liu",
    "mutual_information",
    "clrg",
    "clnj",
    "learn_tree",
    "sample_threshold",
    "STRUCTURE_METHODS",
    "quartet_test",
    "quartet_tables",
    "build_tree_quartets",
    "learn_tree_quartets",
    "bionj",
    "bme_length",
    "minimum_evolution_search",
    "spectral_variance",
    "binary_leaf_tree",
    "censored_residual",
]


def chow_liu_tree(D):
    """Deprecated name of :func:`spanning_tree_edges` (it takes distances, where
    :func:`chow_liu` takes mutual information); removed in 0.3."""
    warn(
        "chow_liu_tree was renamed spanning_tree_edges (it returns the edges of the "
        "minimum spanning tree of a distance matrix); the old name will be removed in 0.3.",
        FutureWarning,
    )
    return spanning_tree_edges(D)
