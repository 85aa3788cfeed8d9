"""Structure learning: tree metrics and tree reconstruction (functions first)."""

from .distances import gaussian_distance, nonparanormal_distance, spectral_distance
from .nj import neighbor_joining
from .rg import recursive_grouping

__all__ = [
    "spectral_distance",
    "gaussian_distance",
    "nonparanormal_distance",
    "neighbor_joining",
    "recursive_grouping",
]
