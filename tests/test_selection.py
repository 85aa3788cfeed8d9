"""The selection engine: held-out split, tie rule, growth, racing, EM's early stopping."""

import contextlib
import io
import re
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.special import logsumexp
from sklearn.datasets import load_digits
from sklearn.model_selection import GridSearchCV, train_test_split

from ltm_sklearn import (
    HierarchicalTensorLTM,
    KernelLatentTree,
    LatentTreeEM,
    QuartetTreeLearner,
    SpectralLatentTree,
)
from ltm_sklearn._algorithms.em import (
    EarlyStopping,
    EMState,
    fit_em,
    node_states,
    random_cpts,
)
from ltm_sklearn._engine.evidence import CodeEvidence
from ltm_sklearn._engine.inference import log_likelihood
from ltm_sklearn._engine.row_keys import holdout_weights, row_keys, row_values
from ltm_sklearn._estimators import candidates
from ltm_sklearn._estimators.candidates import task_seed
from ltm_sklearn._estimators.fits import FittedModel, average_fits
from ltm_sklearn._estimators.selection import (
    TIE_TOL,
    best_key,
    gains_beyond_se,
    grow,
    held_out_split,
    paired_se,
    race,
    simplest_within_se,
)
from ltm_sklearn.datasets import LatentTreeModel, balanced_binary_tree, load_debd


def test_best_key_breaks_ties_by_the_order():
    scores = {("a", 2): -1.0, ("b", 1): -1.0 + TIE_TOL / 2, ("c", 3): -2.0}
    assert best_key(scores, order=lambda key: key[1]) == ("b", 1)
    assert best_key({"x": 0.0, "y": 1.0}, order=["x", "y"].index) == "y"


def test_grow_stops_after_patience_and_on_none():
    seen = []

    def evaluate(k):
        seen.append(k)
        return [0.0, 1.0, 0.5, 0.7, 2.0][k]

    assert grow(range(5), evaluate, patience=2) == {0: 0.0, 1: 1.0, 2: 0.5, 3: 0.7}
    assert seen == [0, 1, 2, 3]
    # None stops before the value (a budget)
    assert grow(range(5), lambda k: None if k == 2 else float(k)) == {0: 0.0, 1: 1.0}


def test_race_compares_at_equal_effort_and_spends_on_the_leaders():
    # a candidate's score grows with its effort at a rate of its own: at equal effort the
    # fast learner leads, although the slow one would look better with more effort
    rates = {"slow": 0.5, "fast": 1.0, "mid": 0.8, "bad": 0.1}
    effort_spent = {}

    def advance(key, effort, last):
        effort_spent[key] = effort
        return rates[key] * np.log1p(effort)

    scores, reached = race(list(rates), advance, rungs=(2, 4, 8, 16), keep=1)
    assert max(scores, key=scores.get) == "fast"
    assert effort_spent["fast"] == 16
    assert effort_spent["bad"] == 2 and effort_spent["slow"] == 2  # halved after rung one
    assert reached["fast"] == 3 and reached["bad"] == 0
    # every comparison was made at one effort: the scores of a rung are of one effort
    for key, r in reached.items():
        assert scores[key] == pytest.approx(rates[key] * np.log1p((2, 4, 8, 16)[r]))


def test_race_keeps_at_least_keep_to_the_last_rung():
    scores, reached = race(["a", "b", "c"], lambda k, e, last: -ord(k) * e, (1, 2, 4), keep=2)
    assert sorted(k for k, r in reached.items() if r == 2) == ["a", "b"]


def test_race_without_anything_to_prune_runs_the_final_rung_at_once():
    calls = []

    def advance(keys, effort, last):
        calls.append((tuple(keys), effort, last))
        return [-ord(k) * effort for k in keys]

    scores, reached = race(["a", "b", "c"], advance, (1, 2, 4), keep=3, batch=True)
    assert calls == [(("a", "b", "c"), 4, True)]
    assert reached == {"a": 2, "b": 2, "c": 2} and scores["a"] == -4 * ord("a")
    # pruned down to keep: the survivors go to the final rung in one step
    calls.clear()
    race(["a", "b", "c", "d"], advance, (1, 2, 4, 8), keep=2, batch=True)
    assert calls == [(("a", "b", "c", "d"), 1, False), (("a", "b"), 8, True)]


