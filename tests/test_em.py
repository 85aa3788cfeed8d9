"""EM and message passing: exact E-step, monotone objective, ground-truth recovery, API."""

import itertools
import warnings

import numpy as np
import pytest
from scipy.special import logsumexp
from sklearn.exceptions import ConvergenceWarning
from test_structure import hclt_truth

from ltm_sklearn import (
    LatentTree,
    LatentTreeEM,
    SpectralLatentTree,
)
from ltm_sklearn._algorithms.em import (
    average_members,
    complete_entropy,
    entropy_rows,
    fit_em,
    log_prior,
    m_step,
    minibatch_em,
    mixture_weights,
    node_states,
    random_cpts,
    unique_rows,
)
from ltm_sklearn._engine import evidence as evidence_module
from ltm_sklearn._engine import inference
from ltm_sklearn._engine.evidence import CodeEvidence, DenseEvidence
from ltm_sklearn._engine.inference import (
    expected_counts,
    expected_counts_stacked,
    hidden_posteriors,
    log_likelihood,
    stacked_tables,
)
from ltm_sklearn._estimators import auto_fit
from ltm_sklearn.datasets import (
    LatentTreeModel,
    balanced_binary_tree,
    hmm_chain,
    star_tree,
)


def population(model):
    """All configurations with their true probabilities as weights (exact moments)."""
    X = model.all_configurations()
    return X.astype(np.int64).T, np.exp(model.log_likelihood(X))


def evidence(model, codes):
    return CodeEvidence(codes, model.n_states[: model.n_features])


def test_e_step_likelihood_matches_exact_inference():
    model = LatentTreeModel.random(balanced_binary_tree(6), 2, 3, random_state=0)
    X = model.sample(500, random_state=1).astype(float)
    X[np.random.RandomState(2).rand(*X.shape) < 0.2] = np.nan
    ev = evidence(model, model._codes(X))
    ll, _, _ = expected_counts(model.tree, model.root_marginal, model.cpts, ev, np.ones(500))
    np.testing.assert_allclose(ll, model.log_likelihood(X), rtol=1e-12)
    # blocks of rows and threads give the same numbers
    ll2 = log_likelihood(model.tree, model.root_marginal, model.cpts, ev, n_jobs=2)
    np.testing.assert_allclose(ll2, ll, rtol=1e-12)


@pytest.mark.parametrize(
    "tree",
    [
        balanced_binary_tree(4),
        hmm_chain(4),
        LatentTree([(0, 1), (0, 2), (0, 4), (4, 3)], 4),
        star_tree(11),
    ],
    ids=["balanced", "hmm", "observed-internal", "star-11"],
)
def test_truth_is_a_fixed_point_of_em_on_exact_moments(tree):
    # with population weights the expected counts are the true pair marginals, so one
    # M-step (alpha = 0) returns the true CPTs (checks the edge posteriors exactly; the
    # 11-leaf star exercises the rescaled products of many sibling messages)
    n_obs = [2 if u == 0 or tree.n_observed > 6 else 3 for u in range(tree.n_observed)]
    model = LatentTreeModel.random(tree, 2, n_obs, random_state=1)
    codes, w = population(model)
    _, rc, ec = expected_counts(
        model.tree, model.root_marginal, model.cpts, evidence(model, codes), w
    )
    np.testing.assert_allclose(rc.sum(), 1.0, rtol=1e-12)
    root, cpts = m_step(rc, ec)
    np.testing.assert_allclose(root, model.root_marginal, atol=1e-12)
    for u, cpt in model.cpts.items():
        np.testing.assert_allclose(cpts[u], cpt, atol=1e-12)


def test_m_step_adds_the_pseudo_count():
    root, cpts = m_step(np.array([3.0, 1.0]), {5: np.array([[2.0, 0.0], [0.0, 0.0]])}, alpha=1.0)
    np.testing.assert_allclose(root, [4 / 6, 2 / 6])
    np.testing.assert_allclose(cpts[5], [[3 / 4, 1 / 4], [0.5, 0.5]])


def test_hidden_posteriors_match_brute_force():
    tree = balanced_binary_tree(4)  # hidden nodes 4 (root), 5
    model = LatentTreeModel.random(tree, 2, 3, random_state=3)
    X = model.sample(20, random_state=0)
    hidden = tree.hidden_nodes
    post = hidden_posteriors(tree, model.root_marginal, model.cpts, evidence(model, X.T), hidden)
    for r in range(20):
        joint = {}
        for hs in itertools.product(range(2), repeat=len(hidden)):
            state = dict(zip(hidden, hs))
            state.update({j: X[r, j] for j in range(4)})
            p = model.root_marginal[state[tree.root]]
            for u in range(tree.n_nodes):
                if u != tree.root:
                    p *= model.cpts[u][state[tree.parent[u]], state[u]]
            joint[hs] = p
        z = sum(joint.values())
        for t, h in enumerate(hidden):
            brute = [sum(p for hs, p in joint.items() if hs[t] == s) / z for s in range(2)]
            np.testing.assert_allclose(post[h][r], brute, rtol=1e-10)


