"""BLAS threads of the passes."""

from __future__ import annotations

from functools import lru_cache, wraps

from threadpoolctl import ThreadpoolController

__all__ = ["single_threaded_blas", "single_threaded"]


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


def single_threaded(func):
    """Decorator: ``func`` runs under :func:`single_threaded_blas` (for functions whose
    products are small dense blocks, such as the Gaussian trees' EM)."""

    @wraps(func)
    def wrapper(*args, **kwargs):
        with single_threaded_blas():
            return func(*args, **kwargs)

    return wrapper