def test_held_out_split_does_not_depend_on_the_order_of_the_rows():
    rng = np.random.default_rng(0)
    values = rng.integers(0, 3, size=(5, 400))
    weights = np.ones(400)
    a = held_out_split(values, weights, random_state=0)
    perm = rng.permutation(400)
    b = held_out_split(values[:, perm], weights[perm], random_state=0)

    def rows(split, vals):
        return sorted(map(tuple, vals[:, split.rows].T.tolist()))

    assert rows(a, values) == rows(b, values[:, perm])
    assert a.weights.sum() == pytest.approx(b.weights.sum())
    assert 0.1 < a.weights.sum() / 400 < 0.3
    assert held_out_split(values[:, :5], np.ones(5)) is None  # under 10 rows


def _ground_truth(seed=0, n=4000, k=3, states=4):
    model = LatentTreeModel.random(balanced_binary_tree(8), k, states, random_state=seed)
    return model, model.sample(n, random_state=seed), model.sample(2000, random_state=seed + 1)


def _overfitting_start():
    """A random start with more states than the truth (EM overfits its 600 rows), the
    training rows' evidence and 2,000 held-out rows'."""
    model, X, X_val = _ground_truth(n=600)
    tree = model.tree
    root, cpts = random_cpts(tree, node_states(tree, np.full(8, 4), 6), 0)
    codes, val = X.T.astype(np.int64), X_val.T.astype(np.int64)
    return tree, root, cpts, CodeEvidence(codes, np.full(8, 4)), CodeEvidence(val, np.full(8, 4))


@pytest.mark.parametrize("every", [1, 5])
def test_em_goes_on_from_its_state_as_one_run(every):
    tree, root, cpts, ev, ev_val = _overfitting_start()

    def stopping():
        return EarlyStopping(
            lambda r, c: log_likelihood(tree, r, c, ev_val).mean(), every=every, patience=3
        )

    def run(max_iter, state=None):
        return fit_em(
            tree, root, cpts, ev, np.ones(600), max_iter=max_iter, tol=0, alpha=0.5,
            early_stopping=stopping(), state=state,
        )  # fmt: skip

    whole = run(500)
    assert whole[4] and 6 < whole[3] < 500  # stopped by the held-out rule
    state, runs = EMState(), []
    for _ in range(200):  # runs of 3 E-steps, each from where the last one ended
        runs.append(run(3, state))
        if runs[-1][4]:
            break
    last = runs[-1]
    assert sum(r[3] for r in runs) == whole[3] and len(runs) > 2
    assert last[2] == whole[2]
    np.testing.assert_array_equal(last[0], whole[0])
    for u in whole[1]:
        np.testing.assert_array_equal(last[1][u], whole[1][u])
    # a run given an empty state fills it and is the run without one
    fresh = run(3, EMState())
    np.testing.assert_array_equal(fresh[0], runs[0][0])


def test_early_stopping_returns_the_best_held_out_parameters():
    tree, root, cpts, ev, ev_val = _overfitting_start()
    readings = []

    def score(r, c):
        readings.append(log_likelihood(tree, r, c, ev_val).mean())
        return readings[-1]

    stopping = EarlyStopping(score, every=1, patience=3)
    out = fit_em(tree, root, cpts, ev, np.ones(600), max_iter=500, tol=0, early_stopping=stopping)
    assert out[4] and out[3] < 500  # stopped by the held-out rule
    assert stopping.best_score == pytest.approx(max(readings))
    kept = log_likelihood(tree, out[0], out[1], ev_val).mean()
    assert kept == pytest.approx(max(readings))
    # three readings after the best, none better
    assert len(readings) - 1 - int(np.argmax(readings)) == 3


