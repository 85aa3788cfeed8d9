"""Tensor algebra, whitening and the robust tensor power method of Anandkumar et al. (JMLR 2014)
(public
path of :mod:`ltm_sklearn._algorithms.tensor`)."""

from ._algorithms.tensor import (
    expand_states,
    tensor_cpts,
    tensor_power_method,
    three_view_decomposition,
    whiten,
)

__all__ = [
    "whiten",
    "tensor_power_method",
    "three_view_decomposition",
    "tensor_cpts",
    "expand_states",
]
