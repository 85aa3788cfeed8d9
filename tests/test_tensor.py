"""Tensor power method, three-view decomposition, tensor-initialised EM (Anandkumar et al. (JMLR
2014))."""

import numpy as np
import pytest

from ltm_sklearn import LatentTree, LatentTreeEM
from ltm_sklearn._algorithms.em import fit_em
from ltm_sklearn._algorithms.tensor import (
    _power_method_stacked,
    _power_starts,
    expand_states,
    tensor_cpts,
    tensor_power_method,
    three_view_decomposition,
    whiten,
)
from ltm_sklearn._engine.evidence import CodeEvidence
from ltm_sklearn._engine.inference import log_likelihood
from ltm_sklearn._engine.moments import MomentEstimator
from ltm_sklearn.datasets import (
    LatentTreeModel,
    balanced_binary_tree,
    hmm_chain,
    random_binary_tree,
)


def orthogonal_tensor(k, seed):
    rng = np.random.RandomState(seed)
    V = np.linalg.qr(rng.randn(k, k))[0]
    lam = np.sort(rng.uniform(1.0, 5.0, k))[::-1]
    return np.einsum("r,ir,jr,kr->ijk", lam, V, V, V), lam, V


def match(V_true, V_est):
    """Column permutation and signs aligning ``V_est`` to ``V_true``."""
    order = np.argmax(np.abs(V_true.T @ V_est), axis=1)
    return V_est[:, order] * np.sign(np.sum(V_true * V_est[:, order], axis=0))


@pytest.mark.parametrize("k", [2, 4, 7])
@pytest.mark.parametrize("seed", [0, 1])
def test_power_method_recovers_orthogonal_components(k, seed):
    T, lam, V = orthogonal_tensor(k, seed)
    est_lam, est_V = tensor_power_method(T, random_state=seed)
    np.testing.assert_allclose(np.sort(est_lam)[::-1], lam, atol=1e-8)
    np.testing.assert_allclose(match(V, est_V), V, atol=1e-8)


def test_stacked_power_methods_equal_one_after_another():
    """The decompositions of a model's nodes run side by side: each tensor of the stack
    gets the eigenpairs that its own call would, with the starts drawn in the same
    order (beside an orthogonally decomposable tensor, a noisy one that is not)."""
    T1 = orthogonal_tensor(3, 0)[0]
    T2 = orthogonal_tensor(3, 1)[0] + 0.3 * np.random.RandomState(2).randn(3, 3, 3)
    T2 = (
        sum(
            np.transpose(T2, p)
            for p in [(0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)]
        )
        / 6
    )
    rng = np.random.RandomState(5)
    alone = [tensor_power_method(T, random_state=rng) for T in (T1, T2)]
    starts = _power_starts(np.random.RandomState(5), 2, 3, 3, 10)
    lams, vecs = _power_method_stacked(np.stack([T1, T2]), starts, 100, 1e-12)
    for i, (lam, V) in enumerate(alone):
        np.testing.assert_allclose(lams[i], lam, rtol=1e-10)
        np.testing.assert_allclose(vecs[i], V, atol=1e-10)


def test_power_method_agrees_with_tensorly():
    tl_decomp = pytest.importorskip("tensorly.decomposition")
    T, lam, V = orthogonal_tensor(5, 3)
    w_tl, f_tl = tl_decomp.symmetric_parafac_power_iteration(T, 5, n_repeat=10, n_iteration=50)
    ours_lam, ours_V = tensor_power_method(T, random_state=0)
    np.testing.assert_allclose(np.sort(ours_lam), np.sort(np.asarray(w_tl)), atol=1e-8)
    np.testing.assert_allclose(match(np.asarray(f_tl), ours_V), np.asarray(f_tl), atol=1e-8)


