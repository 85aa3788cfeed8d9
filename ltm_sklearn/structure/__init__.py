"""Structure learning: tree metrics and tree reconstruction (functions first)."""

from .distances import spectral_distance
from .nj import neighbor_joining

__all__ = ["spectral_distance", "neighbor_joining"]
