"""The selection engine: held-out split, tie rule, growth, racing, EM's early stopping."""

import numpy as np
import pytest
from scipy.special import logsumexp

from ltm_sklearn import SpectralLatentTree
from ltm_sklearn._algorithms.em import EarlyStopping, fit_em, node_states, random_cpts
from ltm_sklearn._engine.inference import CodeEvidence, log_likelihood
from ltm_sklearn._estimators import candidates
from ltm_sklearn._estimators.candidates import task_seed
from ltm_sklearn._estimators.fits import FittedModel, average_fits
from ltm_sklearn._estimators.selection import (
    TIE_TOL,
    best_key,
    grow,
    held_out_split,
    race,
)
from ltm_sklearn.datasets import LatentTreeModel, balanced_binary_tree


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


def test_early_stopping_returns_the_best_held_out_parameters():
    model, X, X_val = _ground_truth(n=600)
    tree = model.tree
    n_states = node_states(tree, np.full(8, 4), 6)  # more states than the truth: it overfits
    root, cpts = random_cpts(tree, n_states, 0)
    codes, val = X.T.astype(np.int64), X_val.T.astype(np.int64)
    ev, ev_val = CodeEvidence(codes, np.full(8, 4)), CodeEvidence(val, np.full(8, 4))
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


_CREEP = pytest.mark.xfail(
    strict=True,
    reason="open (issue: automatic fit): a k' beyond the moments' starts from the smaller "
    "k' fit with more EM iterations behind it, so its held-out score creeps up on 20,000 "
    "rows of 3 categories (chooses k' = 12; 3 -> 4 gains 0.0015 nats per row)",
)


@pytest.mark.parametrize("seed, states", [(0, 4), pytest.param(1, 3, marks=_CREEP)])
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


def test_candidates_side_by_side_give_the_same_model(monkeypatch):
    # the candidate fits of a selection in worker processes or in this one: one model
    model, X, X_test = _ground_truth(n=3000)
    kw = dict(n_hidden_states="auto", random_state=0, n_jobs=2)
    monkeypatch.setattr(candidates, "SIDE_BY_SIDE_SECONDS", np.inf)
    here = SpectralLatentTree(**kw).fit(X)
    monkeypatch.setattr(candidates, "SIDE_BY_SIDE_SECONDS", 0.0)
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