@pytest.mark.parametrize(
    "seed, states",
    [
        (0, 4),
        (1, 3),
        (2, 3),
        (3, 5),
        *(pytest.param(s, c, marks=pytest.mark.slow) for s, c in [(7, 6), (10, 4), (11, 5)]),
    ],
)
def test_auto_lands_on_the_true_number_of_states(seed, states):
    model, X, X_test = _ground_truth(seed=seed, n=20_000, states=states)
    est = SpectralLatentTree(
        n_hidden_states="auto", tree=model.tree, n_members=1, random_state=0
    ).fit(X)
    scores = est.n_hidden_states_scores_
    assert est.n_hidden_states_ == 3 or (
        est.n_hidden_states_ == 4 and scores[4] - scores[3] < 1e-3
    ), scores
    gap = model.log_likelihood(X_test).mean() - est.score(X_test)
    assert gap < 0.02


def test_scores_per_k_are_those_of_the_structures_with_hidden_nodes():
    # the Chow-Liu tree scores the same at every k': were it counted, it would be the
    # score of every k' it leads (here k' = 1 and 2) and flatten the curve there
    _, X, _ = _ground_truth(n=3000)
    est = SpectralLatentTree(n_hidden_states="auto", n_members=1, random_state=0).fit(X)
    scores, by_structure = est.n_hidden_states_scores_, est.structure_scores_
    latent = [s for name, s in by_structure.items() if name != "chow_liu"]
    assert scores[est.n_hidden_states_] == max(latent)
    assert scores[1] < scores[2] < by_structure["chow_liu"] < scores[3]


def test_auto_is_the_same_model_whatever_the_row_order_and_n_jobs():
    model, X, X_test = _ground_truth(n=3000)
    kw = dict(n_hidden_states="auto", tree=model.tree, random_state=0)
    a = SpectralLatentTree(**kw, n_jobs=1).fit(X)
    perm = np.random.default_rng(1).permutation(len(X))
    b = SpectralLatentTree(**kw, n_jobs=2).fit(X[perm])
    assert a.n_hidden_states_ == b.n_hidden_states_ and a.n_members_ == b.n_members_
    np.testing.assert_allclose(a.score_samples(X_test), b.score_samples(X_test), atol=1e-6)


def test_auto_fit_stops_on_held_out_and_warns_nothing():
    import warnings

    model, X, _ = _ground_truth(n=2000)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est = SpectralLatentTree(n_hidden_states="auto", random_state=0).fit(X)
    assert est.converged_


def test_race_in_batches_runs_the_same_race():
    rates = {"a": 1.0, "b": 3.0, "c": 2.0}
    calls = []

    def one(key, effort, last):
        return -rates[key] / effort

    def batch(keys, effort, last):
        calls.append((tuple(keys), effort))
        return [one(k, effort, last) for k in keys]

    assert race(list(rates), one, (2, 4, 8)) == race(list(rates), batch, (2, 4, 8), batch=True)
    # every rung is one call with the candidates still racing
    assert calls == [(("a", "b", "c"), 2), (("a", "c"), 4), (("a",), 8)]


def test_task_seeds_depend_on_the_key_only():
    a = task_seed(7, 0, 4, 2, 50)
    assert a == task_seed(7, 0, 4, 2, 50)
    assert (
        len({a, task_seed(7, 0, 4, 2, 12), task_seed(7, 1, 4, 2, 50), task_seed(8, 0, 4, 2, 50)})
        == 4
    )


def test_task_estimate_counts_the_expected_iterations():
    # a task that stops early is scheduled at the iterations a fit like it ran, not at
    # its budget; one that runs its budget, or has no expectation, at the budget
    tree = balanced_binary_tree(8)
    budget = candidates.CandidateTask(8, tree, "random", 300, True, 0)
    early = candidates.CandidateTask(8, tree, "random", 300, True, 0, expected_iter=30)
    full = candidates.CandidateTask(8, tree, "random", 300, False, 0, expected_iter=30)
    seconds = candidates._estimated_seconds
    assert seconds(early, 1000) == pytest.approx(seconds(budget, 1000) / 10)
    assert seconds(full, 1000) == seconds(budget, 1000)
    beyond = candidates.CandidateTask(8, tree, "random", 20, True, 0, expected_iter=30)
    assert seconds(beyond, 1000) == pytest.approx(seconds(budget, 1000) * 20 / 300)


