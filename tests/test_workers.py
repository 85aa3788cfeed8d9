"""When a batch of independent fits goes to worker processes."""

import os
import signal
import threading
import time

import numpy as np
import pytest
from sklearn.utils._param_validation import InvalidParameterError

from ltm_sklearn import GaussianLatentTree, LatentTreeClassifier, SpectralLatentTree
from ltm_sklearn._engine import threads, workers
from ltm_sklearn._engine.threads import block_threads


def _square(x):
    return x * x


def test_a_batch_starts_the_workers_only_when_it_takes_longer_than_their_start(monkeypatch):
    monkeypatch.setattr(workers, "_last_batch", None)
    start, cheap = workers.START_BATCH_SECONDS, workers.SIDE_BY_SIDE_SECONDS
    assert cheap < start
    assert not workers.worth_workers(2, 0.5 * (cheap + start))
    assert workers.worth_workers(2, start)
    assert not workers.worth_workers(1, np.inf)  # one job: never


def test_a_batch_alone_starts_the_workers_only_when_it_saves_more_than_their_start(
    monkeypatch,
):
    monkeypatch.setattr(workers, "_last_batch", None)
    start = workers.START_SECONDS
    # two workers save half of a batch's time, four three quarters
    assert not workers.worth_workers(2, 1.9 * start, alone=True)
    assert workers.worth_workers(2, 2.0 * start, alone=True)
    assert workers.worth_workers(4, 1.4 * start, alone=True)
    assert not workers.worth_workers(4, 1.3 * start, alone=True)
    # a batch that others follow starts them earlier, for those too
    assert workers.worth_workers(2, workers.START_BATCH_SECONDS)
    assert workers.START_BATCH_SECONDS < 2.0 * start
    # running workers take it above the side-by-side threshold, alone or not
    monkeypatch.setattr(workers, "_last_batch", workers.time.monotonic())
    assert workers.worth_workers(2, workers.SIDE_BY_SIDE_SECONDS, alone=True)


def test_running_workers_take_any_batch_above_the_side_by_side_threshold(monkeypatch):
    monkeypatch.setattr(workers, "_last_batch", None)
    assert not workers.workers_running()
    assert workers.run_in_workers(_square, [(2,), (3,)], 2) == [4, 9]
    assert workers.workers_running()
    middle = 0.5 * (workers.SIDE_BY_SIDE_SECONDS + workers.START_BATCH_SECONDS)
    assert workers.worth_workers(2, middle)
    assert not workers.worth_workers(2, 0.5 * workers.SIDE_BY_SIDE_SECONDS)
    # joblib's workers exit when idle: after that, a batch pays their start again
    monkeypatch.setattr(workers, "_last_batch", workers._last_batch - 2 * workers._IDLE_SECONDS)
    assert not workers.workers_running()
    assert not workers.worth_workers(2, middle)


def _pid_after(seconds):
    time.sleep(seconds)
    return os.getpid()


def _fails_on(x, bad):
    if x == bad:
        raise ValueError(f"call {x} failed")
    return x


def test_a_batch_runs_here_and_in_a_worker_in_the_order_of_its_calls():
    workers._executor(1).submit(workers._ready).result()  # a worker is up
    pids = workers.run_in_workers(_pid_after, [(0.1,)] * 12, 2)
    assert len(pids) == 12
    assert os.getpid() in pids  # this process takes calls too
    assert len(set(pids)) == 2  # and the worker
    # the calls keep their order whoever ran them: this process from the first on
    assert pids[0] == os.getpid() and pids[-1] != os.getpid()
    assert workers.run_in_workers(_square, [(x,) for x in range(7)], 2) == [x * x for x in range(7)]


def test_a_batch_of_one_process_runs_here():
    assert workers.run_in_workers(_pid_after, [(0.0,)] * 3, 1) == [os.getpid()] * 3


def test_an_error_of_a_call_is_raised_wherever_it_ran():
    workers._executor(1).submit(workers._ready).result()
    calls = [(x, 5) for x in range(6)]
    with pytest.raises(ValueError, match="call 5 failed"):  # the worker's first call
        workers.run_in_workers(_fails_on, calls, 2)
    calls = [(x, 0) for x in range(6)]
    with pytest.raises(ValueError, match="call 0 failed"):  # this process's first call
        workers.run_in_workers(_fails_on, calls, 2)
    # and the executor serves the next batch
    assert workers.run_in_workers(_square, [(2,), (3,)], 2) == [4, 9]


