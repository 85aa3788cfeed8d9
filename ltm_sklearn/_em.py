"""Expectation-maximisation for latent tree models with explicit CPTs.

The baseline of papers/003 section 8 and papers/000 section 7: maximum likelihood by EM
on a fixed tree, vectorised over rows. One E-step is an upward pass (papers/003 eq. (9))
and a downward pass computing, for every edge ``(p, u)``, the posterior of
``(x_p, x_u)`` given each row; the M-step renormalises the expected counts. Identical rows
are merged (with summed weights) before the iterations.
"""

from __future__ import annotations

import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ._base import BaseLatentTree
from ._inference import cpt_log_likelihood, node_sizes, observed_evidence, upward_pass
from .datasets import LatentTreeModel

__all__ = ["LatentTreeEM", "em_step", "m_step", "fit_em", "node_posteriors", "random_cpts"]

#: pseudo-count added to every expected count so that no CPT entry becomes exactly zero
_PSEUDO_COUNT = 1e-8


def node_states(tree, n_observed_states, n_hidden_states):
    """Number of states of every node: the columns' category counts, then ``k'``."""
    hidden = np.full(tree.n_nodes - tree.n_observed, n_hidden_states, dtype=np.int64)
    return np.concatenate([np.asarray(n_observed_states, dtype=np.int64), hidden])


def random_cpts(tree, n_states, random_state=None):
    """Random starting point: flat-Dirichlet rows for every CPT and the root marginal."""
    rng = check_random_state(random_state)
    root = rng.dirichlet(np.ones(n_states[tree.root]))
    cpts = {
        u: rng.dirichlet(np.ones(n_states[u]), size=n_states[tree.parent[u]])
        for u in range(tree.n_nodes)
        if u != tree.root
    }
    return root, cpts


def em_step(tree, root_marginal, cpts, codes, weights, unseen_proba=None, evidence=None):
    """One E-step: per-row log-likelihood and expected sufficient statistics.

    Parameters
    ----------
    tree : LatentTree
        Rooted; observed nodes (codes rows ``0..d-1``) may be internal.
    root_marginal : ndarray of shape (k_root,)
    cpts : dict node -> ndarray of shape (k_parent, k_node)
    codes : ndarray of shape (d, N)
        Category codes, ``-1`` missing (marginalised), ``-2`` unseen.
    weights : ndarray of shape (N,)
    unseen_proba : ndarray of shape (d,), default=None
    evidence : dict, default=None
        Precomputed :func:`observed_evidence` (constant across iterations).

    Returns
    -------
    loglik : ndarray of shape (N,)
        ``log P(x)`` of each row under the current parameters.
    root_counts : ndarray of shape (k_root,)
        ``sum_rows w P(x_root | x)``.
    edge_counts : dict node -> ndarray of shape (k_parent, k_node)
        ``sum_rows w P(x_parent, x_node | x)``.
    """
    if evidence is None:
        evidence = observed_evidence(
            tree, node_sizes(tree, root_marginal, cpts), codes, unseen_proba
        )
    up = upward_pass(tree, root_marginal, cpts, evidence)
    lik = up["lik"]
    with np.errstate(divide="ignore"):
        loglik = np.log(lik) + up["log_scale"]
    w = np.where(lik > 0, weights, 0.0)
    beta = up["beta"]
    root_counts = root_marginal * ((w / np.where(lik > 0, lik, 1.0)) @ beta[tree.root])
    edge_counts = {}
    for c, excl, _ in _downward(tree, root_marginal, cpts, up):
        m = beta[c] @ cpts[c].T  # message of c before rescaling
        z = np.einsum("ij,ij->i", excl, m)
        ww = w / np.where(z > 0, z, 1.0)
        edge_counts[c] = cpts[c] * ((excl * ww[:, None]).T @ beta[c])
    return loglik, root_counts, edge_counts