def test_candidates_side_by_side_give_the_same_model(monkeypatch):
    # the candidate fits of a selection in worker processes or in this one: one model
    model, X, X_test = _ground_truth(n=3000)
    kw = dict(n_hidden_states="auto", random_state=0, n_jobs=2)
    monkeypatch.setattr(candidates, "worth_workers", lambda n_jobs, seconds: False)
    here = SpectralLatentTree(**kw).fit(X)
    monkeypatch.setattr(candidates, "worth_workers", lambda n_jobs, seconds: n_jobs > 1)
    apart = SpectralLatentTree(**kw).fit(X)
    assert here.n_hidden_states_ == apart.n_hidden_states_
    assert here.n_members_ == apart.n_members_
    assert here.n_hidden_states_scores_ == apart.n_hidden_states_scores_
    np.testing.assert_array_equal(here.score_samples(X_test), apart.score_samples(X_test))


def test_members_scored_as_the_average_of_their_densities():
    # select_members scores the average of m fits by the mean of their densities row by
    # row; the averaged latent tree (average_fits) has exactly that density
    model, X, X_test = _ground_truth(n=500)
    tree = model.tree
    n_states = node_states(tree, [4] * tree.n_observed, 3)
    rng = np.random.RandomState(0)
    members = [FittedModel(tree, *random_cpts(tree, n_states, rng)) for _ in range(3)]
    ev = CodeEvidence(X_test.T, [4] * tree.n_observed)
    lls = [log_likelihood(tree, f.root_marginal, f.cpts, ev) for f in members]
    average = average_fits(members)
    mixed = log_likelihood(tree, average.root_marginal, average.cpts, ev)
    np.testing.assert_allclose(logsumexp(lls, axis=0) - np.log(3), mixed, rtol=1e-10)


# ---------------------------------------------------------------------- choosing k'
@pytest.fixture(scope="module")
def k3_truth():
    model = LatentTreeModel.random(balanced_binary_tree(8), 3, 5, random_state=0)
    return model, model.sample(30000, random_state=10), model.sample(10000, random_state=100)


@pytest.mark.slow
def test_auto_hidden_states_equals_the_truth_and_grid_search_agrees(k3_truth):
    model, X, _ = k3_truth
    auto = SpectralLatentTree("auto", tree=model.tree, random_state=0).fit(X)
    assert auto.n_hidden_states_ == 3
    assert set(auto.n_hidden_states_scores_) >= {1, 2, 3, 4}
    grid = GridSearchCV(
        SpectralLatentTree(tree=model.tree, random_state=0),
        {"n_hidden_states": [1, 2, 3, 4]},
        cv=3,
    ).fit(X)
    assert grid.best_params_["n_hidden_states"] == 3


def test_default_start_reaches_the_em_optimum_at_k_equal_to_the_truth(k3_truth):
    """The spectral start alone stopped 0.002-0.008 nats/row below EM's optimum; with the
    second (tensor) start the default ends where EM ends."""
    model, X, X_test = k3_truth
    spectral = SpectralLatentTree(3, tree=model.tree, random_state=0).fit(X)
    em = LatentTreeEM(3, tree=model.tree, random_state=0).fit(X)
    assert spectral.lower_bound_ >= em.lower_bound_ - 1e-6
    truth = model.log_likelihood(X_test).mean()
    assert truth - spectral.score(X_test) < 0.006


def test_auto_hidden_states_on_every_discrete_estimator():
    model = LatentTreeModel.random(balanced_binary_tree(6), 2, 3, noise=0.2, random_state=2)
    X = model.sample(20000, random_state=0)
    for Est in (SpectralLatentTree, HierarchicalTensorLTM, QuartetTreeLearner, LatentTreeEM):
        given = {} if Est is QuartetTreeLearner else {"tree": model.tree}  # learns its tree
        est = Est("auto", random_state=0, **given).fit(X)
        assert est.n_hidden_states_ == 2, Est.__name__


