"""The automatic fit: ``n_hidden_states="auto"``, ``structure="auto"``,
``n_members="auto"``, ``alpha="auto"``, ``softening="auto"`` and ``entropy="auto"`` chosen
on held-out rows.

:func:`select_model` races the candidate structures at each ``k'`` up a ladder of
hidden-state counts (:func:`~.selection.race`, :func:`~.selection.grow`), runs the best
fits on to the held-out stopping rule, then chooses the prior and the members; it returns
a :class:`~.fits.ModelChoice` that ``fit`` turns into fitted attributes. The functions
read the estimator's hooks (``_polish``, ``_fit_parameters``, ``_resolve_tree``, ...).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .._algorithms.em import can_average_members, mixture_weights
from .._engine.threads import block_threads
from .._engine.tree import LatentTree
from .candidates import CandidateTask, early_stopping, run_tasks, task_seed
from .fits import DEFAULT_ALPHA, TABLE_MEMORY, ModelChoice, moment_states, pruned_fit
from .selection import (
    PATIENCE,
    TIE_TOL,
    best_key,
    gains_beyond_se,
    grow,
    no_held_out_rows,
    out_of_reach,
    paired_se,
    race,
    within_se,
)

__all__ = [
    "select_model",
    "select_alpha",
    "select_softening",
    "select_entropy",
    "select_members",
    "select_state_pruning",
]

#: the phases of a selection, in the keys of its tasks' seeds (:func:`task_seed`)
_LADDER, _FINAL, _ALPHA, _MEMBERS, _SOFTENING, _ENTROPY = range(6)

#: latent structures carried from one ``k'`` to the next by ``n_hidden_states="auto"``
#: once ``k' >= _AUTO_PRUNE_FROM`` (below, every candidate is fitted: at small ``k'`` the
#: latent structures score alike, and the one that gains most from more states may rank
#: third); also the fewest structures a race at one ``k'`` runs to its last rung
_AUTO_KEEP = 2
_AUTO_PRUNE_FROM = 8
#: ``n_hidden_states="auto"`` stops growing ``k'`` before the candidate fits of a level
#: would take the selection's multiply-adds past this (rows x edges x k'^2 x EM
#: iterations x 6) - a bound in operations, not seconds, so that the choice does not
#: depend on the machine
_AUTO_OPERATIONS = 4e12
#: up to this ``k'`` the growth waits ``PATIENCE`` levels for an improvement; beyond it
#: (a level costs about as much as all the smaller ones together: ``k'^2`` per edge),
#: one level that does not improve by more than one paired standard error ends it
_PATIENT_UP_TO = 16
#: relative perturbation of the copied states when ``n_hidden_states="auto"`` grows a fit
#: to more states: larger than when a start is expanded to a given ``k'``, so that EM
#: leaves the copies' symmetric point (see the user guide)
_GROW_NOISE = 0.5
#: EM iterations of the candidate fits at the last rung of a race (a ranking needs less
#: precision than the final fit), and the first rung's share of them
_SELECTION_MAX_ITER = 50
_FIRST_RUNG = 6
#: ``alpha="auto"``: the search starts from the default pseudo-count and moves by
#: ``_ALPHA_FACTOR`` while the held-out score improves, within ``[_ALPHA_MIN, _ALPHA_MAX]``
_ALPHA_FACTOR = 2.0
_ALPHA_MIN = 1.0 / 64
_ALPHA_MAX = 16.0
#: ``softening="auto"``: the values tried after none, from the smallest, doubled while the
#: held-out score improves (the published binary softenings keep 0.9995-0.999 of an
#: entry's weight on its value: 1/2048 to 1/1024)
_SOFTENING_MIN = 1.0 / 4096
_SOFTENING_MAX = 1.0 / 8
#: ``entropy="auto"``: the strengths tried after none, from the smallest, doubled while
#: the held-out score improves (0.01 was the best of 0.001, 0.01 on 1,600 rows of jester)
_ENTROPY_MIN = 1.0 / 1024
_ENTROPY_MAX = 1.0 / 8
#: ``min_state_rows="auto"``: the thresholds tried after none (expected training rows of
#: a hidden state), from the smallest, doubled while the held-out score improves
_PRUNE_ROWS_MIN = 0.5
_PRUNE_ROWS_MAX = 8.0
#: the settings that ``"auto"`` chooses on held-out rows and that have no default choice
_SETTINGS = ("alpha", "softening", "entropy")
#: ``n_members="auto"``: at most this many members, each added while the held-out score
#: of the average gains (more than ``TIE_TOL``)
_AUTO_MAX_MEMBERS = 4


def _rungs(cap):
    """Cumulative EM iterations of the rungs of a race: ``_FIRST_RUNG``, doubled up to
    ``cap``."""
    rungs = []
    effort = min(_FIRST_RUNG, cap)
    while effort < cap:
        rungs.append(effort)
        effort *= 2
    return (*rungs, cap)


def select_model(est, moments, rng):
    """The model chosen on the held-out rows of :meth:`_selection_split`: a
    :class:`ModelChoice`.

    With ``structure="auto"`` every candidate structure is learned on the training
    rows and the structures race at each ``k'`` (:func:`~.selection.race`): every
    one gets a few EM iterations, the better half goes on with twice as many, always
    compared at the same number of iterations; the last rung runs to at most
    ``_SELECTION_MAX_ITER`` iterations, stopped early when the held-out
    log-likelihood stops improving (:class:`~ltm_sklearn._algorithms.em.
    EarlyStopping`). With ``n_hidden_states="auto"`` this runs for ``k' = 1, 2, 3, 4,
    8, 16, 24, ...`` (:data:`AUTO_HIDDEN_STATES`, :func:`~.selection.grow`): from ``k' = 8``
    on, each ``k'`` fits the ``_AUTO_KEEP`` latent structures that scored best at the
    previous one (and any other that gained more than their leader), starting EM
    from that fit with every hidden state copied
    (:func:`~ltm_sklearn.tensor.expand_states`) when the tree is the same; the growth
    stops after ``PATIENCE`` values of ``k'`` in a row that do not improve the best
    score (beyond ``k' = 16``, after one that does not improve it by more than one
    paired standard error: :func:`~.selection.gains_beyond_se`), or before a level
    would pass the budget ``_AUTO_OPERATIONS``.

    The best score wins; when it is a tree without hidden nodes (Chow-Liu), a latent
    structure within one standard error of it (paired over the held-out rows) wins
    instead, so the latent tree is kept where the data do not tell it from a Chow-Liu
    tree. Differences within ``TIE_TOL`` are ties, broken toward fewer hidden states
    and then the order of :data:`AUTO_CANDIDATES` (:func:`~.selection.best_key`).
    With ``n_hidden_states="auto"`` the best fit wins, unless a fit with a ``k'`` the
    moments identify is within one paired standard error of it: then the fewest such
    states win (the one-standard-error rule, :func:`~.selection.simplest_within_se`,
    among the models the data identify). That fit, the best fit at another ``k'`` and the
    best fit the moments started at each ``k'`` they identify, when within two paired
    standard errors of the best of those or stopped by the training tolerance before the
    races' effort (then not compared at equal effort), are the finalists: each gets the
    races' last rung of EM iterations more; then the best of them and the
    moment-started ones run on to the held-out stopping rule (at most ``max_iter``
    iterations), and the same rule chooses among them. A moment-started one that then
    trails the best beyond two paired standard errors, and by more than that rung gained
    it, stops there.
    """
    names = est._candidate_structures()
    # every fit of the selection draws from a stream of its own (see candidates.py)
    base_seed = rng.randint(np.iinfo(np.int32).max)
    alpha_seed = task_seed(base_seed, _ALPHA)
    auto_k = isinstance(est.n_hidden_states, str)
    grid = est._hidden_state_grid(moments) if auto_k else [int(est.n_hidden_states)]
    split = est._selection_split(moments)
    if split is None:
        # the structure falls back to the first candidate (the default "auto" stays
        # usable on a handful of rows); a choice asked for explicitly is refused
        asked = ["n_hidden_states"] if auto_k else []
        asked += [p for p in _SETTINGS if isinstance(getattr(est, p, None), str)]
        if asked:
            what = asked[0]
            weights = moments.sample_weight
            raise no_held_out_rows(what, float(weights.sum()), int(np.count_nonzero(weights)))
        return ModelChoice(grid[0], names[0])
    train, held, unseen = split
    cap = min(est.max_iter, _SELECTION_MAX_ITER)
    rungs = _rungs(cap) if est._resumable_fits else (cap,)
    scores, fits, lls, trees = {}, {}, {}, {}
    ladder = {"alive": list(names), "previous": None, "spent": 0.0}
    n_train = np.count_nonzero(train.sample_weight > 0)
    n_cols = len(train.n_states)

    def level(k):
        alive, previous = ladder["alive"], ladder["previous"]
        # a tree without hidden nodes is carried without a fit
        fitted = [
            n for n in alive if (n, previous) not in fits or fits[(n, previous)].tree.hidden_nodes
        ]
        cost = 6.0 * cap * n_train * k * k * 2 * n_cols * len(fitted)
        if previous is not None and auto_k and ladder["spent"] + cost > _AUTO_OPERATIONS:
            if est.verbose:
                print(f"k'={k}: not tried (the selection's budget of operations)")
            return None
        ladder["spent"] += cost
        racing, level_trees = [], {}
        for name in alive:
            key = (name, est._tree_rank(name, k, train))
            if key not in trees:
                tree = est._resolve_tree(train, name, k)
                trees[key] = LatentTree(tree.edges, tree.n_observed)
            tree = level_trees[name] = trees[key]
            if not tree.hidden_nodes and (name, previous) in scores:
                for table in (scores, fits, lls):  # no hidden state to add
                    table[(name, k)] = table[(name, previous)]
                continue
            racing.append(name)

        def advance(racing_names, effort, last):
            tasks, done = [], {}
            for name in racing_names:
                tree, fitted = level_trees[name], fits.get((name, k))
                seed = task_seed(base_seed, _LADDER, k, names.index(name), effort)
                if fitted is None:
                    start = fits.get((name, previous))
                    # beyond the k' the moments identify, grown from the fit below; a fit
                    # that cannot go on (est._resumable_fits) always starts anew
                    grown = k > moment_states(train.n_states) and est._resumable_fits
                    if start is not None and start.tree.edges == tree.edges and grown:
                        task = CandidateTask(
                            k, tree, "grown", effort, last, seed, start, _GROW_NOISE
                        )
                    elif k == 1 and est._resumable_fits:
                        # every hidden node constant: the expected counts are the data's
                        # whatever the start, and one EM step reaches the optimum
                        task = CandidateTask(k, tree, "random", effort, last, seed)
                    else:
                        task = CandidateTask(k, tree, "own", effort, last, seed)
                elif fitted.converged:  # nothing more to gain on the training rows
                    done[name] = scores[(name, k)]
                    continue
                else:
                    task = CandidateTask(
                        k, tree, "resume", effort - fitted.n_iter, last, seed, fitted
                    )
                tasks.append((name, task))
            results = run_tasks(est, [t for _, t in tasks], train, moments, held, unseen)
            for (name, _), (fitted, ll) in zip(tasks, results):
                fits[(name, k)], lls[(name, k)] = fitted, ll
                scores[(name, k)] = done[name] = held.mean(ll)
            return [done[name] for name in racing_names]

        # up to the first pruning every structure finishes: the pruning compares
        # them at equal effort (cut at an early rung, the structure that leads
        # baudio from k' = 24 on ranked third at k' = 8 and was dropped)
        finish = len(racing) if k <= _AUTO_PRUNE_FROM else min(_AUTO_KEEP, len(racing))
        race(racing, advance, rungs, keep=finish, batch=True)
        level_scores = {n: scores[(n, k)] for n in alive}
        if est.verbose:
            lead = best_key(level_scores, names.index)

            def gap(n):  # behind the level's leader, in paired standard errors
                if n == lead:
                    return ""
                se = paired_se(lls[(lead, k)], lls[(n, k)], held.weights)
                return f" ({(level_scores[lead] - level_scores[n]) / max(se, 1e-12):.1f} s.e.)"

            text = ", ".join(f"{n} {s:.4f}{gap(n)}" for n, s in level_scores.items())
            print(f"k'={k}: held-out log-likelihood per row {text}")
        if k >= _AUTO_PRUNE_FROM:
            gains = {n: s - scores.get((n, previous), -np.inf) for n, s in level_scores.items()}
            ranked = sorted(
                alive, key=lambda n: (-round(level_scores[n] / TIE_TOL), names.index(n))
            )
            # the best _AUTO_KEEP latent structures go on, and any other that gained
            # more than their leader (on baudio the structure ranked third at k' = 4
            # gains most from k' = 8 on and leads at 24); a tree without hidden
            # nodes costs nothing more and takes no place. Two are kept even when the
            # second trails: with one, the budget of operations takes the ladder to
            # larger k', whose average of members scores lower (jester: k' = 48 with
            # three members -52.356 on test, k' = 32 with four -52.225)
            latent = [n for n in ranked if level_trees[n].hidden_nodes]
            pace = gains[latent[0]] if latent else np.inf
            ladder["alive"] = [
                n
                for n in ranked
                if not level_trees[n].hidden_nodes or n in latent[:_AUTO_KEEP] or gains[n] > pace
            ]
        ladder["previous"] = k
        leader = best_key(level_scores, names.index)
        best = ladder.get("best")
        # clearly below the best (beyond two paired standard errors)
        ladder["worse"] = best is not None and gains_beyond_se(
            best, (leader, k), scores, lls, held.weights, n_se=2.0
        )
        # whether the level gained on the best before it by more than the noise
        ladder["gained"] = best is None or gains_beyond_se(
            (leader, k), best, scores, lls, held.weights
        )
        if est.verbose and best is not None:
            se = paired_se(lls[(leader, k)], lls[best], held.weights)
            print(f"k'={k}: gain {level_scores[leader] - scores[best]:.4f} (s.e. {se:.4f})")
        if best is None or level_scores[leader] > scores[best]:
            ladder["best"] = (leader, k)
        return level_scores[leader]

    def level_unless_worse(k):
        # a k' clearly below the best (beyond two paired standard errors) ends the
        # growth without waiting for the patience, and so does, once the next level costs
        # as much as the ones before it together, a level that did not gain more than one
        # paired standard error (digits demo: k' = 32 gained 0.0004 on 24, s.e. 0.05,
        # and 48, not chosen, cost 2 s of 17; jester: 24 gained 0.011 on 16, s.e. 0.011,
        # and stopping there scored -52.211 on test rows in place of -52.225 at 32)
        if ladder.get("worse") or (not ladder.get("gained", True) and k > _PATIENT_UP_TO):
            return None
        return level(k)

    grow(grid, level_unless_worse, patience=PATIENCE)

    # the best model (ties: fewer hidden states, then the order of the candidates);
    # a latent structure within one standard error of a tree without hidden nodes wins
    def order(key):
        return key[1], names.index(key[0])

    top = best_key(scores, order)
    latent = [key for key in scores if fits[key].tree.hidden_nodes]
    if not fits[top].tree.hidden_nodes:
        near = within_se(top, latent, scores, lls, held.weights)
        if near:
            top = best_key({key: scores[key] for key in near}, order)
    identified = moment_states(train.n_states)

    def parsimonious(top, keys):
        """``top``, or the fewest hidden states of ``keys`` at a ``k'`` the moments
        identify within one paired standard error of it (the one-standard-error rule,
        :func:`~.selection.simplest_within_se`). Not beyond them: on jester the rule over
        every ``k'`` chose 16 where the best held-out fit was at 24 and the model at 32
        (with its members) scored -52.225 on test rows, against -52.292 for 16."""
        if not auto_k or not fits[top].tree.hidden_nodes:
            return top
        near = [key for key in keys if key[1] <= identified and fits[key].tree.hidden_nodes]
        return min([top, *within_se(top, near, scores, lls, held.weights)], key=order)

    top = parsimonious(top, latent)
    # the finalists - the best fit, the best at another k' and the fits the moments
    # started - run on to their held-out stopping rule (the races' last rung at full
    # effort) and the best wins: compared after the races' 50 iterations, a larger k'
    # grown from a smaller one can trail it and pass it once both run on
    finalists = [top]
    if auto_k and fits[top].tree.hidden_nodes:
        others = {key: scores[key] for key in latent if key[1] != top[1]}
        if others:
            finalists.append(best_key(others, order))
        # and the fits the moments started (a k' they identify; the best of each k')
        # within two paired standard errors of the best of them: a grown fit starts with
        # its parent's race iterations behind it, so the ladder can climb on EM progress
        # rather than on states (20,000 rows of an 8-leaf truth with 3 states and 3
        # categories: k' = 3 cut at the race's 50 iterations is 0.0020 nats per row from
        # the truth on test rows and 0.0012 run to 300, where the ladder went on to k' =
        # 16, 0.0027), and a smaller k' behind a larger one after 50 iterations can
        # catch up (with 5 categories, k' = 3 trailed 4 by 0.0022, s.e. 0.0018; run on,
        # it is within one standard error of 4 and wins by the one-standard-error rule:
        # 0.0028 nats per row from the truth on test rows, against 0.0047 for 4)
        started = [key for key in latent if key[1] <= identified]
        if started:
            lead = best_key({key: scores[key] for key in started}, order)
            for k in sorted({key[1] for key in started}):
                best_k = best_key({key: scores[key] for key in started if key[1] == k}, order)
                clearly_worse = gains_beyond_se(lead, best_k, scores, lls, held.weights, 2.0)
                # a fit the training tolerance stopped short of the races' effort was not
                # compared at equal effort: it runs on before it is judged (8 leaves, k =
                # 3, 5 categories: k' = 3 stopped after 22 iterations 0.0068 behind k' =
                # 4, 3 s.e., and run on it is within 0.001 of it)
                # (one state: every start reaches the optimum in one step)
                short = k > 1 and fits[best_k].converged and fits[best_k].n_iter < cap
                if best_k not in finalists and (short or not clearly_worse):
                    finalists.append(best_k)
    # (an estimator whose fits cannot resume ran its race's one rung at full effort);
    # finalists compared with each other run on whether or not the training tolerance
    # stopped them, to the held-out rule alone: a fit that gains under tol per
    # iteration still climbs, and a grown one had its parent's iterations behind it
    compared = len(finalists) > 1

    def run_on(keys, budget, stage):
        """EM on from the fits of ``keys``, at most ``budget(key)`` more iterations."""
        keys = [key for key in keys if budget(key) > 0]
        tasks = [
            CandidateTask(
                key[1],
                fits[key].tree,
                "resume",
                budget(key),
                True,
                task_seed(base_seed, _FINAL, key[1], names.index(key[0]), stage),
                fits[key],
                settings={"tol": 0.0} if compared else {},
            )
            for key in keys
        ]
        for key, (more, ll) in zip(keys, run_tasks(est, tasks, train, moments, held, unseen)):
            if est.verbose:
                print(
                    f"k'={key[1]}, {key[0]}: held-out {scores[key]:.4f} before, "
                    f"{held.mean(ll):.4f} after {more.n_iter} EM iterations"
                )
            fits[key], lls[key], scores[key] = more, ll, held.mean(ll)

    def rest(key):
        return est.max_iter - fits[key].n_iter

    if est._resumable_fits and compared:
        # at equal effort first (the races' last rung more for each); then the best,
        # and the fits the moments started, run on to their held-out rule. A larger
        # finalist that trails after that effort stops there (on baudio k' = 16, behind
        # 24, ran on for 291 iterations); a moment-started one costs little (a k' the
        # moments identify) and climbs slowly from its start (on the truth of the test
        # where k' = 3 has to win, it trails k' = 16 by 0.0028 nats per row after 61
        # iterations and passes it by its held-out rule)
        before = {key: scores[key] for key in finalists}
        run_on(finalists, lambda key: min(cap, rest(key)), 0)
        lead = best_key({key: scores[key] for key in finalists}, order)

        def may_catch_up(key):
            # a moment-started fit out of reach of the leader after that rung is not run
            # on (on the digits demo k' = 3 trailed k' = 24 by 4.6 nats per row after
            # gaining 0.16 over its rung, and ran on for 200 more iterations, 5% of the
            # fit, to gain 0.11). Within two standard errors it runs on: the
            # one-standard-error rule may choose it
            gained = scores[key] - before[key]
            return not out_of_reach(key, lead, gained, scores, lls, held.weights)

        more = [
            key
            for key in finalists
            if (key == lead or (key[1] <= identified and may_catch_up(key)))
            and not fits[key].converged
        ]
        run_on(more, rest, 1)
    elif est._resumable_fits and not fits[finalists[0]].converged:
        run_on(finalists, rest, 0)
    top = parsimonious(best_key({key: scores[key] for key in finalists}, order), finalists)
    name_best, k_best = top
    winner = fits[top]
    choice = ModelChoice(k_best, name_best, winner, float(train.sample_weight.sum()))
    choice.held_out, choice.unseen_proba = held, unseen
    choice.structure_scores = {n: s for (n, k), s in scores.items() if k == k_best}
    if auto_k:
        # per k', the best structure with hidden nodes: a tree without them (Chow-Liu)
        # scores the same at every k' and would hide the curve where it leads (the
        # digits demo's k' = 1 and 2); its score is among the structure scores
        per_k = [key for key in scores if fits[key].tree.hidden_nodes] or list(scores)
        for key in per_k:
            choice.k_scores[key[1]] = max(scores[key], choice.k_scores.get(key[1], -np.inf))
        choice.k_scores = dict(sorted(choice.k_scores.items()))
    if isinstance(est.alpha, str):
        choice.alpha, choice.alpha_scores, choice.fit = select_alpha(
            est, choice.fit, k_best, train, moments, split, np.random.RandomState(alpha_seed), cap
        )
    # what the fits after a choice run with (the chosen pseudo-count and softening)
    settings = {} if choice.alpha is None else {"alpha": choice.alpha}
    if isinstance(est.softening, str):
        rng_softening = np.random.RandomState(task_seed(base_seed, _SOFTENING))
        choice.softening, choice.softening_scores, choice.fit = select_softening(
            est, choice.fit, k_best, train, moments, split, rng_softening, cap, settings
        )
        settings["softening"] = choice.softening
    # the fit the chosen one grew from: the level below, same tree
    below = [fits[(name_best, k)] for k in choice.k_scores if (name_best, k) in fits]
    below = [f for f in below if len(f.root_marginal) < k_best]
    grown_from = None
    if below and below[-1].tree.edges == winner.tree.edges:
        if k_best > moment_states(train.n_states):
            grown_from = below[-1]
    if isinstance(est.entropy, str):
        choice.entropy, choice.entropy_scores, choice.fit = select_entropy(
            est, choice.fit, k_best, train, moments, split, base_seed, est.max_iter,
            grown_from, settings,
        )  # fmt: skip
        settings["entropy"] = choice.entropy
    if auto_k and isinstance(est.n_members, str):
        choice.members, choice.member_scores, choice.member_weights = select_members(
            est, choice.fit, k_best, train, moments, split, base_seed, cap, est.max_iter,
            grown_from, settings,
        )  # fmt: skip
    elif est._given_members() > 1 and est._resumable_fits and est.max_iter > 0 and k_best > 1:
        # a given n_members on the same rows: min_state_rows="auto" chooses on the model
        # it prunes, and the final fit goes on from these members
        choice.members, _, _ = select_members(
            est, choice.fit, k_best, train, moments, split, base_seed, cap, est.max_iter,
            None, settings, count=est._given_members(),
        )  # fmt: skip
    if isinstance(est.min_state_rows, str):
        choice.min_state_rows, choice.min_state_rows_scores = select_state_pruning(
            est, choice, moments, split
        )
    else:
        choice.min_state_rows = float(est.min_state_rows)
    if est.verbose:
        print(f"chose k'={k_best}, structure={name_best!r}")
    return choice


def _continue_with(
    est, start, k, train_moments, moments, split, rng, max_iter, setting, fits, settings=None
):
    """``run(value)``: EM from the fit ``start`` (``k`` hidden states) with the
    ``_polish`` argument ``setting`` at ``value`` and the others of ``settings`` (at most
    ``max_iter`` iterations, stopped early on the held-out rows of ``split``); the fit
    goes to ``fits[value]`` and its held-out mean log-likelihood per row is returned."""
    _, held, unseen = split

    def run(value):
        # each value is scored where its own EM leads, not at the common start
        stopping = early_stopping(est, start.tree, moments, held, unseen, keep_start=False)
        fits[value] = est._polish(
            start.tree,
            train_moments,
            k,
            start.root_marginal,
            start.cpts,
            start.extras,
            rng,
            max_iter,
            early_stopping=stopping,
            **{**(settings or {}), setting: value},
        )
        return held.mean(est._held_out_log_likelihood(fits[value], moments, held.rows, unseen))

    return run


def _last_gain(walked, best, previous, gain):
    """The last value of a walk (``{value: score}``, in order from a start scoring
    ``previous``) that gained more than ``gain`` over the one before it; ``best`` if none
    did."""
    for value, score in walked.items():
        if score <= previous + gain:
            break
        best, previous = value, score
    return best


def _doubling_walk(run, low, high, none_score, gain):
    """A regulariser's strengths ``low``, ``2 low``, ... up to ``high``, each scored by
    ``run(value)`` while it gains more than ``gain`` (:func:`~.selection.grow` with a
    patience of one) over none, which scores ``none_score``: ``(scores of the values
    run, the chosen value or 0.0)``."""
    values = []
    value = low
    while value <= high:
        values.append(value)
        value *= 2
    walked = grow(values, run, patience=1, tol=gain, best=none_score)
    return walked, _last_gain(walked, 0.0, none_score, gain)


def select_alpha(est, start, k, train_moments, moments, split, rng, max_iter):
    """The Dirichlet pseudo-count by held-out log-likelihood (``alpha="auto"``), for
    the model chosen on the same split: ``(alpha, scores per alpha, fit at alpha)``.

    EM runs at most ``max_iter`` more iterations from the chosen candidate's fit
    ``start`` (stopped early on the held-out rows), once with ``DEFAULT_ALPHA`` and
    then with pseudo-counts ``_ALPHA_FACTOR`` times smaller (then, if that did not
    help, larger) for as long as the held-out score improves by more than ``tol``
    nats per row (:func:`~.selection.grow`); every value starts from the same fit.

    Measured: on sparse tables it pays (8-leaf ground truth, 12 categories, 400 rows:
    alpha 2, gap to the truth 0.23 vs 0.31 nats per row at 0.5); on the density
    benchmark it does not, so it is not the default (see the user guide).
    """
    fits = {}
    run = _continue_with(est, start, k, train_moments, moments, split, rng, max_iter, "alpha", fits)
    gain = max(est.tol, TIE_TOL)
    scores = {DEFAULT_ALPHA: run(DEFAULT_ALPHA)}
    best = DEFAULT_ALPHA
    for factor in (1.0 / _ALPHA_FACTOR, _ALPHA_FACTOR):
        values = []
        alpha = DEFAULT_ALPHA * factor
        while _ALPHA_MIN <= alpha <= _ALPHA_MAX:
            values.append(alpha)
            alpha *= factor
        walked = grow(values, run, patience=1, tol=gain, best=scores[DEFAULT_ALPHA])
        scores.update(walked)
        best = _last_gain(walked, DEFAULT_ALPHA, scores[DEFAULT_ALPHA], gain)
        if best != DEFAULT_ALPHA:
            break
    if est.verbose:
        text = ", ".join(f"{a:g} {s:.4f}" for a, s in sorted(scores.items()))
        print(f"alpha: held-out log-likelihood per row {text}; chose {best:g}")
    return best, dict(sorted(scores.items())), fits[best]


def select_softening(est, start, k, train_moments, moments, split, rng, max_iter, settings=None):
    """Data softening by held-out log-likelihood (``softening="auto"``), for the model
    chosen on the same split: ``(softening, scores per value, fit at it)``.

    ``start``, the chosen fit (EM already stopped on the held-out rows), scores no
    softening; EM then runs at most ``max_iter`` more iterations from it with softening
    ``_SOFTENING_MIN``, doubled while the held-out score improves by more than ``tol``
    nats per row (:func:`_doubling_walk`), each stopped early on the held-out rows.
    Softening is a regulariser (Liu & Van den Broeck, NeurIPS 2021): on 1,600 rows of
    plants at ``k' = 16`` softening 1/1000 gained 0.03 nats per row and 1/100 lost 0.24
    (see the user guide).
    """
    _, held, unseen = split
    fits = {0.0: start}
    run = _continue_with(
        est, start, k, train_moments, moments, split, rng, max_iter, "softening", fits, settings
    )
    gain = max(est.tol, TIE_TOL)
    scores = {0.0: held.mean(est._held_out_log_likelihood(start, moments, held.rows, unseen))}
    walked, best = _doubling_walk(run, _SOFTENING_MIN, _SOFTENING_MAX, scores[0.0], gain)
    scores.update(walked)
    if est.verbose:
        text = ", ".join(f"{v:g} {s:.4f}" for v, s in scores.items())
        print(f"softening: held-out log-likelihood per row {text}; chose {best:g}")
    return best, scores, fits[best]


def select_state_pruning(est, choice, moments, split):
    """The fewest expected training rows a hidden state needs to stay in the model, by
    held-out log-likelihood (``min_state_rows="auto"``): ``(rows, scores per value)``.

    The chosen model as fitted on the split's training rows
    (:meth:`~.fits.ModelChoice.model_of_training_rows`) scores no pruning; then its
    hidden states with fewer expected rows (marginal probability times the training
    weight) than ``_PRUNE_ROWS_MIN``, doubled while the held-out score improves by more
    than ``tol`` nats per row (:func:`_doubling_walk`), are removed
    (:func:`~ltm_sklearn._algorithms.hidden_states.prune_states`): no EM, one held-out
    evaluation each. On the digits demo (1,257 rows; on the benchmarks' machine four
    members at ``k' = 32``, 128 states a hidden node) the held-out rows chose 0.5 rows:
    the test log-likelihood rose from -27.41 to -27.30 nats per row, with 68% of the
    states; over eight seeds every one gained, 0.08 on average (``benchmarks/bench_states.py``).
    """
    _, held, unseen = split
    model = choice.model_of_training_rows()
    if not model.tree.hidden_nodes:
        return 0.0, {}

    def run(rows):
        fitted = pruned_fit(model, rows / choice.train_weight)
        return held.mean(est._held_out_log_likelihood(fitted, moments, held.rows, unseen))

    none, gain = run(0.0), max(est.tol, TIE_TOL)
    walked, best = _doubling_walk(run, _PRUNE_ROWS_MIN, _PRUNE_ROWS_MAX, none, gain)
    scores = {0.0: none, **walked}
    if est.verbose:
        text = ", ".join(f"{v:g} {s:.4f}" for v, s in scores.items())
        print(f"hidden states of fewer expected rows removed: held-out log-likelihood per "
              f"row {text}; chose {best:g}")  # fmt: skip
    return best, scores


def select_entropy(
    est, start, k, train_moments, moments, split, base_seed, max_iter, grown_from, settings=None
):
    """Entropy regularisation by held-out log-likelihood (``entropy="auto"``), for the
    model chosen on the same split: ``(strength, scores per value, fit at it)``.

    Entropy regularisation acts over the whole of EM's path, not in the last steps from
    a fit already stopped on the held-out rows (on 1,600 rows of jester, EM from the
    chosen fit lost 0.06 at 1/1024, while the automatic fit regularised throughout
    gained 0.16 at 0.003). So every strength - none, then ``_ENTROPY_MIN`` doubled while
    the held-out score improves by more than ``tol`` per row - is fitted from one start
    on the chosen tree: ``grown_from`` (the fit ``start`` grew from, ``None`` if none)
    with its states copied under fresh noise, as ``start`` was grown, else a random one
    (at most ``max_iter`` iterations, stopped early on the held-out rows). The best
    regularised fit replaces ``start`` only where it scores above both the
    unregularised fit from that start and ``start``. ``scores`` holds the held-out score
    of every strength, and ``"chosen"``: that of ``start``.
    """
    _, held, unseen = split
    seed = task_seed(base_seed, _ENTROPY)
    fits = {}

    kind = "random" if grown_from is None else "grown"

    def run(value):
        task = CandidateTask(
            k, start.tree, kind, max_iter, True, seed, grown_from, _GROW_NOISE,
            settings={**(settings or {}), "entropy": value},
        )  # fmt: skip
        ((fits[value], ll),) = run_tasks(est, [task], train_moments, moments, held, unseen)
        return held.mean(ll)

    gain = max(est.tol, TIE_TOL)
    chosen = held.mean(est._held_out_log_likelihood(start, moments, held.rows, unseen))
    scores = {0.0: run(0.0)}
    walked, best = _doubling_walk(run, _ENTROPY_MIN, _ENTROPY_MAX, scores[0.0], gain)
    scores.update(walked)
    if best and scores[best] <= chosen + gain:
        best = 0.0  # the chosen fit stays: its own start did better
    if est.verbose:
        text = ", ".join(f"{v:g} {s:.4f}" for v, s in scores.items())
        print(f"entropy: held-out log-likelihood per row {text} (chosen fit {chosen:.4f}); "
              f"chose {best:g}")  # fmt: skip
    scores["chosen"] = chosen
    return best, scores, fits[best] if best else start


def select_members(
    est, first, k, train_moments, moments, split, base_seed, cap, max_iter, grown_from,
    settings=None, count=None,
):  # fmt: skip
    """The fits averaged by ``n_members="auto"``, chosen on the held-out rows of
    ``split`` with the model: ``(fits, scores per number of members, their mixture
    weights)``. With ``count`` (a given ``n_members``), that many members from random
    starts, each stopped early as below, with equal weights (``None``).

    ``first`` (the chosen fit), then EM on its tree from other starts, each stopped
    early on the held-out rows (at most ``max_iter`` iterations, as the chosen fit)
    and kept while the held-out log-likelihood of the average gains
    (:func:`~.selection.grow` with a patience of one), at most ``_AUTO_MAX_MEMBERS``
    and tables within the memory budget. A start is random, or ``grown_from`` (the
    fit at the smaller ``k'`` that ``first`` grew from, ``None`` if none) with its
    states copied under fresh noise, as ``first`` was grown. For the second member the
    two kinds run side by side to the stopping rule, in rungs that go on from where the
    last one stopped (a kind far behind is dropped on the way: ``race_kinds``): the one
    whose average scores better is kept and starts the others.

    Measured (test log-likelihood per row): on plants (17,412 rows, k' = 48) grown
    starts kept four members (-12.47) and random ones two (-12.55: a random start
    stops far from an optimum of that size); on the 880 rows of the digits demo
    random starts kept four (-27.39) and grown ones two (-27.77: there the members'
    diversity is what pays). Stopped within the candidates' 50 iterations, random
    starts kept one member on plants (-12.70).

    No standard-error margin: a member of equal quality costs time rather than
    accuracy (row by row the log-likelihood of an average is at least the mean of its
    members'); measured on the density benchmark in the user guide.

    The kept members' mixture weights are then fitted by EM on the same held-out rows
    (:func:`~ltm_sklearn._algorithms.em.mixture_weights`)."""
    _, held, unseen = split
    tree = first.tree
    if not tree.hidden_nodes or not can_average_members(tree):
        return [first], {}, None
    fits = [first]
    average = est._held_out_log_likelihood(first, moments, held.rows, unseen)
    own_lls = [average]  # each kept member's own held-out log-likelihoods
    kinds = ["random"] if grown_from is None or count else ["random", "grown"]
    sizes = []  # the numbers of members whose tables fit the memory budget
    for m in range(2, (count or _AUTO_MAX_MEMBERS) + 1):
        if est._table_bytes(moments, k * m) > TABLE_MEMORY and not count:
            break
        sizes.append(m)
    jobs = block_threads(est.n_jobs)
    ready = {}  # m -> (fit, its held-out log-likelihoods), run ahead side by side
    # a member is expected to stop after about as many iterations as the last fit on
    # this tree (for scheduling only: on german's joint model, whose members ran 23-62
    # of their 300, the estimate at 300 started the worker processes for 0.2 s of work)
    expected = first.n_iter

    def task(m, kind, effort, last, fit=None, goes_on=False):
        seed = task_seed(base_seed, _MEMBERS, m, ("random", "grown").index(kind))
        chosen = dict(settings or {})
        common = dict(settings=chosen, goes_on=goes_on, expected_iter=expected)
        if fit is not None:
            return CandidateTask(k, tree, "resume", effort - fit.n_iter, last, seed, fit, **common)
        if kind == "random":
            return CandidateTask(k, tree, "random", effort, last, seed, **common)
        return CandidateTask(
            k, tree, "grown", effort, last, seed, grown_from, _GROW_NOISE, **common
        )

    def averaged(ll, m):
        """Held-out log-likelihoods of the average of the kept fits and one more, the
        ``m``-th (the average's density is the mean of its members', row by row)."""
        n = len(fits)
        assert n == m - 1, "a member is added only while each one before it was kept"
        return np.logaddexp(average + np.log(n), ll) - np.log(n + 1)

    def run(batch):
        return run_tasks(est, batch, train_moments, moments, held, unseen)

    def race_kinds(m):
        """The ``m``-th member from either kind of start, side by side to the stopping
        rule in rungs of ``cap`` iterations doubled up to ``max_iter`` (each rung goes
        on from where the last one stopped: the fits are those of one run):
        ``kind -> (fit, held-out log-likelihoods)`` of the kinds not dropped. After a
        rung, a kind whose average is out of reach of the other's
        (:func:`~.selection.out_of_reach`) is dropped (on plants at k' = 48 the random
        start trailed the grown one, which stopped after 172 iterations, and ran on to
        300 to stay 0.075 nats per row behind: 42 s of a 125-s fit)."""
        tried, alive, effort = {}, list(kinds), cap
        while True:
            going = [c for c in alive if c not in tried or not finished(tried[c][0])]
            if not going:
                break
            if len(going) == 1:  # alone: on to its stopping rule
                effort = max_iter
            before = {c: held.mean(averaged(tried[c][1], m)) for c in going if c in tried}
            batch = [task(m, c, effort, True, tried.get(c, (None,))[0], True) for c in going]
            tried.update(zip(going, run(batch)))
            effort = min(2 * effort, max_iter)
            if len(going) == 1:
                break
            lls = {c: averaged(tried[c][1], m) for c in alive}
            scores = {c: held.mean(ll) for c, ll in lls.items()}
            lead = max(alive, key=lambda c: (scores[c], c == "random"))
            for c in [c for c in going if c != lead and c in before]:
                gained = scores[c] - before[c]
                if out_of_reach(c, lead, gained, scores, lls, held.weights):
                    alive.remove(c)
                    if est.verbose:
                        print(
                            f"{m} members: {c} start dropped after {tried[c][0].n_iter} "
                            f"iterations, {scores[lead] - scores[c]:.4f} behind, "
                            f"{gained:.4f} gained on its rung"
                        )
        # the state was for the rungs: the member is a fit like any other
        return {c: (replace(tried[c][0], em_state=None), tried[c][1]) for c in alive}

    def finished(fit):
        return fit.converged or fit.n_iter >= max_iter

    def add(m):
        nonlocal average, expected
        if m not in sizes:
            return None
        if len(kinds) > 1 and cap < max_iter:
            # both kinds run side by side to the stopping rule (a kind far behind is
            # dropped on the way), and the one whose average scores better goes on
            # (ties: random)
            tried = race_kinds(m)
            kind = max(tried, key=lambda c: held.mean(averaged(tried[c][1], m)))
            if est.verbose:
                text = ", ".join(
                    f"{c} {held.mean(averaged(v[1], m)):.4f} after {v[0].n_iter} iterations"
                    for c, v in tried.items()
                )
                print(f"{m} members: held-out {text}")
            kinds[:] = [kind]
            fit, own = tried[kind]
            expected = fit.n_iter
        else:
            if m not in ready:
                # the next members' fits do not depend on which are kept: as many run
                # side by side as there are workers (those after a stop are dropped)
                ahead = [n for n in sizes if n >= m][:jobs]
                results = run([task(n, kinds[0], max_iter, True) for n in ahead])
                ready.update(zip(ahead, results))
            fit, own = ready.pop(m)
            kind = kinds[0]
        ll = averaged(own, m)
        score, before = held.mean(ll), held.mean(average)
        if est.verbose:
            se = paired_se(ll, average, held.weights)
            print(f"{m} members: {kind} start, gain {score - before:.4f} (s.e. {se:.4f})")
        if score > before + TIE_TOL or count:
            fits.append(fit)
            own_lls.append(own)
            average = ll
        return score

    scores = {1: held.mean(average)}
    if count:
        scores.update({m: add(m) for m in sizes})
        return fits, scores, None
    scores.update(grow(range(2, _AUTO_MAX_MEMBERS + 1), add, patience=1, best=scores[1]))
    weights = None
    if len(fits) > 1:
        weights = mixture_weights(np.array(own_lls), held.weights)
        if est.verbose:
            print("member weights on the held-out rows: " + ", ".join(f"{w:.3f}" for w in weights))
    return fits, scores, weights