def node_posteriors(tree, root_marginal, cpts, codes, unseen_proba=None, nodes=None):
    """Posterior ``P(x_u | x)`` of each row for the requested nodes (default: hidden).

    Returns a dict node -> ndarray of shape ``(N, k_u)``; ``alpha_u * beta_u``
    renormalised per row (rows of probability zero get a uniform posterior).
    """
    nodes = tree.hidden_nodes if nodes is None else nodes
    evidence = observed_evidence(tree, node_sizes(tree, root_marginal, cpts), codes, unseen_proba)
    up = upward_pass(tree, root_marginal, cpts, evidence)
    alpha = {tree.root: np.broadcast_to(root_marginal, up["beta"][tree.root].shape)}
    for c, _, a in _downward(tree, root_marginal, cpts, up):
        alpha[c] = a
    out = {}
    for u in nodes:
        q = alpha[u] * up["beta"][u]
        s = q.sum(axis=1, keepdims=True)
        out[u] = np.where(s > 0, q / np.where(s > 0, s, 1.0), 1.0 / q.shape[1])
    return out


def _downward(tree, root_marginal, cpts, up):
    """Yield ``(c, excl_c, alpha_c)`` for every non-root node in preorder.

    ``excl_c(x_p) = alpha_p(x_p) evidence_p(x_p) prod_{siblings s} msg_s(x_p)`` is what the
    rest of the tree says about the parent ``p``; ``alpha_c = excl_c @ cpt_c`` (rescaled
    per row) is the outside message of ``c``.
    """
    ev, msg = up["ev"], up["msg"]
    n = up["lik"].shape[0]
    alpha = {tree.root: np.broadcast_to(root_marginal, (n, root_marginal.shape[0]))}
    for p in tree.preorder:
        children = tree.children[p]
        if not children:
            continue
        a = alpha.pop(p)
        base = a if ev[p] is None else a * ev[p]
        for c, excl in zip(children, _excluding_each(base, [msg[c] for c in children])):
            a = excl @ cpts[c]
            s = a @ np.ones(a.shape[1])
            a = a / np.where(s > 0, s, 1.0)[:, None]
            if tree.children[c]:
                alpha[c] = a
            yield c, excl, a


def _excluding_each(base, msgs):
    """``base * prod_{j != i} msgs[j]`` for every ``i`` (prefix and suffix products)."""
    k = len(msgs)
    prefix = [base]
    for m in msgs[:-1]:
        prefix.append(prefix[-1] * m)
    out = [None] * k
    suffix = None
    for i in range(k - 1, -1, -1):
        out[i] = prefix[i] if suffix is None else prefix[i] * suffix
        suffix = msgs[i] if suffix is None else suffix * msgs[i]
    return out


def m_step(root_counts, edge_counts):
    """Renormalise expected counts into a root marginal and row-stochastic CPTs."""
    root = root_counts + _PSEUDO_COUNT
    cpts = {}
    for u, c in edge_counts.items():
        c = c + _PSEUDO_COUNT
        cpts[u] = c / c.sum(axis=1, keepdims=True)
    return root / root.sum(), cpts


def fit_em(tree, root_marginal, cpts, codes, weights, unseen_proba, max_iter, tol, verbose=0):
    """Iterate EM from a starting point until the relative change of the average
    log-likelihood ``|L_t - L_{t-1}| / |L_{t-1}|`` falls below ``tol``.

    Returns ``(root_marginal, cpts, lower_bound, n_iter, converged, history)``; ``history``
    holds the average log-likelihood before each M-step (non-decreasing up to round-off).
    """
    total = weights.sum()
    if total <= 0:  # e.g. a class whose rows all have zero weight: nothing to fit
        return root_marginal, cpts, -np.inf, 0, True, []
    evidence = observed_evidence(tree, node_sizes(tree, root_marginal, cpts), codes, unseen_proba)
    history = []
    converged = False
    for it in range(1, max_iter + 1):
        ll, rc, ec = em_step(
            tree, root_marginal, cpts, codes, weights, unseen_proba, evidence=evidence
        )
        history.append(float(weights @ ll / total))
        root_marginal, cpts = m_step(rc, ec)
        if verbose > 1:
            print(f"  EM iteration {it}: average log-likelihood {history[-1]:.6f}")
        if it > 1 and abs(history[-1] - history[-2]) <= tol * abs(history[-2]):
            converged = True
            break
    ll = cpt_log_likelihood(tree, root_marginal, cpts, codes, unseen_proba)
    return root_marginal, cpts, float(weights @ ll / total), it, converged, history


def unique_rows(codes, weights):
    """Merge identical rows: ``(codes of the distinct rows, summed weights)``."""
    uniq, inverse = np.unique(codes.T, axis=0, return_inverse=True)
    w = np.bincount(inverse.ravel(), weights=weights, minlength=uniq.shape[0])
    keep = w > 0
    return np.ascontiguousarray(uniq[keep].T), w[keep]