@pytest.mark.slow
def test_alpha_auto_chooses_the_prior_with_k_on_held_out_rows():
    # sparse data (12 categories, 400 rows): a stronger prior than the fixed 0.5 wins on
    # the held-out rows and on fresh rows from the truth
    truth = LatentTreeModel.random(balanced_binary_tree(8), 2, 12, random_state=0)
    X, X_test = truth.sample(400, random_state=0), truth.sample(20000, random_state=1)
    auto = SpectralLatentTree("auto", alpha="auto", random_state=0).fit(X)
    fixed = SpectralLatentTree("auto", random_state=0).fit(X)
    assert auto.alpha_ > 0.5 and 0.5 in auto.alpha_scores_
    # alpha_ is the last value that gained more than tol: no value tried beats it by more
    assert auto.alpha_scores_[auto.alpha_] >= max(auto.alpha_scores_.values()) - auto.tol
    assert auto.score(X_test) > fixed.score(X_test) + 0.02
    assert fixed.alpha_ == 0.5 and not hasattr(fixed, "alpha_scores_")
    # many rows: the prior matters little - every value tried is within 1e-3 nats per
    # held-out row of 0.5 (at random_state=0 the selection takes k' = 4 on this 2-state
    # truth, where a stronger prior gains 0.0007, beyond tol: the choice need not be 0.5)
    many = LatentTreeModel.random(balanced_binary_tree(8), 2, 4, random_state=0)
    est = SpectralLatentTree("auto", alpha="auto", random_state=0)
    est.fit(many.sample(5000, random_state=0))
    assert len(est.alpha_scores_) >= 3
    assert max(est.alpha_scores_.values()) - est.alpha_scores_[0.5] < 1e-3
    # with a fixed k' and tree too; a refit with a number forgets the search
    tree = est.tree_
    est.set_params(n_hidden_states=2, tree=tree).fit(X)
    assert est.alpha_ > 0.5 and est.structure_ == "given"
    est.set_params(alpha=0.3).fit(X)
    assert est.alpha_ == 0.3 and not hasattr(est, "alpha_scores_")
    with pytest.raises(ValueError, match="alpha='auto' holds out rows"):
        SpectralLatentTree(2, alpha="auto").fit(X[:6])
    with pytest.raises(ValueError, match="alpha"):
        KernelLatentTree(alpha="auto").fit(np.random.default_rng(0).normal(size=(50, 3)))


@pytest.mark.parametrize("setting", ["n_hidden_states", "alpha", "softening", "entropy"])
def test_a_setting_auto_on_too_few_rows_is_refused_and_the_default_structure_kept(setting):
    X = LatentTreeModel.random(balanced_binary_tree(6), 2, 2, random_state=0).sample(6)
    with pytest.raises(ValueError, match=f"{setting}='auto' holds out rows"):
        SpectralLatentTree(**{"n_hidden_states": 2, setting: "auto"}).fit(X)
    few = SpectralLatentTree(2, random_state=0).fit(X)
    assert few.structure_ == "me" and few.structure_scores_ == {}


def test_a_kept_held_out_model_is_the_selections_fit_of_its_training_rows():
    """An estimator told to keep it (as LatentTreeClassifier does) keeps the model its
    selection fitted on the training rows with the held-out split: on the split's rows
    that model scores a little above the plain average of the chosen members (its mixture
    weights are fitted there) and below the final model fitted on every row; it is handed
    over once, and not kept by default."""
    _, X, _ = _ground_truth(n=2000, states=3)
    est = SpectralLatentTree(n_hidden_states="auto", random_state=0)
    est._keeps_held_out_fit = True
    est.fit(X)
    split, model = est._take_held_out_model()
    held = np.average(model.score_samples(X[split.rows]), weights=split.weights)
    chosen = est.n_members_scores_[est.n_members_]  # of the members' plain average
    assert est.n_members_ > 1 and chosen < held < chosen + 0.01  # weights fitted there
    assert np.average(est.score_samples(X[split.rows]), weights=split.weights) > held
    assert model.n_hidden_states_ == est.n_hidden_states_
    assert 0.1 < split.weights.sum() / len(X) < 0.3
    assert split.train_weights.sum() + split.weights.sum() == pytest.approx(len(X))
    assert est._take_held_out_model() is None
    plain = SpectralLatentTree(n_hidden_states="auto", random_state=0).fit(X)
    assert plain._take_held_out_model() is None
    np.testing.assert_array_equal(plain.score_samples(X[:50]), est.score_samples(X[:50]))


