"""Tree search under balanced minimum evolution: BIONJ, NNIs, exact and sampled metrics."""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import shortest_path

from ltm_sklearn import LatentTree
from ltm_sklearn._algorithms.structure import (
    binary_leaf_tree,
    bionj,
    bme_length,
    censored_residual,
    clnj,
    learn_tree,
    minimum_evolution_search,
    neighbor_joining,
    spectral_distance,
)
from ltm_sklearn._algorithms.structure.censored import one_sided_nnls
from ltm_sklearn._algorithms.structure.search import (
    _apply_nni,
    _apply_spr,
    _nni_gains,
    _spr_moves,
    _Subtrees,
    _tree,
)
from ltm_sklearn._engine.moments import MomentEstimator
from ltm_sklearn.datasets import LatentTreeModel, balanced_binary_tree, random_binary_tree
from ltm_sklearn.metrics import robinson_foulds


def additive(tree, seed):
    rng = np.random.RandomState(seed)
    e = np.asarray(tree.edges)
    w = rng.uniform(0.1, 1.0, len(e))
    G = sp.coo_matrix((w, (e[:, 0], e[:, 1])), shape=(tree.n_nodes,) * 2).tocsr()
    return shortest_path(G, directed=False)[: tree.n_observed, : tree.n_observed]


def test_bme_length_is_pauplins_formula_and_tree_length_on_additive_distances():
    tree = random_binary_tree(10, random_state=0)
    D = additive(tree, 0)
    tau = tree.hop_distances()[:10, :10]
    brute = sum(2.0 ** (1 - tau[i, j]) * D[i, j] for i in range(10) for j in range(i + 1, 10))
    assert bme_length(tree, D) == pytest.approx(brute)
    # on its own additive metric the BME length of the true tree is its total edge length
    rng = np.random.RandomState(0)
    w = rng.uniform(0.1, 1.0, len(tree.edges))
    assert bme_length(tree, D) == pytest.approx(w.sum())


@pytest.mark.parametrize("n_leaves", [8, 16, 32, 64, 128])
def test_nni_gains_are_exact_and_search_finds_the_truth_from_a_random_start(n_leaves):
    truth = random_binary_tree(n_leaves, random_state=n_leaves)
    D = additive(truth, n_leaves)
    assert robinson_foulds(bionj(D), truth) == 0
    start = random_binary_tree(n_leaves, random_state=n_leaves + 1)
    assert robinson_foulds(start, truth) > 0
    # every predicted gain is the exact change of the BME length
    adjacency = [list(nb) for nb in start.neighbors]
    sub = _Subtrees(adjacency, n_leaves, D)
    before = bme_length(start, D)
    for gain, u, v, b, c in _nni_gains(adjacency, n_leaves, sub)[:20]:
        trial = [list(nb) for nb in adjacency]
        _apply_nni(trial, u, v, b, c)
        assert before - bme_length(_tree(trial, n_leaves), D) == pytest.approx(gain, abs=1e-9)
    found = minimum_evolution_search(D, start)
    assert robinson_foulds(found, truth) == 0
    assert bme_length(found, D) == pytest.approx(bme_length(truth, D))


