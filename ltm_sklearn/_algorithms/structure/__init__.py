"""Structure learning: tree metrics and tree reconstruction (functions first)."""

from .censored import censored_residual
from .chow_liu import chow_liu, clnj, clrg, spanning_tree_edges
from .distances import (
    corrected_mutual_information,
    correlation_distance,
    gaussian_distance,
    gaussian_information,
    kernel_distance,
    mutual_information,
    nonparanormal_distance,
    pairwise_correlation,
    spectral_distance,
)
from .hidden_chow_liu import grouped_chow_liu, hidden_chow_liu
from .learn import STRUCTURE_METHODS, learn_tree, sample_threshold
from .nj import neighbor_joining
from .quartet import build_tree_quartets, learn_tree_quartets, quartet_tables, quartet_test
from .rg import recursive_grouping
from .search import binary_leaf_tree, bionj, bme_length, minimum_evolution_search, spectral_variance

__all__ = [
    "spectral_distance",
    "gaussian_distance",
    "correlation_distance",
    "gaussian_information",
    "corrected_mutual_information",
    "pairwise_correlation",
    "kernel_distance",
    "nonparanormal_distance",
    "neighbor_joining",
    "recursive_grouping",
    "spanning_tree_edges",
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
    "censored_residual",
    "binary_leaf_tree",
]
