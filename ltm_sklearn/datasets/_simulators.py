"""Ground-truth latent tree models: topologies, random CPTs, sampling and exact likelihoods.

Every test, benchmark and example measures estimators against these models: they sample
data from a known latent tree and give the exact ``log P(x)`` of any row (NaN entries
marginalised), so estimation errors can be computed, not guessed."""

from __future__ import annotations

import itertools

import numpy as np
from sklearn.utils import check_random_state

from .._algorithms.gaussian import (
    GaussianTreeParameters,
    joint_moments,
    mixture_log_density,
    sample_nodes,
    standardise_hidden,
)
from .._engine.checks import check_real, check_stochastic, check_whole
from .._engine.encoding import MISSING
from .._engine.evidence import CodeEvidence, DenseEvidence
from .._engine.inference import log_likelihood, sample_states
from .._engine.tree import LatentTree


# ---------------------------------------------------------------------- topologies
def balanced_binary_tree(n_leaves):
    """Unrooted balanced binary tree: leaves are paired level by level.

    Every hidden node has degree 3 (the two top nodes are joined by an edge), so a tree
    with ``n_leaves`` leaves has ``n_leaves - 2`` hidden nodes.

    Parameters
    ----------
    n_leaves : int
        Observed variables, at least 3.

    Returns
    -------
    LatentTree
    """
    n_leaves = _check_n(n_leaves, 3, "n_leaves")
    nxt = n_leaves
    level = list(range(n_leaves))
    edges = []
    while len(level) > 3:
        new = []
        for i in range(0, len(level) - 1, 2):
            h = nxt
            nxt += 1
            edges += [(level[i], h), (level[i + 1], h)]
            new.append(h)
        if len(level) % 2:
            new.append(level[-1])
        level = new
    if len(level) == 3:
        h = nxt
        edges += [(u, h) for u in level]
    else:  # two nodes left: join them directly
        edges.append((level[0], level[1]))
    return LatentTree(edges, n_leaves)


def random_binary_tree(n_leaves, random_state=None):
    """Uniformly random unrooted binary tree (random edge insertion).

    Starts from three leaves around one hidden node and inserts each further leaf on an
    edge chosen uniformly at random, which samples unrooted binary topologies uniformly.
    Such trees often contain long chains of hidden nodes.

    Parameters
    ----------
    n_leaves : int
        Observed variables, at least 3.
    random_state : int, RandomState instance or None, default=None

    Returns
    -------
    LatentTree
    """
    n_leaves = _check_n(n_leaves, 3, "n_leaves")
    rng = check_random_state(random_state)
    nxt = n_leaves
    edges = [(0, nxt), (1, nxt), (2, nxt)]
    nxt += 1
    for leaf in range(3, n_leaves):
        u, v = edges.pop(rng.randint(len(edges)))
        h = nxt
        nxt += 1
        edges += [(u, h), (v, h), (leaf, h)]
    return LatentTree(edges, n_leaves)


def star_tree(n_leaves):
    """One hidden node joined to every observed variable (a latent class model).

    Parameters
    ----------
    n_leaves : int
        Observed variables, at least 1.

    Returns
    -------
    LatentTree
    """
    n_leaves = _check_n(n_leaves, 1, "n_leaves")
    return LatentTree.star(n_leaves)


def hmm_chain(n_steps):
    """Hidden Markov chain: hidden h_t (node n_steps + t) emits observed x_t (node t).

    Parameters
    ----------
    n_steps : int
        Time steps, at least 1: observed variables ``0 .. n_steps - 1``, hidden ones
        after them.

    Returns
    -------
    LatentTree
    """
    n_steps = _check_n(n_steps, 1, "n_steps")
    edges = [(t, n_steps + t) for t in range(n_steps)]
    edges += [(n_steps + t, n_steps + t + 1) for t in range(n_steps - 1)]
    return LatentTree(edges, n_steps)


