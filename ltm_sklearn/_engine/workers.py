"""Worker processes for batches of independent fits: when a batch is worth them, and
running it there.

The candidate fits of a selection, the walks of the Gaussian model's search and the
classifier's trial fits are seeded tasks whose results do not depend on where they run,
so running them side by side is a question of time only. A batch runs in this process
and ``n_jobs - 1`` worker processes (:func:`run_in_workers`, on a ``loky`` executor of the
package's own): this process takes the calls from the first on, each worker from the
last on. Starting a worker is the expensive part - it imports NumPy, SciPy,
scikit-learn and the package, 1-2 s on the 2-core machine - but the batch does not wait
for it: this process works meanwhile, and a batch that ends first is done here alone.
(When the batch waited for two workers to start, the first batch of the digits demo's
automatic fit took 2.3 s, against 1.0 s with this process working meanwhile; the whole
fit 1.2 s less on average over four values of ``random_state``, the same models.) Once
started, the workers are kept, and a call costs about 10 ms more than its work.

A batch goes to running workers when it would take at least
:data:`SIDE_BY_SIDE_SECONDS` one after another, and starts them only when it would take
at least :data:`START_BATCH_SECONDS`: a fit with a batch that long has more of them
(the first of the digits demo's automatic fit is estimated at 2 s one after another,
and about 25 follow), while a fit whose batches all stay shorter ends before the start
would pay. A batch that no other follows (the Gaussian model's search over structures)
starts them only when it saves more than their start (:data:`START_SECONDS`). These
thresholds were measured when a batch waited for the workers to start (the
classifier's first fit on car and german took 3.6 and 4.4 s with the workers started for
its batches, 1.6 and 2.3 s in one process; the Gaussian model's search on pima 2.5-4.0 s
against 1.3-1.7 s), and are the more cautious now that it does not.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque

from joblib import cpu_count
from joblib.externals.loky import ProcessPoolExecutor

from .threads import ThreadShare, limited_threads

__all__ = [
    "SIDE_BY_SIDE_SECONDS",
    "START_BATCH_SECONDS",
    "START_SECONDS",
    "worth_workers",
    "run_in_workers",
    "workers_running",
]

#: a batch runs in running workers when it would take at least this long one after
#: another; below, feeding the workers costs more than it saves
SIDE_BY_SIDE_SECONDS = 0.2
#: a batch starts the workers when it would take at least this long one after another
#: (between the batches measured above)
START_BATCH_SECONDS = 1.5
#: wall seconds that starting two workers cost a batch that waited for them, on the
#: 2-core machine (measured above)
START_SECONDS = 2.0
#: the workers exit after this many idle seconds
_IDLE_SECONDS = 300.0

_last_batch = None  # time.monotonic() at the end of the last batch run in the workers
_pools = {}  # number of processes -> the executor of _executor
_pools_lock = threading.Lock()
#: the thread counts of the native libraries, set in the workers as joblib sets them
_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def workers_running():
    """Whether this process ran a batch in the workers recently enough that they are
    still up (the executor keeps them for ``_IDLE_SECONDS`` after their last task)."""
    return _last_batch is not None and time.monotonic() - _last_batch < _IDLE_SECONDS


def worth_workers(n_jobs, serial_seconds, alone=False):
    """Whether a batch that would take ``serial_seconds`` one after another runs side
    by side in ``n_jobs`` processes (:func:`run_in_workers`; see the module's
    docstring). ``alone``: no batch that could use the workers follows in the fit, so a
    batch that starts them has to pay for their start (:data:`START_SECONDS`) with the
    time it saves, ``serial_seconds * (1 - 1 / n_jobs)``.

    >>> worth_workers(1, 100.0)
    False
    """
    if n_jobs <= 1:
        return False
    if workers_running():
        return serial_seconds >= SIDE_BY_SIDE_SECONDS
    if alone:
        return serial_seconds * (1.0 - 1.0 / n_jobs) >= START_SECONDS
    return serial_seconds >= START_BATCH_SECONDS


def run_in_workers(func, calls, n_jobs, costs=None):
    """``[func(*args) for args in calls]``, in this process and ``n_jobs - 1`` worker
    processes side by side.

    This process takes the calls from the first on, and each worker, once it is up,
    from the last on, one at a time, until none is left: so this process works while
    the workers start (a batch does not wait for them), and a batch that ends before
    they are up is done here alone. With ``costs`` (an estimate per call), the calls
    are taken in the order of their costs, the largest first here (and the smallest
    first in the workers). Every call runs with the threads of the passes limited to
    the cores' share of one process
    (:func:`~ltm_sklearn._engine.threads.limited_threads`), here as in the workers,
    until the workers have nothing left to take and none is busy: then the call that
    runs on here takes every core's threads from its next pass on (a batch of
    unequal calls, or an odd number of equal ones, otherwise ends with one core idle).
    """
    global _last_batch
    calls = list(calls)
    out = [None] * len(calls)
    if costs is None:
        order = deque(range(len(calls)))
    else:
        order = deque(sorted(range(len(calls)), key=lambda i: -costs[i]))
    lock = threading.Lock()
    taken = {}  # call -> set when a worker has returned it
    failed = []
    threads = _inner_threads(n_jobs)
    share = ThreadShare(threads)
    busy = [0]  # the workers running a call
    executor = _executor(n_jobs - 1) if n_jobs > 1 else None

    def alone_here():
        # (under the lock) nothing left for the workers and none busy
        if not order and busy[0] == 0:
            share.n = threads * n_jobs

    def feed():
        try:
            executor.submit(_ready).result()  # once a worker is up
        except Exception:  # no worker (e.g. a broken pool): this process does the calls
            return
        while True:
            with lock:
                if not order:
                    return
                i = order.pop()
                taken[i] = threading.Event()
                busy[0] += 1
            try:
                out[i] = executor.submit(_limited, threads, func, *calls[i]).result()
            except BaseException as e:  # raised again in the calling thread
                failed.append(e)
                with lock:
                    order.clear()
            finally:
                with lock:
                    busy[0] -= 1
                    alone_here()
                taken[i].set()

    for _ in range(n_jobs - 1):
        threading.Thread(target=feed, daemon=True).start()
    try:
        while True:
            with lock:
                if not order:
                    break
                i = order.popleft()
                alone_here()
            out[i] = _limited(share, func, *calls[i])
    except BaseException:
        with lock:
            order.clear()  # the workers stop after their current call
        raise
    # the calls the workers took (a worker still starting took none: no wait for it)
    for done in list(taken.values()):
        done.wait()
    _last_batch = time.monotonic()
    if failed:
        raise failed[0]
    return out


def _ready():
    """A call that returns as soon as a worker runs it."""
    return None


def _limited(threads, func, *args):
    """``func(*args)`` with at most ``threads`` threads over the passes' row blocks (an
    int, or a :class:`~ltm_sklearn._engine.threads.ThreadShare`)."""
    with limited_threads(threads):
        return func(*args)


def _inner_threads(n_jobs):
    """Threads of the passes in each of ``n_jobs`` processes side by side (as joblib
    limits those of its workers): the cores shared among them."""
    return max(1, cpu_count() // n_jobs)


def _executor(n_workers):
    """The package's ``loky`` executor with ``n_workers`` processes, kept between batches
    (its processes exit after ``_IDLE_SECONDS`` idle, and start again on the next
    call); one per number of processes, so that batches of other sizes, in other
    threads, do not replace it under each other. Its own, not joblib's shared one: a
    ``Parallel`` call of the user's (such as ``GridSearchCV(n_jobs=-1)``) keeps its
    workers, and the package keeps its own."""
    with _pools_lock:
        executor = _pools.get(n_workers)
        if executor is None or not _usable(executor):
            threads = str(_inner_threads(n_workers + 1))
            env = {name: threads for name in _THREAD_VARIABLES}
            executor = ProcessPoolExecutor(n_workers, timeout=_IDLE_SECONDS, env=env)
            _pools[n_workers] = executor
        return executor


def _after_fork_in_child():
    """A forked child does not own the parent's worker processes (a batch given the
    parent's executor would wait for them for ever): it starts its own if it needs them."""
    global _pools_lock, _last_batch
    _pools_lock = threading.Lock()
    _pools.clear()
    _last_batch = None


os.register_at_fork(after_in_child=_after_fork_in_child)


def _usable(executor):
    """Whether ``executor`` takes calls: not shut down, and no worker lost (a broken
    pool, e.g. after a worker was killed)."""
    flags = getattr(executor, "_flags", None)
    return not (getattr(flags, "broken", False) or getattr(flags, "shutdown", False))
