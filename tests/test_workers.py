"""When a batch of independent fits goes to worker processes."""

import numpy as np

from ltm_sklearn._engine import workers


def _square(x):
    return x * x


def test_a_batch_starts_the_workers_only_when_it_takes_longer_than_their_start(monkeypatch):
    monkeypatch.setattr(workers, "_last_batch", None)
    start, cheap = workers.START_BATCH_SECONDS, workers.SIDE_BY_SIDE_SECONDS
    assert cheap < start
    assert not workers.worth_workers(2, 0.5 * (cheap + start))
    assert workers.worth_workers(2, start)
    assert not workers.worth_workers(1, np.inf)  # one job: never


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