def broad_tree(branching):
    """Broad shape of Parikh, Song & Xing (ICML 2011) Fig. 2: a hidden root with ``branching``
    hidden children,
    each with ``branching`` observed leaves (``broad_tree(2)`` has 4 leaves, ``broad_tree(3)`` 9).

    Parameters
    ----------
    branching : int
        Hidden children of the root, and observed leaves of each; at least 2.

    Returns
    -------
    LatentTree
    """
    b = _check_n(branching, 2, "branching")
    n = b * b
    root = n
    edges = []
    for i in range(b):
        h = n + 1 + i
        edges.append((root, h))
        edges += [(h, i * b + j) for j in range(b)]
    return LatentTree(edges, n)


def deep_tree(depth):
    """Deep shape of Parikh, Song & Xing (ICML 2011) Fig. 2: a chain of ``depth`` hidden nodes, each
    with one
    observed leaf and the two end nodes with two (``depth + 2`` leaves, all hidden nodes of
    degree 3).

    Parameters
    ----------
    depth : int
        Hidden nodes in the chain, at least 1.

    Returns
    -------
    LatentTree
    """
    depth = _check_n(depth, 1, "depth")
    n = depth + 2
    hid = [n + t for t in range(depth)]
    edges = [(hid[t], hid[t + 1]) for t in range(depth - 1)]
    edges += [(0, hid[0]), (n - 1, hid[-1])]
    edges += [(t + 1, hid[t]) for t in range(depth)]
    return LatentTree(edges, n)


def _check_n(n, minimum, what):
    return check_whole(n, what, minimum)


def _continuous_rows(X, n_features):
    """``X`` as floats of shape ``(n, n_features)``, NaN for a missing entry; infinite
    entries refused (a density there is no number)."""
    X = np.asarray(X, dtype=float)
    if X.ndim != 2 or X.shape[1] != n_features:
        raise ValueError(f"X must have shape (n, {n_features}), got {X.shape}.")
    if np.any(np.isinf(X)):
        raise ValueError("X holds infinite entries (NaN marks a missing one).")
    return X