@pytest.mark.parametrize("alpha", [0.0, 0.5])
@pytest.mark.parametrize("accelerate", [False, True])
def test_em_never_decreases_its_objective(alpha, accelerate):
    tree = LatentTree([(0, 1), (0, 2), (0, 6), (6, 3), (6, 7), (7, 4), (7, 5)], 6)
    model = LatentTreeModel.random(tree, 2, 3, noise=0.7, random_state=0)
    X = model.sample(3000, random_state=0).astype(float)
    X[np.random.RandomState(1).rand(*X.shape) < 0.1] = np.nan
    codes, w = unique_rows(model._codes(X), np.ones(3000))
    n_states = np.array([3] * 6 + [2, 2])
    for seed in range(3):
        start = random_cpts(model.tree, n_states, seed)
        *_, n_iter, _, history = fit_em(
            model.tree,
            *start,
            evidence(model, codes),
            w,
            alpha=alpha,
            max_iter=200,
            tol=-1.0,
            accelerate=accelerate,
        )
        assert np.all(np.diff(history) >= -1e-10)
        assert n_iter == 200 and (len(history) == 200 or accelerate)


def _soft_vectors(codes, n_states, softening, unseen):
    """The soft evidence of every entry, written out: ``1 - softening`` on the observed
    category, ``softening / (n - 1)`` on each other one; ones for a missing entry, the
    unseen likelihood for an unseen category."""
    vectors = {}
    for u, n in enumerate(n_states):
        E = np.full((n, n), softening / (n - 1))
        np.fill_diagonal(E, 1 - softening)
        v = np.ones((codes.shape[1], n))
        seen = codes[u] >= 0
        v[seen] = E[codes[u][seen]]
        v[codes[u] == -2] = unseen[u]
        vectors[u] = v
    return vectors


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_softened_e_step_is_the_e_step_of_the_soft_evidence(dtype):
    # observed internal nodes, missing and unseen entries, columns of 2 and 3 categories
    edges = [(10, 0), (10, 1), (10, 2), (2, 3), (2, 4), (4, 11), (11, 5), (11, 6), (6, 7)]
    tree = LatentTree(edges + [(6, 8), (6, 9)], 10, root=10)
    model = LatentTreeModel.random(tree, 3, 3, random_state=0)
    rng = np.random.default_rng(0)
    codes = model._codes(model.sample(600, random_state=1).astype(float))
    codes[rng.random(codes.shape) < 0.1] = -1
    codes[rng.random(codes.shape) < 0.03] = -2
    n_states, unseen = model.n_states[:10], np.full(10, 0.02)
    w = rng.random(codes.shape[1])
    soft = CodeEvidence(codes, n_states, unseen, softening=0.07)
    dense = DenseEvidence(_soft_vectors(codes, n_states, 0.07, unseen))
    args = (model.tree, model.root_marginal, model.cpts)
    a = expected_counts(*args, soft, w, dtype=dtype)
    b = expected_counts(*args, dense, w, dtype=dtype)
    tol = 1e-10 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(a[0], b[0], atol=tol)
    for u in b[2]:
        np.testing.assert_allclose(a[2][u], b[2][u], atol=tol * w.sum())
    # softening moves the likelihood: the evidence is not the data's
    hard = log_likelihood(*args, CodeEvidence(codes, n_states, unseen))
    assert np.abs(hard - a[0]).max() > 0.01


def test_softened_em_never_decreases_and_approaches_the_hard_optimum():
    model = LatentTreeModel.random(balanced_binary_tree(6), 2, 3, random_state=0)
    codes, w = unique_rows(model._codes(model.sample(2000, random_state=0).astype(float)),
                           np.ones(2000))  # fmt: skip
    n_states = model.n_states[:6]
    start = random_cpts(model.tree, model.n_states, 0)

    def fit(softening):
        ev = CodeEvidence(codes, n_states, softening=softening)
        return fit_em(model.tree, *start, ev, w, max_iter=500, tol=1e-12)

    hard = fit(0.0)
    gaps = []
    for softening in (0.1, 0.01, 0.001):
        root, cpts, _, _, _, history = fit(softening)
        assert np.all(np.diff(history) >= -1e-10)
        gaps.append(max(np.abs(cpts[u] - hard[1][u]).max() for u in cpts))
    assert gaps[0] > gaps[1] > gaps[2]
    assert gaps[2] < 1e-2


def test_complete_entropy_is_the_entropy_of_every_node_by_brute_force():
    model = LatentTreeModel.random(balanced_binary_tree(4), 2, 3, random_state=0)
    tree, states = model.tree, model.n_states
    total = 0.0
    for x in itertools.product(*[range(n) for n in states]):
        p = model.root_marginal[x[tree.root]]
        for u, table in model.cpts.items():
            p *= table[x[tree.parent[u]], x[u]]
        total -= p * np.log(p)
    assert complete_entropy(tree, model.root_marginal, model.cpts) == pytest.approx(total)


def test_entropy_rows_maximise_the_regularised_row_objective():
    rng = np.random.default_rng(0)
    counts = rng.gamma(0.5, 10.0, size=(5, 4))
    counts[0, :2] = 0.0  # categories never counted
    weight = np.array([0.5, 0.0, 3.0, 50.0, 1e5])
    rows = entropy_rows(counts, weight)
    np.testing.assert_allclose(rows.sum(axis=1), 1.0)
    np.testing.assert_allclose(rows[1], counts[1] / counts[1].sum())  # weight 0: counts
    np.testing.assert_allclose(rows[4], 0.25, atol=1e-3)  # a large weight: uniform
    assert np.all(rows[0] > 0)  # the entropy keeps unseen categories possible

    def objective(c, w, t):
        logs = np.log(np.maximum(t, 1e-300))
        return c @ logs - w * t @ logs

    for c, w, t in zip(counts, weight, rows):
        best = objective(c, w, t)
        for _ in range(50):  # any other point of the simplex scores lower
            other = 0.8 * t + 0.2 * rng.dirichlet(np.ones(4))
            assert objective(c, w, other) <= best + 1e-9