def test_auto_hidden_states_needs_rows_to_hold_out():
    X = np.random.default_rng(0).integers(0, 2, (6, 4))
    with pytest.raises(ValueError, match="at least 10 rows"):
        SpectralLatentTree("auto").fit(X)
    # enough rows, but the share drawn from their values holds none out: said so (the
    # draw is keyed on the standardised values: these 12 rows are drawn so)
    X = np.random.RandomState(4).randn(12, 4)
    with pytest.raises(ValueError, match="on these 12 rows .* came out empty; pass a number"):
        KernelLatentTree(n_hidden_states="auto", random_state=0).fit(X)


def test_kernel_auto_form_on_few_rows_fits_the_discrete_form_on_all_of_them():
    # holding out a fifth for the form would leave the discrete form's own choices too
    # few rows to hold out again: it is fitted on all of them. On 10-11 rows the training
    # part weighs under 10; on these 12 the discrete form's own draw (keyed on the
    # values) holds none of its training part out (on 13 it holds some out, and the
    # forms are compared)
    for n in (10, 11, 12):
        X = np.random.RandomState(0).randn(n, 4)
        est = KernelLatentTree(n_hidden_states="auto", random_state=0).fit(X)
        assert est.hidden_ == "discrete" and est.hidden_scores_ == {}


def test_held_out_split_depends_on_the_rows_not_their_order():
    codes = np.random.default_rng(0).integers(0, 3, (4, 500))
    perm = np.random.default_rng(1).permutation(500)
    keys, shuffled = row_keys(codes, 0), row_keys(codes[:, perm], 0)
    assert np.array_equal(np.sort(keys), np.sort(shuffled))
    assert 0.15 < np.mean(keys < 0.2) < 0.25
    assert not np.array_equal(np.sort(keys), np.sort(row_keys(codes, 1)))


def test_row_values_are_the_same_for_every_container_of_the_same_values():
    ints = np.array([[1, 2], [3, 0], [1, 2]])
    expected = row_values(ints)
    assert np.array_equal(expected[::2], ints.T) and np.isnan(expected[1::2]).all()
    frames = [
        ints.astype(float),
        ints.astype(object),
        pd.DataFrame(ints),
        pd.DataFrame(ints.astype(float)),
        pd.DataFrame({"a": pd.Categorical([1, 3, 1]), "b": pd.array([2, 0, 2], dtype="Int64")}),
        [[1, 2.0], [np.int64(3), 0], [1.0, 2]],
    ]
    for X in frames:
        assert np.array_equal(row_values(X), expected, equal_nan=True)
    # missing entries in any form are NaN; text is not the number it reads as, and every
    # text value keeps its own rank (however many there are)
    mixed = np.array([[1, "1", None], [np.nan, "b", pd.NA], [2.5, "a", "1"]], dtype=object)
    values = row_values(mixed)
    assert np.array_equal(values[0], [1.0, np.nan, 2.5], equal_nan=True)
    assert np.isnan(values[1]).all()
    assert np.isnan(values[2]).all()
    assert np.array_equal(values[3], [0, 2, 1])  # "1", "b", "a" ranked by their text
    assert np.isnan(values[4]).all() and np.array_equal(
        values[5], [np.nan, np.nan, 0], equal_nan=True
    )
    many = np.array([f"v{i}" for i in range(1000)], dtype=object)[:, None]
    assert np.unique(row_values(many)[1]).size == 1000


def test_fit_and_partial_fit_choose_the_same_structure():
    model = LatentTreeModel.random(balanced_binary_tree(8), 2, 3, noise=0.3, random_state=0)
    X = model.sample(7 * 600, random_state=1)
    full = SpectralLatentTree(random_state=0).fit(X)
    stream = SpectralLatentTree(random_state=0)
    for batch in np.array_split(X, 7):
        stream.partial_fit(batch)
    assert stream.structure_ == full.structure_
    np.testing.assert_allclose(
        [stream.structure_scores_[c] for c in full.structure_scores_],
        list(full.structure_scores_.values()),
        atol=1e-9,
    )


