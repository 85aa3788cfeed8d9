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
