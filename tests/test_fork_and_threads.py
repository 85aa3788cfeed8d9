"""Fits from several Python threads at once, and in processes forked after a fit: the
process-wide state the passes keep (BLAS's thread count, the pool of row-block threads,
the worker processes) must not leak from one to the other."""

import multiprocessing
import threading
import warnings

import numpy as np
import pytest
from threadpoolctl import threadpool_info

from ltm_sklearn import GaussianLatentTree, SpectralLatentTree
from ltm_sklearn._engine import inference, workers
from ltm_sklearn.datasets import LatentTreeModel, balanced_binary_tree

needs_fork = pytest.mark.skipif(
    "fork" not in multiprocessing.get_all_start_methods(), reason="no fork on this platform"
)


def _blas_threads():
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


def _in_two_threads(run):
    """``run(0)`` and ``run(1)`` in two threads at once, joined."""
    threads = [threading.Thread(target=run, args=(seed,)) for seed in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _data(n=20_000):
    tree = balanced_binary_tree(8)
    return tree, LatentTreeModel.random(tree, 2, 2, random_state=0).sample(n, random_state=1)


def test_fits_in_two_threads_at_once_leave_blas_threads_as_they_were_and_fit_the_same():
    tree, X = _data(4_000)
    before = _blas_threads()

    def fit(seed):
        return SpectralLatentTree(2, tree=tree, random_state=seed).fit(X)

    alone = [fit(seed).score(X) for seed in (0, 1)]
    for _ in range(3):
        scores = {}

        def run(seed, scores=scores):
            scores[seed] = fit(seed).score(X)

        _in_two_threads(run)
        # each call restoring the count it found let the second thread restore the
        # first one's limit of 1 (a leaked limit: BLAS on one thread for good)
        assert _blas_threads() == before
        assert [scores[0], scores[1]] == alone


def test_gaussian_fits_in_two_threads_at_once_leave_blas_threads_as_they_were():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 6)) @ rng.standard_normal((6, 6))
    before = _blas_threads()
    alone = [GaussianLatentTree(random_state=s).fit(X).score(X) for s in (0, 1)]
    scores = {}

    def run(seed):
        scores[seed] = GaussianLatentTree(random_state=seed).fit(X).score(X)

    _in_two_threads(run)
    # its k-means start limited BLAS for its own call
    assert _blas_threads() == before
    assert [scores[0], scores[1]] == alone


def test_the_buffers_of_a_thread_that_ended_are_not_kept():
    tree, X = _data(2_000)
    est = SpectralLatentTree(2, tree=tree, random_state=0).fit(X)

    def score():
        est.score_samples(X)

    for _ in range(5):  # a thread per request, each scoring rows
        t = threading.Thread(target=score)
        t.start()
        t.join()
    # each thread that registers drops those of the threads that ended: of the five,
    # only the last one's are left
    ended = [t for t, _ in inference._ALL_BUFFERS if not t.is_alive()]
    assert len(ended) <= 1


def _fit_in_child(queue, tree, X):
    try:
        est = SpectralLatentTree(2, tree=tree, random_state=0, n_jobs=2).fit(X)
        queue.put(("score", est.score(X), dict(workers._pools), workers.workers_running()))
    except BaseException as e:  # reported to the parent
        queue.put(("error", repr(e), None, None))


@needs_fork
def test_a_process_forked_after_a_fit_fits_and_starts_its_own_workers():
    tree, X = _data()
    est = SpectralLatentTree(2, tree=tree, random_state=0, n_jobs=2).fit(X)
    expected = est.score(X)
    # the parent's worker processes are up (a batch ran in them)
    assert workers.run_in_workers(np.square, [(2,), (3,)], 2) == [4, 9]
    assert workers.workers_running()
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    with warnings.catch_warnings():
        # Python warns that forking a process with threads may deadlock: what is tested
        warnings.simplefilter("ignore", DeprecationWarning)
        child = context.Process(target=_fit_in_child, args=(queue, tree, X))
        child.start()
    child.join(120)
    alive = child.is_alive()
    if alive:
        child.kill()
    # the parent's pool of row-block threads, inherited without its threads, made the
    # child's first pass wait for ever
    assert not alive, "the forked child's fit did not finish"
    kind, score, pools, running = queue.get(timeout=10)
    assert kind == "score", score
    assert score == pytest.approx(expected, abs=1e-12)
    # nor does it take the parent's worker processes for its own
    assert pools == {} and not running


def test_classifier_fits_in_two_threads_at_once_warn_each_and_leave_the_filters():
    import pandas as pd

    from ltm_sklearn import KernelLatentTree, LatentTreeClassifier

    rng = np.random.RandomState(0)
    X = pd.DataFrame(
        {"a": rng.randn(300), "b": rng.randn(300), "coded": rng.randint(1, 4, 300) * 1.0}
    )
    y = (X["a"] + rng.randn(300) > 0).astype(int)
    filters, show = list(warnings.filters), warnings.showwarning
    for _ in range(2):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            errors = []

            def fit(seed, errors=errors):
                try:
                    estimator = KernelLatentTree(2, random_state=seed)
                    LatentTreeClassifier(estimator, shared_tree=True, random_state=seed).fit(X, y)
                except Exception as e:  # pragma: no cover - reported below
                    errors.append(e)

            _in_two_threads(fit)
        assert not errors
        # each fit issues its warning about the column once; with warnings.catch_warnings
        # in each fit the two swapped the process's filters and lost or kept records
        about_coded = [w for w in caught if "column 'coded'" in str(w.message)]
        assert len(about_coded) == 2
        assert warnings.filters == filters and warnings.showwarning is show