def test_n_jobs_never_changes_the_model():
    X = LatentTreeModel.random(balanced_binary_tree(8), 2, 3, noise=0.3, random_state=0).sample(
        3000, random_state=1
    )
    fits = [SpectralLatentTree(random_state=0, n_jobs=j).fit(X) for j in (None, 2)]
    assert fits[0].structure_ == fits[1].structure_
    np.testing.assert_allclose(fits[0].score_samples(X), fits[1].score_samples(X), atol=1e-8)


# ---------------------------------------------------------------------- bounds on k'
def test_hidden_states_beyond_what_the_rows_estimate_are_refused():
    X = LatentTreeModel.random(balanced_binary_tree(10), 2, 3, random_state=0).sample(
        3000, random_state=1
    )
    for Est in (SpectralLatentTree, LatentTreeEM, HierarchicalTensorLTM, QuartetTreeLearner):
        with pytest.raises(ValueError, match="n_hidden_states=1000 gives tables"):
            Est(1000).fit(X)  # refused before any candidate structure is fitted
    with pytest.raises(ValueError, match="n_samples=1 "):
        SpectralLatentTree(2, structure="star").fit(X[:1])
    # a tree without hidden nodes has no hidden state to estimate
    assert SpectralLatentTree(2, structure="chow_liu").fit(X[:1]).tree_.hidden_nodes == []


@pytest.mark.slow
def test_auto_members_pay_on_the_density_benchmark():
    # jester (100 columns, 2,000 training rows): the members chosen with k' on the
    # held-out rows improve the official test split over one fit (0.18 nats per row
    # measured; k' and the structure are chosen before, so the first member is that fit)
    train, _, test = load_debd("jester")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        auto = SpectralLatentTree("auto", random_state=0).fit(train[:2000])
        one = SpectralLatentTree("auto", n_members=1, random_state=0).fit(train[:2000])
    assert auto.n_members_ >= 2 and one.n_members_ == 1
    assert auto.n_hidden_states_ == one.n_hidden_states_
    assert auto.score(test) > one.score(test) + 0.05


def test_auto_learns_a_spectral_structure_once_per_metric(monkeypatch):
    # binary columns: the spectral metric keeps min(k', 2, 2) singular values per pair, so
    # it is the same at every k' >= 2 and the selection of n_hidden_states="auto" learns
    # the "me" and "clnj" trees once at k' = 1 and once for all larger k' (plus the
    # final tree on all rows); the choice is the one made with a tree learned per k'
    model = LatentTreeModel.random(balanced_binary_tree(8), 2, 2, noise=0.3, random_state=0)
    X = model.sample(3000, random_state=1)
    calls = {}
    original = SpectralLatentTree._build_tree

    def counting(self, moments, method, k):
        calls[method] = calls.get(method, 0) + 1
        return original(self, moments, method, k)

    monkeypatch.setattr(SpectralLatentTree, "_build_tree", counting)
    est = SpectralLatentTree(n_hidden_states="auto", random_state=0).fit(X)
    assert len(est.n_hidden_states_scores_) >= 4  # k' = 1, 2, 3, 4 at least were scored
    assert calls["me"] <= 3 and calls["clnj"] <= 3
    calls.clear()
    monkeypatch.setattr(SpectralLatentTree, "_tree_rank", lambda self, name, k, moments: k)
    again = SpectralLatentTree(n_hidden_states="auto", random_state=0).fit(X)
    assert calls["me"] >= len(est.n_hidden_states_scores_)
    assert (again.n_hidden_states_, again.structure_) == (est.n_hidden_states_, est.structure_)
    assert again.n_hidden_states_scores_ == est.n_hidden_states_scores_
    np.testing.assert_allclose(again.score_samples(X), est.score_samples(X))


def test_one_standard_error_rule_takes_the_fewest_states_within_the_noise():
    rng = np.random.default_rng(0)
    base, noise = rng.normal(size=2000), rng.normal(size=2000)
    noise -= noise.mean()  # the mean gain is exactly `gain`
    weights = np.ones(2000)
    se = paired_se(base + noise, base, weights)  # the same for every gain
    for gain, expected in ((0.5 * se, "k3"), (2.0 * se, "k8")):
        lls = {"k3": base, "k8": base + gain + noise}
        scores = {key: float(v.mean()) for key, v in lls.items()}
        assert scores["k8"] > scores["k3"]
        assert simplest_within_se(scores, lls, weights, ["k3", "k8"].index) == expected