def test_entropy_regularised_em_never_decreases_and_vanishes_with_its_strength():
    model = LatentTreeModel.random(balanced_binary_tree(4), 2, 3, random_state=0)
    codes, w = unique_rows(model._codes(model.sample(1000, random_state=0).astype(float)),
                           np.ones(1000))  # fmt: skip
    ev = CodeEvidence(codes, model.n_states[:4])
    start = random_cpts(model.tree, model.n_states, 0)

    def fit(entropy):
        return fit_em(model.tree, *start, ev, w, max_iter=1000, tol=1e-12, entropy=entropy)

    plain = fit(0.0)
    gaps, entropies = [], []
    for strength in (0.01, 0.001, 0.0001):
        root, cpts, _, n_iter, _, history = fit(strength)
        assert n_iter > 10 and np.all(np.diff(history) >= 0.0)
        gaps.append(max(np.abs(cpts[u] - plain[1][u]).max() for u in cpts))
        entropies.append(complete_entropy(model.tree, root, cpts))
    assert gaps[0] > gaps[1] > gaps[2] and gaps[2] < 1e-2
    # a stronger regulariser, a model of higher entropy
    assert entropies[0] > entropies[1] > complete_entropy(model.tree, *plain[:2])


@pytest.mark.parametrize("name, value", [("softening", 0.1), ("entropy", 0.05)])
def test_regularised_estimator_is_normalised_and_zero_changes_nothing(name, value):
    model = LatentTreeModel.random(balanced_binary_tree(4), 2, 3, random_state=0)
    X = model.sample(500, random_state=1)
    options = dict(n_hidden_states=2, tree=model.tree, n_members=1, random_state=0)
    regularised = SpectralLatentTree(**{name: value}, **options).fit(X)
    total = np.exp(regularised.score_samples(model.all_configurations())).sum()
    assert total == pytest.approx(1.0)
    plain = SpectralLatentTree(**options).fit(X)
    zero = SpectralLatentTree(**{name: 0.0}, **options).fit(X)
    np.testing.assert_array_equal(plain.score_samples(X), zero.score_samples(X))
    assert not np.allclose(regularised.score_samples(X), plain.score_samples(X))
    assert getattr(regularised, f"{name}_") == value and getattr(plain, f"{name}_") == 0.0


def test_entropy_raises_the_models_entropy_and_auto_records_its_choice():
    model = LatentTreeModel.random(balanced_binary_tree(4), 2, 3, random_state=0)
    X = model.sample(500, random_state=1)
    options = dict(n_hidden_states=2, tree=model.tree, n_members=1, random_state=0)
    fits = [SpectralLatentTree(entropy=e, **options).fit(X) for e in (0.05, 0.0)]
    H = [complete_entropy(e.tree_, e.root_marginal_, e.cpts_) for e in fits]
    assert H[0] > H[1]
    auto = SpectralLatentTree(n_hidden_states="auto", entropy="auto", random_state=0).fit(X)
    scores = auto.entropy_scores_
    assert {0.0, "chosen", auto.entropy_} <= set(scores)
    if auto.entropy_ > 0:  # a regularised fit is kept only above both others
        assert scores[auto.entropy_] > max(scores[0.0], scores["chosen"])
    assert np.exp(auto.score_samples(model.all_configurations())).sum() == pytest.approx(1.0)


def test_unique_rows_merge_identical_rows_and_keep_weights():
    rng = np.random.RandomState(0)
    codes = rng.randint(-1, 3, size=(5, 400)).astype(np.int16)
    w = rng.rand(400)
    u, uw = unique_rows(codes, w)
    assert uw.sum() == pytest.approx(w.sum())
    assert len({tuple(c) for c in codes.T}) == u.shape[1]
    wide = rng.randint(0, 9, size=(40, 300)).astype(np.int16)  # more than 62 bits per row
    wide = np.hstack([wide, wide[:, :50]])
    u, uw = unique_rows(wide, np.ones(350))
    assert u.shape[1] == 300 and uw.max() == 2
    # the hashed rows of a wide table: every distinct row once, with its summed weight
    wide[3, -1] = -1
    w = rng.rand(350)
    u, uw = unique_rows(wide, w)
    expected = {}
    for row, x in zip(map(tuple, wide.T), w):
        expected[row] = expected.get(row, 0.0) + x
    assert u.shape[1] == len(expected) == 301
    for row, x in zip(map(tuple, u.T), uw):
        assert x == pytest.approx(expected[row])


def test_held_out_gap_shrinks_with_n():
    # measured (8-leaf balanced, k = 2, n = 4): gap 0.027, 0.0027, 0.0008 nats
    model = LatentTreeModel.random(balanced_binary_tree(8), 2, 4, random_state=0)
    Xt = model.sample(20_000, random_state=9)
    truth = model.log_likelihood(Xt).mean()
    gaps = []
    for n in (1_000, 10_000, 50_000):
        est = LatentTreeEM(2, tree=model.tree, random_state=0)
        est.fit(model.sample(n, random_state=1))
        gaps.append(truth - est.score(Xt))
    assert gaps[0] > gaps[1] > gaps[2] >= -0.005
    assert gaps[2] < 0.005