# ---------------------------------------------------------------------- the model
class LatentTreeModel:
    """A discrete latent tree model with explicit CPTs.

    Parameters
    ----------
    tree : LatentTree
        Topology, rooted at the node whose marginal is ``root_marginal`` (a hidden node,
        or an observed one with as many categories).
    n_states : array-like of int, shape (n_nodes,)
    root_marginal : ndarray of shape (n_states[root],)
    cpts : dict node -> ndarray of shape (n_states[parent], n_states[node])
        Row-stochastic ``P(X_node | X_parent)``.
    """

    def __init__(self, tree, n_states, root_marginal, cpts):
        self.tree = tree
        self.n_states = np.asarray(n_states, dtype=np.int64)
        self.root_marginal = np.asarray(root_marginal, dtype=float)
        self.cpts = {int(u): np.asarray(c, dtype=float) for u, c in cpts.items()}
        if self.n_states.shape != (tree.n_nodes,) or np.any(self.n_states < 1):
            raise ValueError(
                f"n_states must hold a count >= 1 for each of the tree's {tree.n_nodes} "
                f"nodes, got shape {self.n_states.shape}."
            )
        if self.root_marginal.shape != (self.n_states[tree.root],):
            raise ValueError(
                f"root_marginal has shape {self.root_marginal.shape}; the root (node "
                f"{tree.root}) has {self.n_states[tree.root]} states."
            )
        check_stochastic(self.root_marginal, "root_marginal")
        for u in range(tree.n_nodes):
            if u == tree.root:
                continue
            if u not in self.cpts:
                raise ValueError(f"cpts has no table for node {u} (every non-root node needs one).")
            p = tree.parent[u]
            if self.cpts[u].shape != (self.n_states[p], self.n_states[u]):
                raise ValueError(
                    f"CPT of node {u} has the wrong shape {self.cpts[u].shape}; expected "
                    f"{(int(self.n_states[p]), int(self.n_states[u]))} (parent {p}'s states "
                    "x its own)."
                )
            check_stochastic(self.cpts[u], f"The CPT of node {u}")

    @property
    def n_features(self):
        return self.tree.n_observed

    @classmethod
    def random(
        cls,
        tree,
        n_hidden_states=2,
        n_observed_states=4,
        *,
        noise=0.5,
        random_state=None,
    ):
        """Random CPTs on ``tree``.

        Each CPT is ``(1 - noise) * S + noise * D`` with ``D`` rows drawn from a flat
        Dirichlet and ``S`` a structured, well-conditioned part: the identity between
        hidden nodes, and for hidden -> observed the hidden state ``h`` spread evenly over
        the observed states ``v`` with ``v % k == h``. ``noise`` tunes the conditioning:
        ``noise=1`` gives fully random CPTs (possibly near-singular), small ``noise`` gives
        strong, well-separated dependencies.

        Parameters
        ----------
        tree : LatentTree
            Rooted at a hidden node.
        n_hidden_states : int, default=2
        n_observed_states : int or array-like of int, default=4
            Categories of every observed variable (one per column if an array).
        noise : float in [0, 1], default=0.5
        random_state : int, RandomState instance or None, default=None

        Returns
        -------
        LatentTreeModel
        """
        rng = check_random_state(random_state)
        check_real(noise, "noise", 0.0, 1.0)
        k = check_whole(n_hidden_states, "n_hidden_states", 1)
        d = tree.n_observed
        counts = np.atleast_1d(n_observed_states)
        for c in counts:
            check_whole(c, "n_observed_states", 1)
        n_obs = np.broadcast_to(counts.astype(np.int64), (d,))
        if tree.root < d and n_obs[tree.root] != k:
            raise ValueError(
                f"The tree is rooted at observed node {tree.root} of {n_obs[tree.root]} "
                f"categories, but the root's marginal has n_hidden_states={k} entries: root "
                "it at a hidden node (tree.rooted_at(<hidden node>)), or give the root "
                "column n_hidden_states categories."
            )
        n_states = np.concatenate([n_obs, np.full(tree.n_nodes - d, k)])
        root_marginal = 0.5 / k + 0.5 * rng.dirichlet(np.ones(k))
        cpts = {}
        for u in range(tree.n_nodes):
            if u == tree.root:
                continue
            kp, ku = n_states[tree.parent[u]], n_states[u]
            structured = np.zeros((kp, ku))
            for h in range(kp):
                targets = [v for v in range(ku) if v % kp == h] or [h % ku]
                structured[h, targets] = 1.0 / len(targets)
            random_part = rng.dirichlet(np.ones(ku), size=kp)
            cpts[u] = (1 - noise) * structured + noise * random_part
        return cls(tree, n_states, root_marginal, cpts)

    def sample(self, n_samples, random_state=None, return_hidden=False):
        """Draw ``n_samples`` rows by ancestral sampling.

        Returns ``X`` of shape ``(n_samples, n_features)`` with integer states, and with
        ``return_hidden=True`` also the states of all nodes, ``(n_samples, n_nodes)``.

        Parameters
        ----------
        n_samples : int
        random_state : int, RandomState instance or None, default=None
        return_hidden : bool, default=False
        """
        rng = check_random_state(random_state)
        n_samples = check_whole(n_samples, "n_samples", 0)
        states = sample_states(self.tree, self.root_marginal, self.cpts, n_samples, rng)
        X = states[: self.tree.n_observed].T.copy()
        return (X, states.T.copy()) if return_hidden else X

    def _codes(self, X):
        X = np.asarray(X, dtype=float)
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise ValueError(f"X must have shape (n, {self.n_features}), got {X.shape}.")
        missing = np.isnan(X)
        filled = np.where(missing, 0, X)
        if np.any(filled != np.round(filled)):
            raise ValueError("X must hold whole-number states (or NaN for missing).")
        codes = filled.astype(np.int64).T
        if np.any((codes < 0) | (codes >= self.n_states[: self.n_features, None])):
            raise ValueError("X holds a state outside 0..n_states-1.")
        codes[missing.T] = MISSING
        return codes

    def log_likelihood(self, X):
        """Exact ``log P(x)`` per row; NaN entries are marginalised out.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Whole-number states, NaN for a missing entry.

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        evidence = CodeEvidence(self._codes(X), self.n_states[: self.n_features])
        return log_likelihood(self.tree, self.root_marginal, self.cpts, evidence)

    def all_configurations(self):
        """Every configuration of the observed variables, ``(prod(n_states), n_features)``."""
        ranges = [range(s) for s in self.n_states[: self.n_features]]
        return np.array(list(itertools.product(*ranges)), dtype=float)

    def marginal(self, variables):
        """Exact joint table of the observed ``variables`` (a tuple of column indices).

        Parameters
        ----------
        variables : sequence of int
            Distinct observed columns.

        Returns
        -------
        ndarray of shape (n_states[v] for v in variables)
            ``P(X_variables)``, summing to one.
        """
        variables = [check_whole(v, "a variable", 0) for v in variables]
        if len(set(variables)) != len(variables) or any(v >= self.n_features for v in variables):
            raise ValueError(
                f"variables must be distinct observed columns in 0..{self.n_features - 1}, "
                f"got {variables}."
            )
        shape = tuple(self.n_states[v] for v in variables)
        grid = np.array(list(itertools.product(*[range(s) for s in shape])), dtype=float)
        X = np.full((grid.shape[0], self.n_features), np.nan)
        X[:, variables] = grid
        return np.exp(self.log_likelihood(X)).reshape(shape)


def sample_sign_flip_tree(tree, n_samples, sigma=0.3, random_state=None):
    """Continuous latent tree with zero correlations (Song, Parikh & Xing (NIPS 2011) section 7.1).

    The root is a mixture of two Gaussians (``+-1`` with probability 1/2 each, standard
    deviation ``sigma``); every other node is ``N(+x_parent, sigma^2)`` or
    ``N(-x_parent, sigma^2)`` with probability 1/2. Every pair of distinct nodes is
    uncorrelated, so Gaussian tree metrics carry no signal while the dependence through
    ``|x|`` remains.

    Parameters
    ----------
    tree : LatentTree
    n_samples : int
    sigma : float, default=0.3
        Standard deviation of every node around its mean.
    random_state : int, RandomState instance or None, default=None

    Returns
    -------
    ndarray of shape (n_samples, tree.n_observed)
    """
    rng = check_random_state(random_state)
    n_samples = check_whole(n_samples, "n_samples", 0)
    sigma = check_real(sigma, "sigma", 0.0, low_open=True)
    x = np.empty((tree.n_nodes, n_samples))
    signs = np.where(rng.random_sample(n_samples) < 0.5, -1.0, 1.0)
    x[tree.root] = signs + sigma * rng.standard_normal(n_samples)
    for u in tree.preorder[1:]:
        flip = np.where(rng.random_sample(n_samples) < 0.5, -1.0, 1.0)
        x[u] = flip * x[tree.parent[u]] + sigma * rng.standard_normal(n_samples)
    return x[: tree.n_observed].T.copy()


class GaussianLeafTreeModel:
    """Discrete hidden tree, Gaussian-mixture leaves (Song, Parikh & Xing (NIPS 2011) section 6,
    model selection).

    Every hidden node takes ``n_hidden_states = d`` values; every observed leaf is a
    mixture of ``d`` Gaussians, the component picked by the state of its parent:
    ``X_j | H_parent = s ~ N(means[j, s], sigma^2)``. The hidden part has random CPTs
    (:meth:`LatentTreeModel.random`), so the continuous joint has an exact log-density.

    Parameters
    ----------
    model : LatentTreeModel
        Discrete model whose observed nodes have ``d`` states, read as the component index.
    means : ndarray of shape (n_features, d)
    sigma : float or array-like of shape (n_features,)
        Standard deviation of the components (one per column if an array).

    Examples
    --------
    >>> from ltm_sklearn.datasets import GaussianLeafTreeModel, balanced_binary_tree
    >>> m = GaussianLeafTreeModel.random(balanced_binary_tree(4), 3, random_state=0)
    >>> m.sample(2, random_state=0).shape
    (2, 4)
    """

    def __init__(self, model, means, sigma):
        self.model = model
        self.means = np.asarray(means, dtype=float)
        self.sigma = np.broadcast_to(np.asarray(sigma, dtype=float), (self.means.shape[0],))
        if not np.all(np.isfinite(self.means)):
            raise ValueError("means must be finite.")
        if not np.all(np.isfinite(self.sigma) & (self.sigma > 0)):
            raise ValueError(f"sigma must be finite and positive, got {sigma!r}.")

    @property
    def tree(self):
        return self.model.tree

    @property
    def n_features(self):
        return self.model.n_features

    @classmethod
    def random(cls, tree, n_hidden_states=2, *, sigma=0.5, spacing=2.0, random_state=None):
        """Random hidden CPTs (``noise=0.5``), the leaf state equal to its parent's, and
        component means ``spacing * s`` (centred) shifted by ``U(-0.25, 0.25) * spacing``
        per leaf and component.

        Parameters
        ----------
        tree : LatentTree
        n_hidden_states : int, default=2
            States of every hidden node, and components of every leaf.
        sigma : float, default=0.5
            Standard deviation of the components.
        spacing : float, default=2.0
            Distance between consecutive component means.
        random_state : int, RandomState instance or None, default=None

        Returns
        -------
        GaussianLeafTreeModel
        """
        rng = check_random_state(random_state)
        d = check_whole(n_hidden_states, "n_hidden_states", 1)
        spacing = check_real(spacing, "spacing", 0.0, low_open=True)
        model = LatentTreeModel.random(tree, d, d, random_state=rng)
        for j in range(tree.n_observed):  # the component is the parent's state
            model.cpts[j] = np.eye(d)
        base = spacing * (np.arange(d) - (d - 1) / 2.0)
        means = base + spacing * rng.uniform(-0.25, 0.25, size=(tree.n_observed, d))
        return cls(model, means, sigma)

    def sample(self, n_samples, random_state=None):
        """``(n_samples, n_features)`` continuous rows.

        Parameters
        ----------
        n_samples : int
        random_state : int, RandomState instance or None, default=None
        """
        rng = check_random_state(random_state)
        states = self.model.sample(n_samples, random_state=rng)
        mu = np.take_along_axis(self.means.T, states, axis=0)
        return mu + self.sigma * rng.standard_normal(mu.shape)

    def smoothed(self, bandwidths):
        """The model convolved with Gaussian kernels ``N(0, h_j^2)`` per column: what a
        kernel density estimate with these bandwidths converges to.

        Parameters
        ----------
        bandwidths : float or array-like of shape (n_features,)

        Returns
        -------
        GaussianLeafTreeModel
        """
        sigma = np.sqrt(self.sigma**2 + np.square(bandwidths))
        return GaussianLeafTreeModel(self.model, self.means, sigma)

    def log_likelihood(self, X):
        """Exact log-density of every row (the leaves' Gaussian components summed over the
        discrete hidden states); NaN entries are marginalised out.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            NaN for a missing entry.

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        X = _continuous_rows(X, self.n_features)
        offset = np.zeros(X.shape[0])
        evidence = {}
        for j in range(self.n_features):
            z = (X[:, j : j + 1] - self.means[j][None, :]) / self.sigma[j]
            logp = -0.5 * z**2 - np.log(self.sigma[j] * np.sqrt(2 * np.pi))
            miss = np.isnan(X[:, j])
            top = np.where(miss, 0.0, np.max(np.where(miss[:, None], 0.0, logp), axis=1))
            evidence[j] = np.where(miss[:, None], 1.0, np.exp(logp - top[:, None]))
            offset += top
        m = self.model
        return log_likelihood(m.tree, m.root_marginal, m.cpts, DenseEvidence(evidence)) + offset