def test_a_gain_counts_only_beyond_one_standard_error():
    rng = np.random.default_rng(1)
    base, noise = rng.normal(size=2000), rng.normal(size=2000)
    noise -= noise.mean()
    weights = np.ones(2000)
    se = paired_se(base + noise, base, weights)
    for gain, expected in ((0.5 * se, False), (2.0 * se, True), (-2.0 * se, False)):
        lls = {"small": base, "large": base + gain + noise}
        scores = {key: float(v.mean()) for key, v in lls.items()}
        assert gains_beyond_se("large", "small", scores, lls, weights) is expected
    same = {"a": base, "b": base.copy()}  # no noise, no gain: not a gain
    assert not gains_beyond_se("b", "a", {"a": 0.0, "b": 0.0}, same, weights)


@pytest.fixture(scope="module")
def digits_demo_fit():
    """The digits demo's automatic fit (one member) and what it printed."""
    digits = load_digits()  # the demo's training rows
    X = np.digitize(digits.data, [1, 9])
    X, _ = train_test_split(X, test_size=0.3, stratify=digits.target, random_state=0)
    est = SpectralLatentTree(n_hidden_states="auto", n_members=1, random_state=0, verbose=1)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        est.fit(X)
    return est, printed.getvalue()


@pytest.mark.slow
def test_auto_ladder_grows_beyond_16_states_only_after_a_gain_beyond_the_noise(digits_demo_fit):
    est, printed = digits_demo_fit
    gains = {
        int(k): (float(g), float(se))
        for k, g, se in re.findall(r"k'=(\d+): gain (-?[\d.]+) \(s\.e\. ([\d.]+)\)", printed)
    }
    tried = sorted(est.n_hidden_states_scores_)
    assert tried[-1] > 16 and set(tried[1:]) == set(gains)
    for below, k in zip(tried, tried[1:]):
        if k > 16:  # the level below gained beyond its standard error
            assert gains[below][0] > gains[below][1], (k, gains)
    # and here the last level is one within the noise (k' = 32: 0.0004, s.e. 0.05)
    assert gains[tried[-1]][0] <= gains[tried[-1]][1], gains


@pytest.mark.slow
def test_a_moment_started_finalist_far_behind_is_not_run_on(digits_demo_fit):
    # the finalists get one rung of EM iterations at equal effort; the fits at k' <= 3
    # (the most states the moments of 3-category columns identify) then trail the leader
    # beyond their standard errors and by more than that rung gained them: they stop there
    est, printed = digits_demo_fit
    runs = [
        (int(k), float(before), float(after))
        for k, before, after in re.findall(
            r"k'=(\d+), \w+: held-out (-[\d.]+) before, (-[\d.]+) after \d+ EM", printed
        )
    ]
    first_rung = runs[: len({k for k, _, _ in runs})]
    started = [r for r in first_rung if r[0] <= 3]
    assert started, runs  # a moment-started finalist
    lead = max(a for _, _, a in first_rung)
    for k, before, after in started:
        assert lead - after > after - before >= 0
        assert [r[0] for r in runs].count(k) == 1  # not run on
    assert est.n_hidden_states_ > 16


def test_bands_of_keys_partition_every_rows_weight_into_folds():
    rng = np.random.default_rng(0)
    values = rng.integers(0, 3, (4, 300)).astype(float)
    weights = rng.choice([0.5, 1.0, 2.0, 3.5], 300)
    held = [holdout_weights(values, weights, (k + 1) / 5, 7, low=k / 5)[0] for k in range(5)]
    _, total, _ = holdout_weights(values, weights, 0.0, 7)  # every unit trains
    np.testing.assert_allclose(np.sum(held, axis=0), total)  # the folds cover each unit once
    # a band is the difference of two shares, exactly for whole weights
    ones = np.ones(300)
    top = holdout_weights(values, ones, 0.6, 7)[0]
    np.testing.assert_array_equal(
        holdout_weights(values, ones, 0.6, 7, low=0.4)[0],
        top - holdout_weights(values, ones, 0.4, 7)[0],
    )