def test_whiten_and_input_checks():
    A = np.array([[2.0, 0.3, 0.0], [0.3, 1.0, 0.0], [0.0, 0.0, 0.0]])
    W = whiten(A, 2)
    np.testing.assert_allclose(W.T @ A @ W, np.eye(2), atol=1e-12)
    with pytest.raises(ValueError, match="fewer than 3 positive eigenvalues"):
        whiten(A, 3)
    with pytest.raises(ValueError, match="cubic"):
        tensor_power_method(np.zeros((2, 3, 2)))


def test_whiten_of_a_large_moment_reads_the_top_eigenpairs_as_a_full_decomposition():
    # a view of many categories (a column of 600): its top k eigenpairs by Lanczos
    rng = np.random.RandomState(0)
    m, k = 600, 3
    p = rng.dirichlet(np.ones(m))
    U = rng.dirichlet(np.ones(m), size=k).T
    M2 = 0.5 * np.diag(p) + U @ np.diag([0.2, 0.1, 0.05]) @ U.T
    W = whiten(M2, k)
    np.testing.assert_allclose(W.T @ M2 @ W, np.eye(k), atol=1e-10)
    vals, vecs = np.linalg.eigh(M2)
    full = vecs[:, ::-1][:, :k] / np.sqrt(vals[::-1][:k])
    np.testing.assert_allclose(np.abs(W), np.abs(full), rtol=1e-8, atol=1e-10)
    rank_two = U[:, :2] @ U[:, :2].T
    with pytest.raises(ValueError, match="fewer than 3 positive eigenvalues"):
        whiten(rank_two, 3)


def test_three_view_decomposition_on_exact_moments():
    rng = np.random.RandomState(0)
    k, n = 3, (4, 5, 6)
    w = rng.dirichlet(np.ones(k)) * 0.5 + 0.5 / k
    O = [rng.dirichlet(np.ones(m), size=k).T for m in n]  # columns P(x_v | h)
    P12 = O[0] @ np.diag(w) @ O[1].T
    P13 = O[0] @ np.diag(w) @ O[2].T
    P23 = O[1] @ np.diag(w) @ O[2].T
    triple = np.einsum("h,ah,bh,ch->abc", w, *O)
    est_w, est_C = three_view_decomposition(P12, P13, P23, triple, k, random_state=0)
    order = [int(np.argmin(np.abs(est_C - O[2][:, [h]]).sum(axis=0))) for h in range(k)]
    np.testing.assert_allclose(est_C[:, order], O[2], atol=1e-8)
    np.testing.assert_allclose(est_w[order], w, atol=1e-8)


def exact_moments(model):
    X = model.all_configurations().astype(np.int64)
    w = np.exp(model.log_likelihood(X))
    return X, MomentEstimator(X.T.astype(np.int16), model.n_states[: model.n_features], w), w


@pytest.mark.parametrize(
    "tree",
    [
        balanced_binary_tree(8),
        random_binary_tree(9, random_state=1),
        hmm_chain(6),
        LatentTree([(0, 1), (0, 2), (0, 6), (6, 3), (6, 7), (7, 4), (7, 5)], 6),
    ],
    ids=["balanced", "random", "hmm", "observed-internal"],
)
def test_tensor_cpts_reproduce_the_joint_from_exact_moments(tree):
    model = LatentTreeModel.random(tree, 2, 3, random_state=0)
    X, moments, w = exact_moments(model)
    root, cpts = tensor_cpts(model.tree, moments, 2, random_state=0)
    ev = CodeEvidence(X.T, model.n_states[: model.n_features])
    p = np.exp(log_likelihood(model.tree, root, cpts, ev))
    np.testing.assert_allclose(p, w, rtol=1e-6, atol=1e-12)