class GaussianLatentTreeModel:
    """Linear-Gaussian latent tree, or a mixture of them (a discrete root over trees).

    Every node is linear in its parent, ``x_v = a_v x_u + b_v + e_v`` with
    ``e_v ~ N(0, s_v)`` (Choi, Tan, Anandkumar & Willsky, "Learning Latent Tree Graphical
    Models", JMLR 2011, section 2.2); hidden variables are continuous,
    of mean 0 and variance 1 (per component). With ``n_components > 1`` a discrete root
    picks which coefficients generate the row. The log-density is exact, NaN marginalised.

    Parameters
    ----------
    tree : LatentTree
    params : GaussianTreeParameters

    Examples
    --------
    >>> from ltm_sklearn.datasets import GaussianLatentTreeModel, balanced_binary_tree
    >>> m = GaussianLatentTreeModel.random(balanced_binary_tree(4), random_state=0)
    >>> m.sample(3, random_state=0).shape
    (3, 4)
    """

    def __init__(self, tree, params):
        self.tree = tree
        self.params = params

    @property
    def n_features(self):
        return self.tree.n_observed

    @classmethod
    def random(cls, tree, n_components=1, *, min_correlation=0.5, spread=3.0, random_state=None):
        """Edge correlations ``U(min_correlation, 0.95)`` with random signs, column means
        ``U(-spread, spread)`` per component, column scales ``U(0.5, 2)``; the root's
        proportions from ``Dirichlet(2, ..., 2)``.

        Parameters
        ----------
        tree : LatentTree
        n_components : int, default=1
            States of the discrete root (mixture components).
        min_correlation : float, default=0.5
            Smallest absolute edge correlation (the largest is 0.95).
        spread : float, default=3.0
            Column means are drawn from ``U(-spread, spread)``.
        random_state : int, RandomState instance or None, default=None

        Returns
        -------
        GaussianLatentTreeModel
        """
        rng = check_random_state(random_state)
        n, d = tree.n_nodes, tree.n_observed
        K = check_whole(n_components, "n_components", 1)
        check_real(min_correlation, "min_correlation", 0.0, 0.95)
        check_real(spread, "spread", 0.0)
        weight, offset, noise = np.zeros((K, n)), np.zeros((K, n)), np.ones((K, n))
        for k in range(K):
            rho = rng.uniform(min_correlation, 0.95, n) * rng.choice([-1.0, 1.0], n)
            rho[tree.root] = 0.0
            scale = np.ones(n)
            scale[:d] = rng.uniform(0.5, 2.0, d)
            mean = np.zeros(n)
            mean[:d] = rng.uniform(-spread, spread, d)
            for v in tree.preorder:
                u = tree.parent[v]
                su = scale[u] if u >= 0 else 1.0
                weight[k, v] = rho[v] * scale[v] / su
                offset[k, v] = mean[v] - (weight[k, v] * mean[u] if u >= 0 else 0.0)
                noise[k, v] = scale[v] ** 2 * (1.0 - rho[v] ** 2)
            weight[k], offset[k], noise[k] = standardise_hidden(
                tree, weight[k], offset[k], noise[k]
            )
        log_w = np.log(rng.dirichlet(np.full(K, 2.0))) if K > 1 else np.zeros(1)
        return cls(tree, GaussianTreeParameters(weight, offset, noise, log_w))

    def moments(self, component=0):
        """Mean and covariance of all nodes of one component (observed first).

        Parameters
        ----------
        component : int, default=0

        Returns
        -------
        mean : ndarray of shape (n_nodes,)
        covariance : ndarray of shape (n_nodes, n_nodes)
        """
        tree = self.params.trees_or(self.tree)[component]
        return joint_moments(tree, *self.params.component(component))

    def sample(self, n_samples, random_state=None, return_hidden=False):
        """``(n_samples, n_features)`` rows (and the hidden values, ``n_nodes`` columns,
        plus the component of each row, with ``return_hidden=True``).

        Parameters
        ----------
        n_samples : int
        random_state : int, RandomState instance or None, default=None
        return_hidden : bool, default=False
        """
        rng = check_random_state(random_state)
        n_samples = check_whole(n_samples, "n_samples", 0)
        p = self.params
        comp = rng.choice(p.n_components, size=n_samples, p=np.exp(p.log_weights))
        trees = p.trees_or(self.tree)
        x = np.zeros((n_samples, max(t.n_nodes for t in trees)))
        for k, tree in enumerate(trees):  # each component along its own tree
            rows = np.flatnonzero(comp == k)
            x[rows, : tree.n_nodes] = sample_nodes(
                tree, *p.component(k), rows.size, rng, groups=p.groups
            )
        X = x[:, : self.n_features].copy()
        return (X, x, comp) if return_hidden else X

    def log_likelihood(self, X):
        """Exact log-density of every row (a Gaussian per component, mixed over the
        components); NaN entries are marginalised out.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            NaN for a missing entry.

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        X = _continuous_rows(X, self.n_features)
        return mixture_log_density(X, self.tree, self.params)[0]