def _threads_over(seconds):
    """The thread counts the passes would get, read every 10 ms for ``seconds``, and
    the process that read them (asserting that a batch of the call's own would keep the
    count it started with)."""
    seen, end = [], time.monotonic() + seconds
    first = block_threads(None)
    while True:
        seen.append(block_threads(None, passes=True))
        assert block_threads(None) == first
        if time.monotonic() > end:
            return os.getpid(), seen
        time.sleep(0.01)


def test_every_call_gets_the_cores_share_of_one_process_while_others_run():
    workers._executor(1).submit(workers._ready).result()
    share = max(1, workers.cpu_count() // 2)
    seen = workers.run_in_workers(_threads_over, [(0.05,)] * 8, 2)
    here = [s for pid, s in seen if pid == os.getpid()]
    there = [s for pid, s in seen if pid != os.getpid()]
    assert here and there
    assert all(set(s) == {share} for s in there)  # the workers: always their share
    # here: the share while a worker still runs; all the cores at most on the last call,
    # once the worker has nothing left to take
    assert all(set(s) == {share} for s in here[:-1])
    assert set(here[-1]) <= {share, 2 * share}
    assert getattr(threads._limits, "n", None) is None  # lifted after the batch


@pytest.mark.skipif(workers.cpu_count() < 2, reason="one core: no worker's share to take")
def test_the_call_left_running_here_takes_the_idle_workers_cores():
    workers._executor(1).submit(workers._ready).result()
    share = max(1, workers.cpu_count() // 2)
    # the costs put the long call here (the largest first) and the short one in the worker
    calls, costs = [(0.1,), (1.0,)], [0.1, 1.0]
    (pid_short, short), (pid_long, long) = workers.run_in_workers(
        _threads_over, calls, 2, costs=costs
    )
    assert pid_long == os.getpid() and pid_short != os.getpid()
    assert set(short) == {share}
    # its share while the worker ran, then every core once the worker was done
    assert long[0] == share and long[-1] == 2 * share
    assert sorted(long) == long


def test_the_calls_keep_their_order_whatever_order_they_ran_in():
    workers._executor(1).submit(workers._ready).result()
    costs = [3.0, 1.0, 4.0, 1.5, 5.0, 9.0, 2.0]
    calls = [(x,) for x in range(len(costs))]
    assert workers.run_in_workers(_square, calls, 2, costs=costs) == [x * x for x in range(7)]


def test_a_lost_worker_is_replaced():
    executor = workers._executor(1)
    pid = executor.submit(os.getpid).result()
    os.kill(pid, signal.SIGKILL)
    time.sleep(0.5)
    assert not workers._usable(executor)
    # the next batch gets a new pool, and this process works while its worker starts
    assert workers.run_in_workers(_square, [(x,) for x in range(5)], 2) == [x * x for x in range(5)]
    # and the next batch has a worker again
    workers._executor(1).submit(workers._ready).result()
    assert len(set(workers.run_in_workers(_pid_after, [(0.1,)] * 12, 2))) == 2


def test_the_limit_of_threads_holds_in_its_own_thread_only():
    seen = {}

    def other():
        seen["other"] = block_threads(None)

    with threads.limited_threads(1):
        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert block_threads(None) == 1
    assert seen["other"] == block_threads(None)


def test_n_jobs_beyond_the_cores_gets_the_cores_and_zero_is_refused():
    cores = workers.cpu_count()
    assert block_threads(1000) == cores and block_threads(-1) == cores and block_threads(1) == 1
    X = np.random.default_rng(0).integers(0, 2, (40, 4))
    for est in (SpectralLatentTree(n_jobs=0), GaussianLatentTree(n_jobs=0)):
        with pytest.raises(InvalidParameterError, match="n_jobs"):
            est.fit(X)
    with pytest.raises(InvalidParameterError, match="n_jobs"):
        LatentTreeClassifier(n_jobs=0).fit(X, np.r_[np.zeros(20), np.ones(20)])
