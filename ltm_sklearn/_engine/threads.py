"""BLAS threads of the passes."""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from functools import lru_cache, wraps

from joblib import cpu_count, effective_n_jobs
from threadpoolctl import ThreadpoolController

__all__ = [
    "single_threaded_blas",
    "single_threaded",
    "block_threads",
    "limited_threads",
    "ThreadShare",
]


def block_threads(n_jobs, passes=False):
    """Threads over the row blocks of the message passes, and the processes of a batch
    of fits side by side.

    ``n_jobs=None`` uses the cores the process may use, as scikit-learn's ``KMeans``
    and histogram gradient boosting use their OpenMP threads by default: at most
    ``OMP_NUM_THREADS`` when it is set (joblib sets it in the workers of an outer
    ``n_jobs``, such as ``GridSearchCV(n_jobs=...)``, so nested fits do not
    oversubscribe the cores). An integer is joblib's ``n_jobs`` (``-1``: every core),
    at most the cores the process may use.
    The blocks are the same whatever the number of threads, and their sums are taken in
    the same order, so the result does not depend on it. Under a :class:`ThreadShare`,
    ``passes=True`` (the passes' own threads) reads its current count, and otherwise its
    first one: a fit that takes an idle worker's cores for its passes does not start
    batches side by side of its own."""
    limit = getattr(_limits, "n", None)
    if isinstance(limit, ThreadShare):
        limit = limit.n if passes else limit.base
    if limit is not None:
        return limit if n_jobs is None else min(limit, effective_n_jobs(n_jobs))
    if n_jobs is not None:
        # at most the cores: more threads share them, and more worker processes each
        # import the package (n_jobs=24 on two cores: 27 processes, a fit 2.4x slower)
        return min(effective_n_jobs(n_jobs), _cores())
    n = _cores()
    limit = os.environ.get("OMP_NUM_THREADS", "")
    if limit.strip().isdigit() and int(limit) > 0:
        n = min(n, int(limit))
    return max(1, n)


_limits = threading.local()  # .n: the threads of limited_threads while it holds


class ThreadShare:
    """A thread count of the passes that another thread may raise while the calls under
    :func:`limited_threads` run: each pass reads it when it starts (so a call that
    runs on alone once the worker processes are idle takes their cores from its next
    pass on; its batches keep ``base``, the count it started with). The row blocks do
    not depend on it, so neither does the result."""

    def __init__(self, n):
        self.base = self.n = int(n)


@contextmanager
def limited_threads(n):
    """Context manager: :func:`block_threads` gives at most ``n`` in this thread
    (while its calls share the cores with worker processes,
    :func:`~ltm_sklearn._engine.workers.run_in_workers`); ``n`` an int or a
    :class:`ThreadShare`."""
    before = getattr(_limits, "n", None)
    _limits.n = n
    try:
        yield
    finally:
        _limits.n = before


@lru_cache(maxsize=1)
def _cores():
    """The cores the process may use, found once: joblib reads the cgroup limits on every
    call (about 30 us, once per E-step)."""
    return cpu_count()


@lru_cache(maxsize=1)
def _controller():
    """The BLAS libraries loaded (found once: the search walks every loaded library,
    about 2 ms, which ``threadpool_limits`` repeats on every call - 7% of a 1e5-row
    fit's 27 E-steps, measured)."""
    return ThreadpoolController()


_blas_depth = threading.local()  # .n: this thread's calls inside single_threaded_blas
_BLAS_LOCK = threading.Lock()
#: ``(thread ident, limiter)`` of the thread whose limit holds, or None
_blas_owner = None


@contextmanager
def single_threaded_blas():
    """Context manager limiting BLAS to one thread: the products of the passes are small
    (``k' x k'`` by ``k' x rows``) and BLAS threads waiting for each other on busy cores
    slowed an E-step 50-fold (measured); row blocks share the cores instead.

    BLAS's thread count belongs to the process, and threadpoolctl lets one thread at a
    time change it, so the calls of every thread share one limit: the first thread to
    enter sets it (reading the count to restore while no limit holds) and restores it
    when its outermost call ends; a thread still inside then takes the limit at its next
    call (the passes enter once per E-step). Each call setting and restoring a limit of
    its own let two fits in two threads leave BLAS on one thread for good: the second
    read the first one's limit as the count to restore."""
    global _blas_owner
    me = threading.get_ident()
    _blas_depth.n = getattr(_blas_depth, "n", 0) + 1
    with _BLAS_LOCK:
        if _blas_owner is None:
            _blas_owner = (me, _controller().limit(limits=1, user_api="blas"))
    try:
        yield
    finally:
        _blas_depth.n -= 1
        if _blas_depth.n == 0:
            with _BLAS_LOCK:
                if _blas_owner is not None and _blas_owner[0] == me:
                    _blas_owner[1].restore_original_limits()
                    _blas_owner = None


def _after_fork_in_child():
    """A forked child has only the thread that forked: a lock another thread held, or
    a limit it owned, would never be released there."""
    global _BLAS_LOCK, _blas_owner
    _BLAS_LOCK = threading.Lock()
    if _blas_owner is not None and _blas_owner[0] != threading.get_ident():
        _blas_owner = None


os.register_at_fork(after_in_child=_after_fork_in_child)


def single_threaded(func):
    """Decorator: ``func`` runs under :func:`single_threaded_blas` (for functions whose
    products are small dense blocks, such as the Gaussian trees' EM)."""

    @wraps(func)
    def wrapper(*args, **kwargs):
        with single_threaded_blas():
            return func(*args, **kwargs)

    return wrapper