def test_a_node_whose_decomposition_fails_is_decomposed_alone_with_fewer_states(monkeypatch):
    """The nodes are decomposed together; one whose result fails at k' components is
    decomposed again on its own with fewer, the others keep theirs: a valid model whose
    tables are normalised."""
    from ltm_sklearn._algorithms import tensor as tensor_module

    model = LatentTreeModel.random(balanced_binary_tree(8), 3, 3, random_state=0)
    X, moments, w = exact_moments(model)
    real = tensor_module._three_view_result
    calls = []

    def fails_first(W, lam, V):
        calls.append(len(lam))
        if len(calls) == 1:
            raise np.linalg.LinAlgError("the first node's result fails")
        return real(W, lam, V)

    monkeypatch.setattr(tensor_module, "_three_view_result", fails_first)
    root, cpts = tensor_cpts(model.tree, moments, 3, random_state=0)
    assert calls[0] == 3 and 2 in calls[1:]  # the failed node again with 2 components
    ev = CodeEvidence(X.T, model.n_states[: model.n_features])
    p = np.exp(log_likelihood(model.tree, root, cpts, ev))
    assert abs(p.sum() - 1.0) < 1e-9  # normalised, over every row of the table
    states = sorted({t.shape[1] for u, t in cpts.items() if u >= model.n_features})
    assert states == [2, 3]  # the failed node with 2 states, the others with 3


@pytest.mark.parametrize(
    "tree",
    [
        balanced_binary_tree(8),
        LatentTree([(0, 1), (0, 2), (0, 6), (6, 3), (6, 7), (7, 4), (7, 5)], 6),
    ],
    ids=["balanced", "observed-internal"],
)
def test_one_hidden_state_gives_the_em_optimum_at_once(tree):
    # every hidden node constant: the tables are the maximum-likelihood ones, which
    # EM cannot improve
    model = LatentTreeModel.random(tree, 2, 3, random_state=0)
    X = model.sample(2000, random_state=0)
    w = np.ones(len(X))
    moments = MomentEstimator(X.T.astype(np.int16), model.n_states[: model.n_features], w)
    root, cpts = tensor_cpts(model.tree, moments, 1)
    assert all(c.shape[1] == 1 for u, c in cpts.items() if u >= model.n_features)
    ev = CodeEvidence(X.T.astype(np.int64), model.n_states[: model.n_features])
    start = log_likelihood(model.tree, root, cpts, ev).mean()
    _, _, objective, _, _, _ = fit_em(model.tree, root, cpts, ev, w, max_iter=20, tol=0.0)
    assert objective == pytest.approx(start, abs=1e-10)


def test_expand_states_keeps_the_distribution():
    model = LatentTreeModel.random(random_binary_tree(7, random_state=2), 2, 3, random_state=0)
    X = model.all_configurations().astype(np.int64)
    ev = CodeEvidence(X.T, model.n_states[: model.n_features])
    before = log_likelihood(model.tree, model.root_marginal, model.cpts, ev)
    root, cpts = expand_states(model.tree, model.root_marginal, model.cpts, 5)
    assert root.shape == (5,) and all(c.shape[1] == 5 for u, c in cpts.items() if u >= 7)
    np.testing.assert_allclose(log_likelihood(model.tree, root, cpts, ev), before, rtol=1e-12)
    root, cpts = expand_states(model.tree, model.root_marginal, model.cpts, 5, noise=0.1)
    for c in cpts.values():
        np.testing.assert_allclose(c.sum(axis=1), 1.0)
    assert not np.allclose(log_likelihood(model.tree, root, cpts, ev), before)


def test_tensor_init_needs_fewer_em_iterations():
    # measured (12-leaf random trees, k = 2, n = 4, N = 2e4, 3 models, tol 1e-4): 13 / 20 / 9
    # iterations from the tensor start vs 118 / 116 / 80 from random, at an objective
    # higher by 0.0001 / 0.0008 / 0.0002 nats per row
    for seed in range(3):
        tree = random_binary_tree(12, random_state=seed)
        model = LatentTreeModel.random(tree, 2, 4, random_state=seed)
        X = model.sample(20_000, random_state=1)
        tensor = LatentTreeEM(2, tree=tree, init="tensor", random_state=0).fit(X)
        rand = LatentTreeEM(2, tree=tree, init="random", max_iter=300, random_state=0).fit(X)
        assert tensor.n_iter_ < rand.n_iter_ / 2
        assert tensor.lower_bound_ > rand.lower_bound_ - 2e-3
