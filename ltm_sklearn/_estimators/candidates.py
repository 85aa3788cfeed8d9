"""The candidate fits of a selection as tasks, run one after another or side by side.

A selection fits many candidates that do not depend on each other within one rung of a
race: the structures at one ``k'``, the finalists, the members' starts, and the refit of
the members on every row. Each is a
:class:`CandidateTask` - a tree, a start, an EM budget and a seed of its own - and
:func:`run_task` is a function of the task and the data only. So the model does not
depend on whether the tasks ran in this process or in worker processes, in which
order, or on ``n_jobs``.

Side by side means this process and worker processes
(:func:`~ltm_sklearn._engine.workers.run_in_workers`): at the ``k'`` a selection tries
first, an E-step is mostly Python-level work per edge, which holds the GIL, so threads
over candidates ran no faster (measured on the digits demo). A batch runs side by side
when its estimated time one after another (:func:`_estimated_seconds`) is worth it
(:func:`~ltm_sklearn._engine.workers.worth_workers`: workers that are not running yet
start only for a batch estimated at about their own start time or more).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np

from .._algorithms.em import EarlyStopping, EMState, node_states, random_cpts
from .._engine.inference import release_buffers
from .._engine.moments import beyond_memory
from .._engine.threads import block_threads, single_threaded_blas
from .._engine.tree import LatentTree
from .._engine.workers import run_in_workers, worth_workers
from .fits import FittedModel
from .selection import TIE_TOL

__all__ = ["CandidateTask", "task_seed", "run_task", "run_tasks", "early_stopping"]

#: EM's held-out stopping rule in a selection: a reading every ``CHECK_EVERY`` steps,
#: stop after ``CHECK_PATIENCE`` readings without improvement
CHECK_EVERY = 5
CHECK_PATIENCE = 3
#: the estimate of an E-step: seconds per edge of Python-level work, and per
#: multiply-add of the messages between hidden nodes (three products per edge); a
#: scheduling estimate only (measured on the digits demo: 5 ms an E-step at k' = 2,
#: 15 ms at k' = 32, float32)
_EDGE_SECONDS = 3e-5
_MULTIPLY_ADD_SECONDS = 3e-10
#: and of the moment start, per hidden node (its three-view decompositions: 0.34 s for
#: 60 hidden nodes on the digits demo)
_START_SECONDS = 6e-3


@dataclass
class CandidateTask:
    """One candidate fit of a selection.

    Attributes
    ----------
    k : int
        Hidden states.
    tree : LatentTree
    start : {"own", "grown", "resume", "random"}
        EM from the estimator's own start (:meth:`_fit_parameters`), from ``fit`` with
        every hidden state copied under ``noise`` (:func:`~ltm_sklearn.tensor.
        expand_states`), from ``fit`` itself (its iterations counted), or from a random
        start.
    max_iter : int
        EM iterations this task may run.
    stop_early : bool
        EM also stops on the held-out rule (:func:`early_stopping`).
    seed : int
        The task's random stream (:func:`task_seed`).
    fit : FittedModel, default=None
        The fit that ``"grown"`` and ``"resume"`` start from.
    noise : float, default=None
        Relative perturbation of the copied states (``"grown"``).
    settings : dict
        Keyword arguments of the estimator's ``_polish`` (``alpha``, ``softening``): the
        values a selection chose, for the fits after the choice (not for ``"own"``,
        whose start precedes any choice).
    goes_on : bool, default=False
        The fit keeps where its EM run stopped (``FittedModel.em_state``), and a
        ``"resume"`` from such a fit goes on from there as one run, on the same rows.
    expected_iter : int, default=None
        The iterations a task that stops early is expected to run (a fit like it ran
        that many), for :func:`_estimated_seconds` only; ``None``: ``max_iter``.
    """

    k: int
    tree: LatentTree
    start: str
    max_iter: int
    stop_early: bool
    seed: int
    fit: FittedModel | None = None
    noise: float | None = None
    settings: dict = field(default_factory=dict)
    goes_on: bool = False
    expected_iter: int | None = None


def task_seed(base, *key):
    """A seed for the task named by the integers ``key``, from the selection's ``base``
    seed: the same key gives the same stream whatever ran before it."""
    return int(np.random.SeedSequence([int(base), *map(int, key)]).generate_state(1)[0])


def early_stopping(est, tree, moments, held, unseen, keep_start=True):
    """EM's stopping rule on the held-out rows of a selection (``keep_start``: as in
    :class:`~ltm_sklearn._algorithms.em.EarlyStopping`)."""

    def score(root, cpts):
        fitted = FittedModel(tree, root, cpts)
        return held.mean(est._held_out_log_likelihood(fitted, moments, held.rows, unseen))

    return EarlyStopping(
        score, every=CHECK_EVERY, patience=CHECK_PATIENCE, tol=TIE_TOL, keep_start=keep_start
    )


def run_task(est, task, train, moments=None, held=None, unseen=None):
    """Run ``task`` on the training moments ``train``: ``(fit, held-out log-likelihoods
    per row)`` on the held-out rows ``held`` of ``moments`` (``None`` without them).

    ``est`` supplies the hooks (``_fit_parameters``, ``_polish``, ``_resume``,
    ``_held_out_log_likelihood``), each given the task's ``k``.
    BLAS runs on one thread, here as in a worker process (a product summed by several
    threads rounds differently, and EM carries the difference along).
    """
    try:
        with single_threaded_blas():
            return _run_task(est, task, train, moments, held, unseen)
    finally:
        release_buffers()  # a worker keeps no message buffers between tasks


def _run_task(est, task, train, moments, held, unseen):
    rng = np.random.RandomState(task.seed)
    stopping = early_stopping(est, task.tree, moments, held, unseen) if task.stop_early else None
    settings = dict(task.settings)
    if task.goes_on:
        kept = task.fit.em_state if task.start == "resume" else None
        settings["em_state"] = EMState() if kept is None else copy.copy(kept)
    if task.start == "resume":
        fitted = est._resume(task.fit, train, task.k, rng, task.max_iter, stopping, **settings)
    elif task.start == "grown":
        root, cpts = task.fit.root_marginal, task.fit.cpts
        fitted = est._polish(
            task.tree, train, task.k, root, cpts, {}, rng, task.max_iter, noise=task.noise,
            early_stopping=stopping, **settings,
        )  # fmt: skip
    elif task.start == "random":
        n_states = node_states(task.tree, train.n_states, task.k)
        root, cpts = random_cpts(task.tree, n_states, rng)
        fitted = est._polish(
            task.tree, train, task.k, root, cpts, {}, rng, task.max_iter,
            early_stopping=stopping, **settings,
        )  # fmt: skip
    elif task.start == "own":
        if task.settings:
            raise ValueError("A task from the estimator's own start takes no settings.")
        fitted = est._fit_parameters(
            task.tree, train, task.k, rng, max_iter=task.max_iter, early_stopping=stopping
        )
    else:
        raise ValueError(f"Unknown start {task.start!r} of a candidate task.")
    if held is None:
        return fitted, None
    return fitted, est._held_out_log_likelihood(fitted, moments, held.rows, unseen)


def _estimated_seconds(task, n_rows):
    """Seconds the task would take in this process: its EM iterations times an E-step
    (:data:`_EDGE_SECONDS`, :data:`_MULTIPLY_ADD_SECONDS`), and the estimator's own
    start (:data:`_START_SECONDS` per hidden node). With one hidden state EM stops
    within three steps (every hidden node is constant: the first step reaches the
    optimum, the next ones confirm it); a task that stops early runs about its
    ``expected_iter``."""
    tree = task.tree
    hidden = len(tree.hidden_nodes)
    step = (tree.n_nodes - 1) * _EDGE_SECONDS + hidden * n_rows * task.k**2 * 3 * (
        _MULTIPLY_ADD_SECONDS
    )
    start = hidden * _START_SECONDS if task.start == "own" else 0.0
    iterations = task.max_iter
    if task.k == 1:
        iterations = min(iterations, 3)
    elif task.stop_early and task.expected_iter is not None:
        iterations = min(iterations, task.expected_iter)
    return max(iterations, 1) * step + start


def run_tasks(est, tasks, train, moments=None, held=None, unseen=None):
    """:func:`run_task` for every task, in order: in worker processes (as many as
    ``est.n_jobs`` allows, see :func:`~ltm_sklearn._engine.threads.block_threads`) when
    there are several, the data are in memory and the batch is worth them
    (:func:`~ltm_sklearn._engine.workers.worth_workers` of :func:`_estimated_seconds`);
    here otherwise. The results are the same either way."""
    tasks = list(tasks)
    jobs = min(block_threads(est.n_jobs), len(tasks))
    n_rows = np.count_nonzero(train.sample_weight > 0)
    costs = [_estimated_seconds(t, n_rows) for t in tasks]
    side_by_side = (
        jobs > 1
        and not beyond_memory(train)
        and (moments is None or not beyond_memory(moments))
        and worth_workers(jobs, sum(costs))
    )
    if not side_by_side:
        return [run_task(est, t, train, moments, held, unseen) for t in tasks]
    calls = [(est, t, train, moments, held, unseen) for t in tasks]
    # the largest first here, where the last one running takes the idle workers' cores
    return run_in_workers(run_task, calls, jobs, costs=costs)