def test_restarts_keep_the_best_and_convergence_attributes():
    model = LatentTreeModel.random(balanced_binary_tree(8), 2, 3, noise=0.7, random_state=2)
    X = model.sample(2000, random_state=0)
    kw = dict(tree=model.tree, init="random")
    single = LatentTreeEM(2, random_state=0, **kw).fit(X).lower_bound_
    best = LatentTreeEM(2, n_init=3, random_state=0, **kw).fit(X)
    assert best.lower_bound_ >= single - 1e-12
    assert best.converged_ and 1 < best.n_iter_ < 100
    # the objective is the training log-likelihood plus the log prior, per row (EM sums
    # it from float32 messages, score from float64 ones: within float32's rounding)
    prior = log_prior(best.root_marginal_, best.cpts_, best.alpha_) / len(X)
    np.testing.assert_allclose(best.lower_bound_, best.score(X) + prior, rtol=1e-7)
    with pytest.warns(ConvergenceWarning, match="did not converge") as record:
        est = LatentTreeEM(2, max_iter=2, random_state=0, **kw).fit(X)
    assert est.n_iter_ == 2 and not est.converged_
    assert len(record) == 1 and record[0].filename == __file__  # once, at the user's call


def test_fitted_tables_hidden_posteriors_and_sampling():
    model = LatentTreeModel.random(balanced_binary_tree(6), 2, 3, random_state=4)
    X = model.sample(20_000, random_state=0)
    labels = np.array(["lo", "mid", "hi"])
    Xs = labels[X]
    est = LatentTreeEM(2, tree=model.tree, random_state=0).fit(Xs)
    assert est.root_marginal_.shape == (2,)
    for cpt in est.cpts_.values():
        np.testing.assert_allclose(cpt.sum(axis=1), 1.0)
    post = est.predict_hidden_proba(Xs[:100])
    assert post.shape == (100, len(est.tree_.hidden_nodes), 2)
    np.testing.assert_allclose(post.sum(axis=2), 1.0)
    S = est.sample(30_000, random_state=1)
    assert S.shape == (30_000, 6) and set(np.unique(S)) <= set(labels)
    for j in range(6):  # marginals of the samples match the data's
        for v in labels:
            assert abs(np.mean(S[:, j] == v) - np.mean(Xs[:, j] == v)) < 0.02
    with pytest.raises(ValueError, match="n_samples must be a positive integer"):
        est.sample(2.5)


def test_missing_values_in_training():
    model = LatentTreeModel.random(balanced_binary_tree(6), 2, 3, noise=0.6, random_state=0)
    X = model.sample(20_000, random_state=1).astype(float)
    X[np.random.RandomState(0).rand(*X.shape) < 0.15] = np.nan
    est = LatentTreeEM(2, tree=model.tree, random_state=0).fit(X)
    Xt = model.sample(5000, random_state=2)
    assert abs(model.log_likelihood(Xt).mean() - est.score(Xt)) < 0.01


def test_em_on_learned_tree_with_observed_internal_nodes():
    tree = LatentTree([(0, 1), (0, 2), (0, 6), (6, 3), (6, 7), (7, 4), (7, 5)], 6)
    model = LatentTreeModel.random(tree, 2, 2, noise=0.3, random_state=0)
    X = model.sample(20_000, random_state=0)
    est = LatentTreeEM(2, structure="clnj", n_init=2, random_state=0).fit(X)
    Xt = model.sample(5000, random_state=1)
    assert est.tree_.degree(0) == 3  # the observed internal node stays observed
    assert abs(model.log_likelihood(Xt).mean() - est.score(Xt)) < 0.01
    ev = CodeEvidence(est._encode(Xt), [2] * 6, est.unseen_proba_)
    ll = log_likelihood(est.tree_, est.root_marginal_, est.cpts_, ev)
    np.testing.assert_allclose(ll, est.score_samples(Xt))