@pytest.mark.parametrize("seed", [0, 1])
def test_spr_gains_are_exact_changes_of_the_length(seed):
    # any symmetric matrix (not a tree metric): the regraft formula is an identity
    rng = np.random.RandomState(seed)
    tree = random_binary_tree(24, random_state=seed)
    D = rng.uniform(0.0, 3.0, (24, 24))
    D = D + D.T
    np.fill_diagonal(D, 0.0)
    adjacency = [list(nb) for nb in tree.neighbors]
    moves = _spr_moves(adjacency, 24, _Subtrees(adjacency, 24, D), radius=6)
    assert max(len(m[5]) for m in moves) > 3  # regrafts beyond interchanges are scored
    before = bme_length(tree, D)
    for gain, p, s, x, c, _path in moves[:: max(1, len(moves) // 60)]:
        trial = [list(nb) for nb in adjacency]
        _apply_spr(trial, p, s, x, c)
        after = _tree(trial, 24)
        assert sorted(after.degree(u) for u in range(24)) == [1] * 24
        assert before - bme_length(after, D) == pytest.approx(gain, abs=1e-9)


def test_every_round_shortens_and_spr_finds_the_truth_from_random_regrafts(capsys):
    truth = random_binary_tree(48, random_state=7)
    D = additive(truth, 7)
    # a start a few random regrafts away from the truth
    rng = np.random.RandomState(0)
    adjacency = [list(nb) for nb in truth.neighbors]
    for _ in range(6):
        p = rng.randint(48, len(adjacency))
        s = adjacency[p][rng.randint(3)]
        a = [x for x in adjacency[p] if x != s][0]
        kids = [z for z in adjacency[a] if z != p]
        if not kids:
            continue
        _apply_spr(adjacency, p, s, a, kids[rng.randint(2)])
    start = _tree(adjacency, 48)
    assert robinson_foulds(start, truth) > 0
    found = minimum_evolution_search(D, start, verbose=1)
    assert robinson_foulds(found, truth) == 0
    lengths = [float(line.rsplit(" ", 1)[1]) for line in capsys.readouterr().out.splitlines()]
    assert all(b < a for a, b in zip(lengths, lengths[1:]))


def test_search_never_lengthens_the_start_and_is_invariant_to_column_order():
    truth = balanced_binary_tree(16)
    model = LatentTreeModel.random(truth, 2, 4, noise=0.5, random_state=3)
    X = model.sample(3000, random_state=0)
    D = spectral_distance(MomentEstimator(X.T.astype(np.int16), np.full(16, 4)), 2)
    start = neighbor_joining(D)
    found = minimum_evolution_search(D, start)
    assert bme_length(found, D) <= bme_length(start, D) + 1e-12
    perm = np.random.RandomState(1).permutation(16)
    found_p = minimum_evolution_search(
        D[np.ix_(perm, perm)], neighbor_joining(D[np.ix_(perm, perm)])
    )
    # map the permuted tree back to the original column ids
    inverse = {int(i): int(p) for i, p in enumerate(perm)}
    back = LatentTree(
        [
            (inverse.get(u, u) if u < 16 else u, inverse.get(v, v) if v < 16 else v)
            for u, v in found_p.edges
        ],
        16,
    )
    assert robinson_foulds(back, found) == 0


@pytest.mark.slow
def test_recovers_random_trees_where_neighbor_joining_fails():
    # 32-leaf random trees, k = 2, n = 4, CPT noise 0.3, N = 1e5 (measured, 5 models:
    # NJ exact in 3/5, minimum-evolution search in 5/5)
    exact_nj = exact_me = 0
    for seed in range(5):
        truth = random_binary_tree(32, random_state=seed)
        model = LatentTreeModel.random(truth, 2, 4, noise=0.3, random_state=seed)
        X = model.sample(100_000, random_state=seed + 100)
        D = spectral_distance(MomentEstimator(X.T.astype(np.int16), np.full(32, 4)), 2)
        exact_nj += robinson_foulds(neighbor_joining(D), truth) == 0
        exact_me += robinson_foulds(learn_tree(D, "me"), truth) == 0
    assert exact_me == 5 and exact_nj < 5


def test_binary_leaf_tree_keeps_the_splits():
    truth = random_binary_tree(20, random_state=4)
    tree = clnj(additive(truth, 4))  # observed nodes may be internal
    binary = binary_leaf_tree(tree)
    assert all(binary.degree(u) == 1 for u in range(20))
    assert all(binary.degree(h) == 3 for h in binary.hidden_nodes)
    assert robinson_foulds(binary, truth) == 0
    with pytest.raises(ValueError, match="binary tree"):
        minimum_evolution_search(additive(truth, 4), LatentTree.star(20))


def _brute_average(tree_adjacency, d, D, X, Y, index):
    """Balanced average between the directed subtrees X and Y by listing their leaves."""
    heads = {e: pc for pc, e in index.items()}

    def leaves(e):
        p, c = heads[e]
        out, stack = [], [(p, c, 1.0)]
        while stack:
            p, c, w = stack.pop()
            if c < d:
                out.append((c, w))
            else:
                stack += [(c, x, w / 2) for x in tree_adjacency[c] if x != p]
        return out

    return sum(wi * wj * D[i, j] for i, wi in leaves(X) for j, wj in leaves(Y))


@pytest.mark.parametrize("shape", ["random", "balanced", "caterpillar"])
def test_subtree_averages_match_listing_the_leaves(shape):
    d = 14
    if shape == "random":
        tree = random_binary_tree(d, random_state=3)
    elif shape == "balanced":
        tree = balanced_binary_tree(16)
        d = 16
    else:  # a chain of hidden nodes: subtrees up to d - 1 leaves deep
        last = 2 * d - 3
        edges = [(0, d), (1, d), (d - 2, last), (d - 1, last)]
        edges += [(d + t, d + t + 1) for t in range(d - 3)]
        edges += [(t + 1, d + t) for t in range(1, d - 3)]
        tree = LatentTree(edges, d)
    rng = np.random.RandomState(0)
    D = rng.uniform(0.0, 2.0, (d, d))
    D = D + D.T
    np.fill_diagonal(D, 0.0)
    adjacency = [list(nb) for nb in tree.neighbors]
    sub = _Subtrees(adjacency, d, D)
    # every disjoint pair: X = (p, c), Y = (q, r) with r and c on different sides
    hops = tree.hop_distances()
    X, Y = [], []
    for (p, c), e in sub.index.items():
        for (q, r), f in sub.index.items():
            # disjoint iff the path c..r runs through p and q (the heads face away)
            if hops[c, r] == hops[c, p] + hops[p, q] + hops[q, r] and e != f:
                X.append(e)
                Y.append(f)
    values = sub.averages(X, Y)
    brute = [_brute_average(adjacency, d, D, x, y, sub.index) for x, y in zip(X, Y)]
    assert len(X) > 100
    np.testing.assert_allclose(values, brute, rtol=1e-12, atol=1e-12)
    sub._CHUNK = 7  # the pairs summed a few leaves at a time give the same numbers
    np.testing.assert_allclose(sub.averages(X, Y), values, rtol=1e-12, atol=1e-13)
    assert sub.length(adjacency) == pytest.approx(bme_length(tree, D), rel=1e-12)


def test_bionj_with_equal_variances_is_neighbor_joining_and_recovers_additive_trees():
    truth = random_binary_tree(40, random_state=5)
    D = additive(truth, 5)
    same = bionj(D, V=np.ones_like(D))
    assert robinson_foulds(same, neighbor_joining(D)) == 0
    assert robinson_foulds(bionj(D), truth) == 0
    # noisy distances: the variance-weighted reductions still give a binary leaf tree
    noisy = D + np.random.RandomState(0).uniform(0, 0.3, D.shape)
    noisy = (noisy + noisy.T) / 2
    np.fill_diagonal(noisy, 0.0)
    tree = bionj(noisy)
    assert all(tree.degree(u) == 1 for u in range(40))
    assert all(tree.degree(h) == 3 for h in tree.hidden_nodes)


def test_censored_residual_ignores_saturated_distances_only_when_too_long():
    from ltm_sklearn._algorithms.structure.censored import saturation_level

    truth = random_binary_tree(12, random_state=2)
    D = additive(truth, 2)
    wrong = random_binary_tree(12, random_state=3)
    assert robinson_foulds(wrong, truth) > 0
    n = 1e12  # nothing censored: weighted least squares, exact on the true tree
    assert censored_residual(truth, D, n) == pytest.approx(0.0, abs=1e-6)
    assert censored_residual(wrong, D, n) > 1.0
    # the long distances read at a floor, as saturated estimates do
    n = 1e4
    level = saturation_level(n)
    floored = np.minimum(D, level + 0.1)
    assert (D > level + 0.1).sum() > 10
    # censored: a tree path longer than a floored distance costs nothing
    assert censored_residual(truth, floored, n) == pytest.approx(0.0, abs=1e-6)
    # read as values (no censoring), the floor is misfit by the true tree
    assert censored_residual(truth, floored, n, delta=-10.0) > 1.0


def _one_sided_objective(A, y, one_sided, w, x):
    r = A @ x - y
    r = np.where(one_sided, np.minimum(r, 0.0), r)
    return float(r @ (w * r))


@pytest.mark.parametrize("seed", range(6))
def test_one_sided_nnls_is_the_optimum_of_the_censored_least_squares(seed):
    from scipy.optimize import minimize, nnls

    rng = np.random.RandomState(seed)
    A = rng.binomial(1, 0.4, size=(40, 8)).astype(float)
    y = A @ rng.uniform(0, 1, 8) + rng.normal(0, 0.5, 40)
    w = rng.uniform(0.5, 2.0, 40)
    one_sided = rng.uniform(size=40) < 0.4
    x = one_sided_nnls(A, y, one_sided, w)
    assert x is not None and np.all(x >= 0)
    value = _one_sided_objective(A, y, one_sided, w, x)

    def f(z):
        r = A @ z - y
        r = np.where(one_sided, np.minimum(r, 0.0), r)
        return float(r @ (w * r)), 2.0 * A.T @ (w * r)

    # a general bound-constrained minimiser from many starts finds nothing lower
    for start in rng.uniform(0, 2, size=(5, 8)):
        res = minimize(
            f,
            start,
            jac=True,
            method="L-BFGS-B",
            bounds=[(0, None)] * 8,
            options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 10_000},
        )
        assert value <= res.fun + 1e-7 * (1 + abs(res.fun))
    # the first-order conditions: no descent along any coordinate that may move
    _, grad = f(x)
    assert np.all(grad[x > 1e-10] == pytest.approx(0.0, abs=1e-6))
    assert np.all(grad[x <= 1e-10] >= -1e-6)
    # without one-sided rows: weighted non-negative least squares
    plain = one_sided_nnls(A, y, np.zeros(40, bool), w)
    sw = np.sqrt(w)
    np.testing.assert_allclose(plain, nnls(A * sw[:, None], y * sw)[0], atol=1e-10)
    # a one-sided row that the fit makes long enough costs nothing; too short, its square
    assert value <= _one_sided_objective(A, y, np.zeros(40, bool), w, plain) + 1e-12


def test_censored_residual_by_nnls_and_by_lbfgs_agree(monkeypatch):
    from ltm_sklearn._algorithms.structure import censored

    truth = random_binary_tree(24, random_state=4)
    D = _sweep_distances(truth, 4, 5_000)
    wrong = random_binary_tree(24, random_state=5)
    exact = [censored_residual(t, D, 5_000) for t in (truth, wrong)]
    monkeypatch.setattr(censored, "_DENSE_ENTRIES", 0)  # L-BFGS-B on the sparse paths
    general = [censored_residual(t, D, 5_000) for t in (truth, wrong)]
    np.testing.assert_allclose(exact, general, rtol=1e-6)
    assert exact[0] < exact[1]


def _sweep_distances(truth, seed, n_rows, noise=0.5):
    """Spectral distances of model ``seed`` of the sweep of bench_structure.py (general
    Markov, k = 2, n = 4) on ``truth``."""
    model = LatentTreeModel.random(truth, 2, 4, noise=noise, random_state=seed)
    X = model.sample(n_rows, random_state=seed + 100)
    n_states = np.full(truth.n_observed, 4)
    return spectral_distance(MomentEstimator(X.T.astype(np.int16), n_states), 2)


def test_search_keeps_the_latent_tree_or_takes_clnj_when_saturation_misleads_it():
    # general Markov random 32-leaf trees, noise 0.5, 1e5 rows: balanced minimum evolution
    # alone ended at a mean RF of 17.6 against CLNJ's 3.2 (bench_structure, 5 models)
    rf_me, rf_clnj = [], []
    for seed in range(2):
        truth = random_binary_tree(32, random_state=seed)
        D = _sweep_distances(truth, seed, 100_000)
        rf_me.append(robinson_foulds(learn_tree(D, "me", n_samples=100_000), truth))
        rf_clnj.append(robinson_foulds(learn_tree(D, "clnj", n_samples=100_000), truth))
    assert np.mean(rf_me) <= np.mean(rf_clnj)


def test_search_is_never_longer_than_neighbor_joining():
    # general Markov balanced 16-leaf tree, noise 0.5, 1e4 rows (bench_structure, model 1):
    # the search from BIONJ and CLNJ stopped at a tree longer under balanced minimum
    # evolution than neighbor joining's own (RF 6 against NJ's 4)
    truth = balanced_binary_tree(16)
    D = _sweep_distances(truth, 1, 10_000)
    found = learn_tree(D, "me", n_samples=10_000)
    nj = neighbor_joining(D)
    assert bme_length(found, D) <= bme_length(nj, D) + 1e-12
    assert robinson_foulds(found, truth) <= robinson_foulds(nj, truth)


def test_censored_check_keeps_the_search_against_a_much_longer_clnj_tree():
    # general Markov balanced 16-leaf tree, noise 0.5, 1e4 rows (a fresh model of the
    # bench_structure sweep): CLNJ merges wrong pairs (RF 6) yet fits the reliable
    # distances better (censored residual 0.9 vs 21.9); its tree is 3.5% longer under
    # balanced minimum evolution, and the searched tree (RF 2) is kept
    truth = balanced_binary_tree(16)
    D = _sweep_distances(truth, 12, 10_000)
    local = learn_tree(D, "clnj", n_samples=10_000)
    found = learn_tree(D, "me", n_samples=10_000)
    assert censored_residual(local, D, 10_000) < censored_residual(found, D, 10_000) - 1
    assert bme_length(local, D) > 1.03 * bme_length(found, D)
    assert robinson_foulds(found, truth) < robinson_foulds(local, truth)
    # without the length condition CLNJ's tree is taken
    residual_only = learn_tree(D, "me", n_samples=10_000, censored_max_excess=None)
    assert robinson_foulds(residual_only, local) == 0
    with pytest.raises(ValueError, match="censored_max_excess"):
        learn_tree(D, "me", n_samples=10_000, censored_max_excess=-0.1)


def test_the_search_checks_its_start_and_keeps_its_names():
    D = np.array([[0, 2, 5, 5], [2, 0, 5, 5], [5, 5, 0, 2], [5, 5, 2, 0]], float)
    named = LatentTree([(0, 4), (2, 4), (1, 5), (3, 5), (4, 5)], 4, feature_names=list("abcd"))
    assert minimum_evolution_search(D, named).feature_names == list("abcd")
    D5 = np.ones((5, 5)) - np.eye(5)
    with pytest.raises(ValueError, match="start has 4 observed nodes but D is 5 x 5"):
        minimum_evolution_search(D5, named)


def test_bme_length_checks_the_distances_against_the_tree():
    tree = balanced_binary_tree(4)
    with pytest.raises(ValueError, match="the tree has 4 observed nodes"):
        bme_length(tree, np.ones((5, 5)) - np.eye(5))
    with pytest.raises(ValueError, match="non-finite"):
        bme_length(tree, np.full((4, 4), np.nan))
