"""BLAS threads of the passes."""

from __future__ import annotations

from functools import lru_cache

from threadpoolctl import ThreadpoolController

__all__ = ["single_threaded_blas"]


@lru_cache(maxsize=1)
def _controller():
    """The BLAS libraries loaded (found once: the search walks every loaded library,
    about 2 ms, which ``threadpool_limits`` repeats on every call - 7% of a 1e5-row
    fit's 27 E-steps, measured)."""
    return ThreadpoolController()


def single_threaded_blas():
    """Context manager limiting BLAS to one thread: the products of the passes are small
    (``k' x k'`` by ``k' x rows``) and BLAS threads waiting for each other on busy cores
    slowed an E-step 50-fold (measured); row blocks share the cores instead."""
    return _controller().limit(limits=1, user_api="blas")
