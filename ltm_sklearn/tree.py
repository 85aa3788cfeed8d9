"""The :class:`LatentTree` topology (public path of :mod:`ltm_sklearn._engine.tree`)."""

from ._engine.tree import LatentTree

__all__ = ["LatentTree"]
