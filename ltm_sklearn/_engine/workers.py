"""Worker processes for batches of independent fits: when a batch is worth them, and
running it there.

The candidate fits of a selection, the walks of the Gaussian model's search and the
classifier's trial fits are seeded tasks whose results do not depend on where they run,
so running them side by side in processes (joblib's ``loky`` backend) is a question of
time only. Starting the workers is the expensive part: each one imports NumPy, SciPy,
scikit-learn and the package, 1.8-2.2 s of wall time for two workers on the 2-core
machine; once started, joblib keeps them and a batch costs about 10 ms more than its
work. A batch therefore goes to running workers when it would take at least
:data:`SIDE_BY_SIDE_SECONDS` one after another, and starts them only when it would take
at least :data:`START_BATCH_SECONDS`: a fit with a batch that long has more of them
(the first of the digits demo's automatic fit is estimated at 2 s one after another,
and about 25 follow), while a fit whose batches all stay shorter ends before the start
would pay. Measured on the first fit of a process
(``LatentTreeClassifier(n_hidden_states="auto")``, whose batches are estimated at most
at 0.7 s on car and 1.3 s on german): 3.6 and 4.4 s with the workers started for its
batches, 1.6 and 2.3 s in this process. A batch that no other follows (the Gaussian
model's search over structures) starts them only when it saves more than their start
(:data:`START_SECONDS`): on pima, whose search is estimated at 2.5 s one after another,
the first fit of a process took 1.3-1.7 s in it against 2.5-4.0 s with the workers
started for the search.
"""

from __future__ import annotations

import time

from joblib import Parallel, delayed

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
#: wall seconds to start two workers on the 2-core machine (measured above)
START_SECONDS = 2.0
#: joblib's loky workers exit after this many idle seconds
_IDLE_SECONDS = 300.0

_last_batch = None  # time.monotonic() at the end of the last batch run in the workers


def workers_running():
    """Whether this process ran a batch in the workers recently enough that they are
    still up (joblib keeps them for ``_IDLE_SECONDS`` after their last task)."""
    return _last_batch is not None and time.monotonic() - _last_batch < _IDLE_SECONDS


def worth_workers(n_jobs, serial_seconds, alone=False):
    """Whether a batch that would take ``serial_seconds`` one after another runs in
    ``n_jobs`` worker processes (see the module's docstring). ``alone``: no batch that
    could use the workers follows in the fit, so a batch that starts them has to pay for
    their start (:data:`START_SECONDS`) with the time it saves, ``serial_seconds * (1 -
    1 / n_jobs)``.

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


def run_in_workers(func, calls, n_jobs):
    """``[func(*args) for args in calls]``, in ``n_jobs`` worker processes."""
    global _last_batch
    out = Parallel(n_jobs=n_jobs, backend="loky")(delayed(func)(*args) for args in calls)
    _last_batch = time.monotonic()
    return out