class LatentTreeEM(BaseLatentTree):
    """Latent tree model with explicit conditional tables fitted by EM.

    Maximum likelihood on a given or learned tree (the ``structure`` options of the
    shared base), with ``n_init`` restarts and the relative stopping criterion of
    papers/003 section 8 (EM- uses ``tol=1e-2``, EM+ ``tol=5e-4``). Each hidden node has
    ``n_hidden_states`` states; observed nodes, including observed internal nodes, keep
    their categories. Missing entries are marginalised in the E-step.

    Parameters
    ----------
    n_hidden_states : int, default=2
    tree : LatentTree, edge list, Newick string or networkx graph, default=None
        ``None`` learns the tree with ``structure`` from the spectral tree metric.
    structure : {"nj", "rg", "clrg", "clnj", "star", "quartet"}, default="nj"
    init : {"random", "tensor"}, default="random"
        Starting point: flat-Dirichlet CPTs, or the tensor-power-method estimate of
        :func:`ltm_sklearn.tensor.tensor_cpts` (papers/004) for the first restart.
    n_init : int, default=1
        Restarts; the one with the highest final log-likelihood is kept.
    max_iter : int, default=500
    tol : float, default=1e-6
        Relative change of the average log-likelihood that stops the iterations (EM's
        last steps are slow: at ``1e-4`` it stops about 0.02 nats per row short of the
        optimum on 8-leaf trees at N = 1e5, at ``1e-6`` within 0.001).
    n_jobs : int, default=None
        Row chunks processed in parallel when counting moments (structure learning).
    random_state : int, RandomState instance or None, default=None
    verbose : int, default=0
        1 prints one line per restart, 2 one line per iteration.

    Attributes
    ----------
    tree_ : LatentTree
        The tree (given or learned), rooted at ``tree_.root``.
    root_marginal_ : ndarray of shape (k_root,), or list of them (one per class)
    cpts_ : dict node -> ndarray of shape (k_parent, k_node), or list of them per class
        ``cpts_[u][a, b] = P(X_u = b | X_parent(u) = a)``; observed nodes index their
        states in the order of ``categories_``.
    lower_bound_ : float
        Average training log-likelihood per row of the kept restart (per class: summed
        over classes with their weights).
    n_iter_ : int
        Iterations of the kept restart (maximum over classes).
    converged_ : bool
    categories_ : list of ndarray
    classes_, class_prior_ : only when fitted with ``y``.

    Examples
    --------
    >>> from ltm_sklearn import LatentTreeEM
    >>> from ltm_sklearn.datasets import LatentTreeModel, balanced_binary_tree
    >>> model = LatentTreeModel.random(balanced_binary_tree(4), 2, 3, random_state=0)
    >>> X = model.sample(2000, random_state=0)
    >>> est = LatentTreeEM(2, tree=model.tree, random_state=0).fit(X)
    >>> bool(abs(est.score(X) - model.log_likelihood(X).mean()) < 0.05)
    True
    """

    _parameter_constraints: dict = {
        **BaseLatentTree._parameter_constraints,
        "init": [StrOptions({"random", "tensor"})],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
    }

    _fit_on_observed_leaves = False

    def __init__(
        self,
        n_hidden_states=2,
        *,
        tree=None,
        structure="nj",
        init="random",
        n_init=1,
        max_iter=500,
        tol=1e-6,
        n_jobs=None,
        random_state=None,
        verbose=0,
    ):
        super().__init__(
            n_hidden_states,
            tree=tree,
            structure=structure,
            n_jobs=n_jobs,
            random_state=random_state,
            verbose=verbose,
        )
        self.init = init
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol

    # ------------------------------------------------------------------ hooks
    def _fit_component(self, tree, moments, unseen_proba):
        rng = check_random_state(self.random_state)
        n_states = node_states(tree, moments.n_states, self.n_hidden_states)
        codes, weights = unique_rows(moments.codes, moments.sample_weight)
        best = None
        for run in range(self.n_init):
            if self.init == "tensor" and run == 0:
                from .tensor import tensor_cpts

                start = tensor_cpts(tree, moments, self.n_hidden_states, random_state=rng)
            else:
                start = random_cpts(tree, n_states, rng)
            result = fit_em(
                tree, *start, codes, weights, None, self.max_iter, self.tol, self.verbose
            )
            if self.verbose:
                print(
                    f"EM restart {run + 1}/{self.n_init}: {result[3]} iterations, "
                    f"average log-likelihood {result[2]:.6f}"
                )
            if best is None or result[2] > best[2]:
                best = result
        root_marginal, cpts, bound, n_iter, converged, _ = best
        if not converged:
            warnings.warn(
                f"EM did not converge in max_iter={self.max_iter} iterations (tol={self.tol}); "
                "increase max_iter or tol.",
                ConvergenceWarning,
                stacklevel=4,
            )
        return {
            "root_marginal": root_marginal,
            "cpts": cpts,
            "n_states": n_states,
            "unseen_proba": unseen_proba,
            "lower_bound": bound,
            "n_iter": n_iter,
            "converged": converged,
            "weight": weights.sum(),
        }

    def _component_log_abs(self, params, codes):
        ll = cpt_log_likelihood(
            self.tree_, params["root_marginal"], params["cpts"], codes, params["unseen_proba"]
        )
        return np.ones_like(ll), ll

    def _after_fit(self):
        params = [c.params for c in self.components_]
        w = np.array([p["weight"] for p in params])
        bounds = np.array([p["lower_bound"] for p in params])
        self.lower_bound_ = float(np.dot(w[w > 0], bounds[w > 0]) / w.sum())
        self.n_iter_ = max(p["n_iter"] for p in params)
        self.converged_ = all(p["converged"] for p in params)
        if self._is_supervised():
            self.root_marginal_ = [p["root_marginal"] for p in params]
            self.cpts_ = [p["cpts"] for p in params]
        else:
            self.root_marginal_ = params[0]["root_marginal"]
            self.cpts_ = params[0]["cpts"]

    # ------------------------------------------------------------------ extras
    def predict_hidden_proba(self, X):
        """Posterior ``P(h | x)`` of every hidden node given each row.

        In supervised mode the posterior mixes the classes: ``sum_c P(c | x) P(h | x, c)``.

        Returns
        -------
        ndarray of shape (n_samples, n_hidden_nodes, n_hidden_states)
            Hidden nodes in the order of ``tree_.hidden_nodes``.
        """
        check_is_fitted(self)
        codes = self._encode(self._validate_X(X, reset=False))
        tree = self.tree_
        hidden = tree.hidden_nodes
        n = codes.shape[1]
        out = np.zeros((n, len(hidden), self.n_hidden_states))
        if self._is_supervised():
            ll, _ = self._class_log_likelihoods(codes)
            post = ll + np.log(np.maximum(self.class_prior_, 1e-300))
            post = np.exp(post - post.max(axis=1, keepdims=True))
            post /= post.sum(axis=1, keepdims=True)
        else:
            post = np.ones((n, 1))
        for c, comp in enumerate(self.components_):
            p = comp.params
            marg = node_posteriors(
                tree, p["root_marginal"], p["cpts"], codes, p["unseen_proba"], hidden
            )
            for t, h in enumerate(hidden):
                out[:, t, :] += post[:, c, None] * marg[h]
        return out

    def sample(self, n_samples=1, random_state=None):
        """Draw rows from the fitted model.

        Returns
        -------
        X : ndarray of shape (n_samples, n_features)
            Values from ``categories_`` (object dtype when columns differ in type).
        y : ndarray of shape (n_samples,) or None
            Class labels in supervised mode, else ``None``.
        """
        check_is_fitted(self)
        if int(n_samples) != n_samples or n_samples < 1:
            raise ValueError(f"n_samples must be a positive integer, got {n_samples!r}.")
        n_samples = int(n_samples)
        rng = check_random_state(random_state)
        if self._is_supervised():
            labels = rng.choice(len(self.classes_), size=n_samples, p=self.class_prior_)
        else:
            labels = np.zeros(n_samples, dtype=np.int64)
        codes = np.empty((n_samples, self.tree_.n_observed), dtype=np.int64)
        for c, comp in enumerate(self.components_):
            rows = np.flatnonzero(labels == c)
            if rows.size:
                p = comp.params
                model = LatentTreeModel(self.tree_, p["n_states"], p["root_marginal"], p["cpts"])
                codes[rows] = model.sample(rows.size, random_state=rng)
        X = self._encoder.inverse_transform(codes)
        return X, (self.classes_[labels] if self._is_supervised() else None)