def test_em_warning_free_on_clean_fit():
    model = LatentTreeModel.random(balanced_binary_tree(4), 2, 2, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        LatentTreeEM(2, tree=model.tree, random_state=0).fit(model.sample(500, random_state=0))


def test_expected_counts_stay_finite_when_a_row_likelihood_underflows():
    """A table entry near 1e-310 (as an over-relaxed EM candidate can propose) makes the
    scaled likelihood of a row underflow: its counts are dropped, never inf or NaN."""
    tree = LatentTree([(2, 0), (2, 1)], 2)
    root = np.array([1e-310, 1.0])
    cpt = np.array([[1e-10, 1.0 - 1e-10], [1.0 - 1e-200, 1e-200]])
    codes = np.array([[1, 0], [1, 0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ll, rc, ec = expected_counts(
            tree, root, {0: cpt, 1: cpt}, CodeEvidence(codes, [2, 2]), np.ones(2)
        )
    assert np.all(np.isfinite(ll)) and np.all(np.isfinite(rc))
    assert all(np.all(np.isfinite(c)) for c in ec.values())


def test_average_members_is_the_mixture_of_its_members():
    # two parameter sets of one tree, merged block by block: the density is their mean
    tree = balanced_binary_tree(6)
    a = LatentTreeModel.random(tree, 2, 3, random_state=0)
    b = LatentTreeModel.random(tree, 2, 3, random_state=1)
    root, cpts = average_members(a.tree, [(a.root_marginal, a.cpts), (b.root_marginal, b.cpts)])
    X = a.all_configurations()
    ev = evidence(a, X.astype(np.int64).T)
    ll = log_likelihood(a.tree, root, cpts, ev)
    expected = np.logaddexp(a.log_likelihood(X), b.log_likelihood(X)) - np.log(2)
    np.testing.assert_allclose(ll, expected, rtol=1e-12)
    assert np.exp(ll).sum() == pytest.approx(1.0, abs=1e-12)
    # with weights: the weighted mixture
    members = [(a.root_marginal, a.cpts), (b.root_marginal, b.cpts)]
    root, cpts = average_members(a.tree, members, weights=[0.3, 0.7])
    ll = log_likelihood(a.tree, root, cpts, ev)
    expected = np.logaddexp(np.log(0.3) + a.log_likelihood(X), np.log(0.7) + b.log_likelihood(X))
    np.testing.assert_allclose(ll, expected, rtol=1e-12)
    with pytest.raises(ValueError, match="summing to 1"):
        average_members(a.tree, members, weights=[0.5, 0.6])
    # a column at an internal node would break the member index
    inner = LatentTree([(0, 1), (0, 2), (0, 4), (4, 3)], 4)
    c = LatentTreeModel.random(inner, 2, 2, random_state=0)
    with pytest.raises(ValueError, match="every column at a leaf"):
        average_members(c.tree, [(c.root_marginal, c.cpts)] * 2)


def test_mixture_weights_maximise_the_mixture_likelihood():
    rng = np.random.default_rng(0)
    # rows drawn from components 0 and 2 in proportion 1 : 3; component 1 explains none
    lls = np.log(rng.uniform(0.01, 0.1, size=(3, 4000)))
    source = rng.choice([0, 2], size=4000, p=[0.25, 0.75])
    lls[source, np.arange(4000)] = 0.0
    weights = np.where(source == 0, 2.0, 1.0)  # a weight of 2 counts a row twice
    w = mixture_weights(lls, weights)
    assert w.sum() == pytest.approx(1.0) and w[1] < 0.01
    expected = 2 * np.mean(source == 0) / (2 * np.mean(source == 0) + np.mean(source == 2))
    assert w[0] == pytest.approx(expected, abs=0.02)

    def objective(v):
        return weights @ logsumexp(np.log(np.maximum(v, 1e-300))[:, None] + lls, axis=0)

    for _ in range(20):  # no other weights do better
        other = 0.9 * w + 0.1 * rng.dirichlet(np.ones(3))
        assert objective(other) <= objective(w) + 1e-9


def test_n_members_averages_em_fits_into_one_latent_tree():
    model = LatentTreeModel.random(balanced_binary_tree(8), 2, 3, noise=0.3, random_state=0)
    X = model.sample(3000, random_state=0)
    Xt = model.sample(2000, random_state=1)
    one = LatentTreeEM(3, tree=model.tree, init="random", random_state=0).fit(X)
    two = LatentTreeEM(3, tree=model.tree, init="random", n_members=2, random_state=0).fit(X)
    assert (one.n_members_, two.n_members_) == (1, 2)
    assert two.n_hidden_states_ == 3 and two.root_marginal_.shape == (6,)
    assert two.predict_hidden_proba(Xt[:5]).shape == (5, 6, 6)
    np.testing.assert_allclose(two.predict_proba(Xt[:5]).sum(axis=1), 1.0)
    # a normalised density: brute force over every configuration
    configs = model.all_configurations()
    assert np.exp(two.score_samples(configs)).sum() == pytest.approx(1.0, abs=1e-9)
    # the first member is the single fit (same start, same random numbers), so the
    # average (p_1 + p_2) / 2 is at least half the single fit's density on every row
    assert np.all(two.score_samples(Xt) >= one.score_samples(Xt) - np.log(2) - 1e-9)
    # columns at internal nodes: one fit, with a warning
    inner = LatentTree([(0, 1), (0, 2), (0, 6), (6, 3), (6, 7), (7, 4), (7, 5)], 6)
    Xi = LatentTreeModel.random(inner, 2, 2, random_state=0).sample(500, random_state=0)
    with pytest.warns(UserWarning, match="columns at internal nodes"):
        est = LatentTreeEM(2, tree=inner, n_members=2, random_state=0).fit(Xi)
    assert est.n_members_ == 1


def test_n_members_auto_grows_members_on_the_held_out_rows_with_k():
    model = LatentTreeModel.random(balanced_binary_tree(8), 2, 3, noise=0.3, random_state=0)
    X = model.sample(3000, random_state=0)
    # a given k': one fit, nothing chosen (the default)
    est = LatentTreeEM(3, tree=model.tree, random_state=0).fit(X)
    assert est.n_members == "auto" and est.n_members_ == 1
    assert not hasattr(est, "n_members_scores_")
    # k' chosen: the members are chosen with it, by the rule the docstring states
    est = LatentTreeEM("auto", tree=model.tree, random_state=0).fit(X)
    scores = est.n_members_scores_
    m = est.n_members_
    assert list(scores) == list(range(1, len(scores) + 1)) and 1 <= m <= 4
    assert all(scores[j + 1] > scores[j] for j in range(1, m))  # every kept member gained
    assert len(scores) == m + 1 or m == 4  # the next one was tried and did not
    assert est.root_marginal_.shape == (m * est.n_hidden_states_,)
    assert np.exp(est.score_samples(model.all_configurations())).sum() == pytest.approx(1.0)
    # the same choice from the same seed; a refit with a number forgets it
    again = LatentTreeEM("auto", tree=model.tree, random_state=0).fit(X)
    assert again.n_members_scores_ == scores
    est.set_params(n_hidden_states=2).fit(X)
    assert est.n_members_ == 1 and not hasattr(est, "n_members_scores_")


def test_a_given_n_members_is_fitted_after_a_selection(monkeypatch):
    # beyond the k' the moments identify the final fit resumes the selection's fit;
    # a given n_members still adds its members (it was silently one fit)
    model = LatentTreeModel.random(balanced_binary_tree(6), 2, 2, noise=0.3, random_state=0)
    X = model.sample(1500, random_state=0)
    configs = model.all_configurations()
    seen = []
    original = auto_fit.select_state_pruning

    def states_of_the_pruned_model(est, choice, moments, split):
        seen.append(len(choice.model_of_training_rows().root_marginal))
        return original(est, choice, moments, split)

    monkeypatch.setattr(auto_fit, "select_state_pruning", states_of_the_pruned_model)
    for k in ("auto", 4):
        est = SpectralLatentTree(k, n_members=3, random_state=0).fit(X)
        assert est.n_members_ == 3, k
        assert not hasattr(est, "n_members_scores_")
        assert est.root_marginal_.shape == (3 * est.n_hidden_states_,)
        assert np.exp(est.score_samples(configs)).sum() == pytest.approx(1.0, abs=1e-9)
        # min_state_rows="auto" chose its threshold on the average of the members
        assert seen[-1] == 3 * est.n_hidden_states_
    # with one hidden state every start reaches the same optimum: one fit
    one = SpectralLatentTree(1, structure="hclt", n_members=3, random_state=0).fit(X)
    assert one.n_members_ == 1 and one.root_marginal_.shape == (1,)
    # without EM the other members would be their random starts: one fit, a warning
    with pytest.warns(UserWarning, match="max_iter=0"):
        est = SpectralLatentTree(2, structure="hclt", max_iter=0, n_members=3).fit(X)
    assert est.n_members_ == 1


def test_the_raw_estimate_after_members_is_the_one_of_every_row():
    model = LatentTreeModel.random(balanced_binary_tree(6), 2, 2, noise=0.3, random_state=0)
    X, T = model.sample(1500, random_state=0), model.sample(5, random_state=9)
    est = SpectralLatentTree("auto", structure="hclt", n_members=3, random_state=0).fit(X)
    assert est.n_hidden_states_ == 2 and est.n_members_ == 3
    raw = SpectralLatentTree(2, tree=est.tree_, max_iter=0, n_members=1).fit(X)
    np.testing.assert_allclose(est.raw_log_abs(T)[1], raw.raw_log_abs(T)[1])


def test_passes_run_with_one_blas_thread():

    from threadpoolctl import threadpool_info

    from ltm_sklearn._engine.threads import single_threaded_blas

    def blas_threads():
        return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]

    before = blas_threads()
    with single_threaded_blas():
        inside = blas_threads()
    assert inside and all(n == 1 for n in inside)
    assert blas_threads() == before  # restored on exit


def test_table_updates_by_shape_match_the_tables_one_by_one():
    from ltm_sklearn._algorithms.em import _log_prior_stacks, _relax, _relax_stacks

    rng = np.random.default_rng(0)
    # tables of three shapes, with a row of zero counts and a per-node pseudo-count
    counts = {u: rng.random(shape) * 10 for u, shape in zip(range(1, 7), [(3, 3), (3, 2)] * 3)}
    counts[7] = rng.random((2, 5))
    counts[3][1] = 0.0
    alphas = {u: 0.1 * u for u in counts}
    root, cpts = m_step(np.ones(3), counts, alpha=(0.5, alphas))
    for u, c in counts.items():
        s = (c + alphas[u]).sum(axis=1, keepdims=True)
        np.testing.assert_allclose(cpts[u], (c + alphas[u]) / s)
    assert sorted(cpts) == sorted(counts)
    expected = sum(alphas[u] * np.log(c).sum() for u, c in cpts.items())
    assert log_prior(root, cpts, (0.0, alphas)) == pytest.approx(expected)
    # a table of pseudo-count 0 adds nothing to the prior, even with entries of 0
    tables = np.stack([cpts[1], cpts[3]])
    tables[1, 0, 0] = 0.0
    value = _log_prior_stacks(root, [tables], 0.0, [np.array([0.1, 0.0])])
    assert value == pytest.approx(0.1 * np.log(cpts[1]).sum())
    other = m_step(np.ones(3), {u: c + 1 for u, c in counts.items()})[1]
    keys = [[1, 3, 5], [2, 4, 6], [7]]
    stacked = [np.stack([cpts[u] for u in g]) for g in keys]
    updates = [np.stack([other[u] for u in g]) for g in keys]
    relaxed = _relax_stacks(stacked, updates, 1.7)
    for g, r in zip(keys, relaxed):
        for u, t in zip(g, r):
            np.testing.assert_allclose(t, _relax(cpts[u], other[u], 1.7))
    assert _relax_stacks(stacked, updates, 1.0) is updates


def test_stacked_e_step_equals_the_e_step_on_dicts():
    model = LatentTreeModel.random(balanced_binary_tree(8), 3, 4, random_state=1)
    X = model.sample(500, random_state=0)
    codes, w = X.T.astype(np.int64), np.arange(1.0, 501.0)
    evidence = CodeEvidence(codes, model.n_states[:8])
    ll, rc, ec = expected_counts(model.tree, model.root_marginal, model.cpts, evidence, w)
    tables = stacked_tables(model.tree, model.root_marginal, model.cpts)
    assert tables.to_dict().keys() == model.cpts.keys()
    for u, t in tables.to_dict().items():
        np.testing.assert_array_equal(t, model.cpts[u])
    ll2, rc2, counts = expected_counts_stacked(model.tree, model.root_marginal, tables, evidence, w)
    np.testing.assert_allclose(ll2, ll)
    np.testing.assert_allclose(rc2, rc)
    for u, c in tables.like(counts).to_dict().items():
        np.testing.assert_allclose(c, ec[u])


def test_code_evidence_keeps_small_blocks_between_passes(monkeypatch):
    # 6 hidden states, 3 categories: leaf messages are products with indicator matrices
    model = LatentTreeModel.random(balanced_binary_tree(8), 6, 3, random_state=0)
    X = model.sample(2000, random_state=0)  # one block of the passes
    codes, w = X.T.astype(np.int64), np.ones(len(X))
    n_states = model.n_states[:8]
    kept = CodeEvidence(codes, n_states)
    first = expected_counts(model.tree, model.root_marginal, model.cpts, kept, w)
    again = expected_counts(model.tree, model.root_marginal, model.cpts, kept, w)
    assert kept.block(slice(0, 2000)) is kept.block(slice(0, 2000))
    assert kept.block(slice(0, 2000))._stacks  # built by the first pass, read by the second
    monkeypatch.setattr(evidence_module, "_KEEP_BLOCKS", 10)  # too large to keep
    fresh = CodeEvidence(codes, n_states)
    assert fresh._blocks is None
    assert fresh.block(slice(0, 2000)) is not fresh.block(slice(0, 2000))
    other = expected_counts(model.tree, model.root_marginal, model.cpts, fresh, w)
    for b in (again, other):  # the same numbers, kept or rebuilt
        np.testing.assert_array_equal(first[0], b[0])
        for u in first[2]:
            np.testing.assert_array_equal(first[2][u], b[2][u])


@pytest.mark.parametrize("softening", [0.0, 0.05])
@pytest.mark.parametrize("k", [2, 6])
def test_batched_leaf_messages_and_counts_equal_the_per_leaf_ones(k, softening):
    # leaves of 2, 3 and 20 categories: batched by shape in products with indicators, or
    # (20) gathered and summed by category for all the leaves of the shape at once
    rng = np.random.default_rng(0)
    n_states = np.array([2, 3, 20, 3, 2, 20, 3, 2])
    n = 500
    codes = np.stack([rng.integers(0, c, n) for c in n_states])
    codes[rng.random(codes.shape) < 0.1] = -1  # missing
    codes[rng.random(codes.shape) < 0.05] = -2  # unseen
    ev = CodeEvidence(codes, n_states, unseen_proba=np.full(8, 0.01), softening=softening)
    cpts = {u: rng.dirichlet(np.ones(c), size=k) for u, c in enumerate(n_states)}
    q = {u: rng.random((k, n)) for u in cpts}
    for c in (2, 3, 20):  # one shape of table at a time, stacked
        nodes = [u for u in cpts if n_states[u] == c]
        tables = np.stack([cpts[u] for u in nodes])
        msgs = ev.leaf_messages(nodes, tables)
        # into a given array, as the passes write their pools (a strided one too)
        into = np.full((len(nodes), k, 2 * n), np.nan)
        assert ev.leaf_messages(nodes, tables, out=into[:, :, ::2]) is not None
        np.testing.assert_array_equal(into[:, :, ::2], msgs)
        counts = ev.leaf_counts_of(nodes, tables, np.stack([q[u] for u in nodes]), msgs)
        for i, u in enumerate(nodes):
            np.testing.assert_allclose(msgs[i], ev.message(u, cpts[u]), rtol=1e-12)
            np.testing.assert_allclose(
                counts[i], ev.leaf_counts(u, q[u], cpts[u], msgs[i]), rtol=1e-12, atol=1e-12
            )
    assert ev._stacks  # some leaves were batched


def test_small_trees_get_larger_row_blocks_that_sum_to_the_same_counts(monkeypatch):
    def plan_of(model):
        return inference._plan(model.tree, model.root_marginal, model.cpts)

    small = LatentTreeModel.random(balanced_binary_tree(16), 2, 4, random_state=0)
    large = LatentTreeModel.random(balanced_binary_tree(128), 24, 2, random_state=0)
    # 16 leaves at k' = 2: 90 elements of messages and node pools a row, so 2^21 over the
    # tree is more rows than 2^14 of the largest message (4 states); capped
    assert inference._block_rows(plan_of(small)) == inference.BLOCK_ROWS
    # 128 leaves at k' = 24: 2^14 elements of a message are more rows
    assert inference._block_rows(plan_of(large)) == (1 << 14) // 24
    X = small.sample(3000, random_state=0)
    codes, w = X.T.astype(np.int64), np.linspace(0.5, 2.0, 3000)
    evidence = CodeEvidence(codes, small.n_states[:16])
    one = expected_counts(small.tree, small.root_marginal, small.cpts, evidence, w, n_jobs=2)
    # blocks of the least number of rows: six of them, summed in threads
    monkeypatch.setattr(inference, "_TREE_ELEMENTS", 0)
    monkeypatch.setattr(inference, "_MESSAGE_ELEMENTS", 4)
    assert inference._block_rows(plan_of(small)) == inference._MIN_BLOCK_ROWS == 512
    several = expected_counts(small.tree, small.root_marginal, small.cpts, evidence, w, n_jobs=2)
    np.testing.assert_allclose(one[0], several[0], rtol=1e-12)
    np.testing.assert_allclose(one[1], several[1], rtol=1e-12)
    for u in one[2]:
        np.testing.assert_allclose(one[2][u], several[2][u], rtol=1e-10, atol=1e-12)


def test_block_threads_default_to_the_cores_within_omp_num_threads(monkeypatch):
    from joblib import cpu_count

    from ltm_sklearn._engine.threads import block_threads

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert block_threads(None) == cpu_count()
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert block_threads(None) == 1
    assert block_threads(2) == 2


def test_softening_auto_walks_from_none_on_the_held_out_rows():
    model = LatentTreeModel.random(balanced_binary_tree(6), 2, 3, random_state=0)
    X = model.sample(400, random_state=1)
    est = SpectralLatentTree(2, tree=model.tree, softening="auto", n_members=1, random_state=0)
    est.fit(X)
    scores = est.softening_scores_
    values = list(scores)
    assert values[0] == 0.0 and len(values) >= 2
    assert values[1:] == [values[1] * 2**i for i in range(len(values) - 1)]  # doubled
    assert est.softening_ in scores
    # the chosen value gained more than tol over the one before it (or none was chosen)
    i = values.index(est.softening_)
    assert i == 0 or scores[values[i]] > scores[values[i - 1]] + est.tol
    assert np.exp(est.score_samples(model.all_configurations())).sum() == pytest.approx(1.0)


# ---------------------------------------------------------------------- the EM engine
def test_float32_messages_agree_with_float64():
    model = hclt_truth(d=10, k=4, seed=3)
    X = model.sample(3000, random_state=0)
    ev = CodeEvidence(X.T, np.full(10, 2))
    n_states = node_states(model.tree, np.full(10, 2), 16)
    root, cpts = random_cpts(model.tree, n_states, 0)
    w = np.ones(3000)
    ll64, rc64, ec64 = expected_counts(model.tree, root, cpts, ev, w)
    ll32, rc32, ec32 = expected_counts(model.tree, root, cpts, ev, w, dtype=np.float32)
    assert abs(ll64.mean() - ll32.mean()) < 1e-5
    np.testing.assert_allclose(rc32, rc64, rtol=1e-3, atol=1e-3)
    for u in ec64:
        np.testing.assert_allclose(ec32[u], ec64[u], rtol=1e-3, atol=1e-2)
    threads = log_likelihood(model.tree, root, cpts, ev, n_jobs=2)
    np.testing.assert_allclose(threads, ll64, rtol=1e-12)


def test_minibatch_em_reaches_the_full_batch_optimum():
    model = hclt_truth(d=8, k=3, seed=4)
    X = model.sample(6000, random_state=0)
    ev = CodeEvidence(X.T, np.full(8, 2))
    w = np.ones(6000)
    n_states = node_states(model.tree, np.full(8, 2), 3)
    start = random_cpts(model.tree, n_states, 0)
    *_, full, _, _, _ = fit_em(model.tree, *start, ev, w, alpha=0.5, max_iter=1000, tol=1e-7)
    root, cpts, updates = minibatch_em(
        model.tree, *start, ev, w, alpha=0.5, n_epochs=3, batch_size=500, random_state=0
    )
    assert updates == 36
    *_, mixed, _, _, _ = fit_em(model.tree, root, cpts, ev, w, alpha=0.5, max_iter=1000, tol=1e-7)
    assert abs(mixed - full) < 2e-3
    with pytest.raises(ValueError, match="decay"):
        minibatch_em(model.tree, *start, ev, w, decay=0.4)


def test_a_fit_leaves_no_message_buffers_behind():
    # the passes keep their buffers from one EM iteration to the next, and a fit frees
    # them: a process (a joblib worker too) does not hold the messages of its last model
    X = LatentTreeModel.random(balanced_binary_tree(6), 3, 3, random_state=0).sample(
        500, random_state=0
    )
    SpectralLatentTree(3, structure="nj", random_state=0).fit(X)
    assert inference._ALL_BUFFERS and not any(kept for _, kept in inference._ALL_BUFFERS)
    model = LatentTreeModel.random(balanced_binary_tree(4), 2, 2, random_state=0)
    ev = evidence(model, model.sample(50, random_state=0).T.astype(np.int64))
    expected_counts(model.tree, model.root_marginal, model.cpts, ev, np.ones(50))
    assert any(kept for _, kept in inference._ALL_BUFFERS)
    inference.release_buffers()
    assert not any(kept for _, kept in inference._ALL_BUFFERS)
