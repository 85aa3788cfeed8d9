"""Expectation-maximisation for latent tree models with explicit CPTs.

The baseline of Parikh, Song & Xing (ICML 2011) section 8 and Song, Ishteva, Parikh, Xing & Park
(ICML 2013) section 7, and the polishing step of
every moment-based estimator: maximum a posteriori estimation by EM on a fixed tree. One
E-step is an upward and a downward pass (:func:`~ltm_sklearn._engine.inference.expected_counts`)
giving, for every edge ``(p, u)``, the posterior of ``(x_p, x_u)`` given each row; the
M-step adds the pseudo-count ``alpha`` of a symmetric Dirichlet prior to the expected
counts and renormalises. Identical rows are merged (with summed weights) before the
iterations.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import block_diag
from scipy.special import logsumexp
from sklearn.utils import check_random_state

from .._engine.evidence import CodeEvidence
from .._engine.inference import (
    StackedTables,
    expected_counts,
    expected_counts_stacked,
    stacked_tables,
)
from .._engine.row_keys import holdout_weights, row_hash

__all__ = [
    "m_step",
    "log_prior",
    "pseudo_counts",
    "fit_em",
    "EMState",
    "minibatch_em",
    "random_cpts",
    "node_states",
    "average_members",
    "can_average_members",
    "mixture_weights",
    "unique_rows",
    "polish",
    "EarlyStopping",
]


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


def can_average_members(tree):
    """Whether :func:`average_members` can merge fits of ``tree``: rooted at a hidden node
    with every column at a leaf (a column at an internal node would cut the member index)."""
    return tree.root >= tree.n_observed and all(tree.degree(u) == 1 for u in tree.observed_nodes)


def average_members(tree, members, weights=None):
    """The mixture of several parameter sets of one tree, as a single latent tree.

    Member ``m`` owns the hidden states ``m k', ..., (m + 1) k' - 1`` of every hidden
    node: the root marginal is the members' marginals side by side, each times its
    weight (equal weights by default), a table between hidden nodes is block-diagonal
    (a member's states lead only to its own) and a column's table stacks the members'
    rows. The mixture's density is therefore ``sum_m w_m p_m(x)`` exactly, and everything
    that reads a latent tree (likelihoods with missing entries, conditionals, posteriors,
    sampling) reads the mixture.

    Parameters
    ----------
    tree : LatentTree
        Rooted at a hidden node, every observed node a leaf (the member index must pass
        through every hidden node).
    members : list of (root_marginal, cpts)
        Parameters of ``tree`` with the same number of states at every node.
    weights : array-like of shape (n_members,), default=None
        The members' mixture weights (summing to one); ``None``: equal.

    Returns
    -------
    root_marginal, cpts

    Examples
    --------
    >>> import numpy as np
    >>> from ltm_sklearn import LatentTree
    >>> tree = LatentTree([(0, 2), (1, 2)], 2)
    >>> a = (np.array([0.5, 0.5]), {0: np.eye(2), 1: np.eye(2)})
    >>> b = (np.array([1.0, 0.0]), {0: np.full((2, 2), 0.5), 1: np.full((2, 2), 0.5)})
    >>> root, cpts = average_members(tree, [a, b])
    >>> root, cpts[0].shape
    (array([0.25, 0.25, 0.5 , 0.  ]), (4, 2))
    """
    if not can_average_members(tree):
        raise ValueError(
            "Members can be averaged only on a tree rooted at a hidden node with every "
            "column at a leaf."
        )
    m = len(members)
    weights = np.full(m, 1.0 / m) if weights is None else np.asarray(weights, dtype=float)
    if weights.shape != (m,) or np.any(weights < 0) or not np.isclose(weights.sum(), 1.0):
        raise ValueError(f"weights must be {m} non-negative numbers summing to 1, got {weights}.")
    root = np.concatenate([w * np.asarray(r, dtype=float) for w, (r, _) in zip(weights, members)])
    cpts = {}
    for u in members[0][1]:
        tables = [np.asarray(c[u], dtype=float) for _, c in members]
        cpts[u] = block_diag(*tables) if tree.is_hidden(u) else np.vstack(tables)
    return root, cpts


def mixture_weights(log_likelihoods, sample_weight=None, max_iter=200, tol=1e-10):
    """Mixture weights of fixed components by EM: the weights ``w`` maximising
    ``sum_i s_i log sum_m w_m p_m(x_i)`` given ``log_likelihoods[m, i] = log p_m(x_i)``
    (rows weighted by ``sample_weight``). The objective is concave in ``w``; EM's update
    ``w_m <- mean_i s_i P(m | x_i)`` never lowers it.

    Parameters
    ----------
    log_likelihoods : ndarray of shape (n_components, n_rows)
    sample_weight : ndarray of shape (n_rows,), default=None
    max_iter : int, default=200
    tol : float, default=1e-10
        Stop when no weight moves by more than ``tol``.

    Returns
    -------
    ndarray of shape (n_components,), summing to one.
    """
    lls = np.asarray(log_likelihoods, dtype=float)
    s = np.ones(lls.shape[1]) if sample_weight is None else np.asarray(sample_weight, float)
    s = s / s.sum()
    w = np.full(len(lls), 1.0 / len(lls))
    for _ in range(max_iter):
        with np.errstate(divide="ignore"):
            log_post = np.log(w)[:, None] + lls
        log_post -= logsumexp(log_post, axis=0)
        new = np.exp(log_post) @ s
        new /= new.sum()
        moved = np.max(np.abs(new - w))
        w = new
        if moved <= tol:
            break
    return w


def pseudo_counts(tree, alpha, root_marginal, cpts):
    """Pseudo-count of one entry of every table under the Dirichlet prior of ``alpha``.

    The table of an observed node gets ``alpha`` per entry (additive smoothing of its
    categories, as in ``CategoricalNB``). The states of a hidden node are exchangeable
    labels, so the prior on a distribution over them should not grow with their number:
    it gets the total ``2 * alpha`` spread over its ``k'`` states (``alpha * 2 / k'`` per
    entry; ``alpha`` per entry at ``k' <= 2``), a Dirichlet of the same strength whatever
    ``k'`` - measured on the density benchmark's valid splits, a per-entry pseudo-count
    that does not shrink with ``k'`` smooths a 64-state table away (nltcs, hidden
    Chow-Liu tree: valid -6.07 at 0.5 per entry, -5.94 with the total fixed).

    Returns
    -------
    root_alpha : float
    alphas : dict node -> float
    """

    def entry(u, k):
        return float(alpha) if u < tree.n_observed else float(alpha) * min(1.0, 2.0 / k)

    return entry(tree.root, len(root_marginal)), {u: entry(u, c.shape[1]) for u, c in cpts.items()}


def _split(alpha, keys):
    """``(root pseudo-count, {node: pseudo-count})`` from a float or such a pair."""
    if isinstance(alpha, tuple):
        return alpha
    return float(alpha), dict.fromkeys(keys, float(alpha))


def _by_shape(tables):
    """The tables of a dict grouped by shape: ``[(keys, stacked array), ...]``, so that
    an operation on every table is one NumPy call per shape (a tree has a few shapes
    and up to hundreds of tables)."""
    groups = {}
    for u, t in tables.items():
        groups.setdefault(np.shape(t), []).append(u)
    return [(keys, np.stack([tables[u] for u in keys])) for keys in groups.values()]


def _unstack(groups, out):
    """The dict of tables of :func:`_by_shape`'s ``groups`` with stacked values ``out``."""
    return {u: t for (keys, _), o in zip(groups, out) for u, t in zip(keys, o)}


def _normalise_rows(c):
    """Rows of ``c`` (the last axis) divided by their sums; a row of zeros uniform."""
    s = c.sum(axis=-1, keepdims=True)
    return np.where(s > 0, c / np.where(s > 0, s, 1.0), 1.0 / c.shape[-1])


def m_step(root_counts, edge_counts, alpha=0.0, entropy=None):
    """MAP tables from expected counts: add the pseudo-count ``alpha`` (a symmetric
    Dirichlet(``alpha + 1``) prior on every row) and renormalise.

    ``alpha`` is one pseudo-count for every entry, or a pair ``(root pseudo-count,
    {node: pseudo-count})`` (:func:`pseudo_counts`). ``alpha = 0`` is maximum likelihood;
    a count of exactly zero then stays a probability of zero.

    ``entropy``: ``(root weight, {node: weight per row of its table})``, the weights of
    the rows' entropies added to the objective (:func:`entropy_rows`; entropy-regularised
    EM, see :func:`fit_em`); ``None`` for none.
    """
    root_alpha, alphas = _split(alpha, edge_counts)
    groups = _by_shape(edge_counts)
    keys = [k for k, _ in groups]
    stacked_entropy = None
    if entropy is not None:
        stacked_entropy = (entropy[0], _stack_values(keys, entropy[1]))
    root, out = _m_step_stacks(
        root_counts, [c for _, c in groups], root_alpha, _stack_values(keys, alphas),
        stacked_entropy,
    )  # fmt: skip
    return root, _unstack(groups, out)


def _stack_values(groups, values):
    """``values`` (dict node -> float or array) stacked per group of nodes."""
    return [np.array([values[u] for u in nodes], dtype=float) for nodes in groups]


def _m_step_stacks(root_counts, counts, root_alpha, alphas, entropy=None):
    """:func:`m_step` on counts stacked in groups: ``counts[g]`` of shape ``(n_g, k_p,
    k)``, ``alphas[g]`` of shape ``(n_g,)``, ``entropy`` ``None`` or ``(root weight,
    [row weights (n_g, k_p) per group])``. Returns the root marginal and the tables
    stacked as ``counts``."""
    root = root_counts + root_alpha
    stacked = [c + a[:, None, None] for c, a in zip(counts, alphas)]
    if entropy is None:
        root = root / root.sum() if root.sum() > 0 else np.full(root.shape, 1.0 / root.size)
        return root, [_normalise_rows(c) for c in stacked]
    root_weight, weights = entropy
    return entropy_rows(root, root_weight), [entropy_rows(c, w) for c, w in zip(stacked, weights)]


def entropy_weights(tree, marginals, strength):
    """The weights of :func:`m_step`'s ``entropy`` for the regulariser ``strength *
    complete_entropy`` at parameters whose nodes have the ``marginals`` of
    :func:`node_marginals`: ``strength`` for the root's row, and ``strength * P(x_pa(u)
    = j)`` for row ``j`` of node ``u``'s table (the parents' marginals held at their
    current values, as the M-step of Liu & Van den Broeck (NeurIPS 2021) holds a node's
    context probability)."""
    return strength, {u: strength * marginals[tree.parent[u]] for u in marginals if u != tree.root}


def node_marginals(tree, root_marginal, cpts):
    """``P(x_u)`` of every node under the model: ``{node: marginal}`` by one pass from
    the root."""
    out = {tree.root: np.asarray(root_marginal, dtype=float)}
    for u in tree.preorder:
        if u != tree.root:
            out[u] = out[tree.parent[u]] @ cpts[u]
    return out


def complete_entropy(tree, root_marginal, cpts, marginals=None):
    """Entropy (nats) of the model's complete data, every column and hidden variable:
    ``H(x_root) + sum_u sum_j P(x_pa(u) = j) H(x_u | x_pa(u) = j)`` - the entropy that
    Liu & Van den Broeck, "Tractable Regularization of Probabilistic Circuits" (NeurIPS
    2021) regularise for a circuit with its hidden variables made explicit
    (their deterministic form of a non-deterministic circuit). ``marginals``: those of
    :func:`node_marginals`, when known."""
    if marginals is None:
        marginals = node_marginals(tree, root_marginal, cpts)

    def h(p):
        p = np.asarray(p, dtype=float)
        return -np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0), axis=-1)

    total = float(h(marginals[tree.root]))
    for u, table in cpts.items():
        total += float(marginals[tree.parent[u]] @ h(table))
    return total


def entropy_rows(counts, weight, n_newton=30):
    """Rows ``theta`` of the simplex maximising ``sum_c counts_c log theta_c + weight *
    H(theta)`` (``H`` the entropy in nats; ``counts >= 0``, ``weight >= 0`` per row): the
    M-step of entropy-regularised EM (Liu & Van den Broeck, NeurIPS 2021).

    The objective is strictly concave on the simplex; at its maximum ``counts_c =
    theta_c (mu + weight log theta_c)`` for one ``mu`` per row, with ``mu = sum_c counts_c
    + weight H(theta)``. For a given ``mu`` each ``u_c = log theta_c`` is the root of the
    convex decreasing ``counts_c e^-u - weight u - mu`` (Newton's method converges from
    any start); ``mu`` is found by safeguarded Newton steps within ``[sum counts, sum
    counts + weight log n]``, where ``sum_c theta_c = 1``. ``weight = 0`` is the plain
    M-step ``counts / sum counts``.

    Parameters
    ----------
    counts : ndarray of shape (..., n)
    weight : ndarray of shape (...) or float
    n_newton : int, default=30
        Newton steps on ``mu`` (each with a few on ``u``); the rows sum to one to
        rounding and are renormalised.

    Returns
    -------
    ndarray of the shape of ``counts``
    """
    counts = np.asarray(counts, dtype=float)
    weight = np.broadcast_to(np.asarray(weight, dtype=float), counts.shape[:-1])[..., None]
    plain = _normalise_rows(counts)
    if not np.any(weight > 0):
        return plain
    n = counts.shape[-1]
    total = counts.sum(axis=-1, keepdims=True)
    low, high = total.copy(), total + weight * np.log(n)
    mu = total + weight * np.log(n) / 2
    beta = np.maximum(weight, 1e-300)
    u = np.log(np.maximum(plain, 1e-12))
    for _ in range(n_newton):
        for _ in range(4):  # u_c(mu): Newton on the convex decreasing residual
            e = np.where(counts > 0, counts * np.exp(-np.clip(u, -700.0, 700.0)), 0.0)
            u = np.clip(u + (e - beta * u - mu) / (e + beta), -700.0, 1.0)
        theta = np.exp(u)
        excess = theta.sum(axis=-1, keepdims=True) - 1.0  # decreasing in mu
        low = np.where(excess > 0, mu, low)
        high = np.where(excess > 0, high, mu)
        e = np.where(counts > 0, counts * np.exp(-u), 0.0)
        slope = -(theta / (e + beta)).sum(axis=-1, keepdims=True)
        step = mu - excess / slope
        inside = (step > low) & (step < high)
        mu = np.where(inside, step, (low + high) / 2)
        if np.max(np.abs(excess)) < 1e-12:
            break
    out = _normalise_rows(np.exp(u))
    return np.where(weight > 0, out, plain)


def log_prior(root_marginal, cpts, alpha):
    """``alpha * sum log theta`` over every table entry: the log-density (up to a
    constant) of the Dirichlet prior that :func:`m_step` maximises against (``alpha`` a
    float or a pair as in :func:`m_step`)."""
    root_alpha, alphas = _split(alpha, cpts)
    groups = _by_shape(cpts)
    keys = [k for k, _ in groups]
    return _log_prior_stacks(
        root_marginal, [t for _, t in groups], root_alpha, _stack_values(keys, alphas)
    )


def _log_prior_stacks(root_marginal, tables, root_alpha, alphas):
    """:func:`log_prior` of tables stacked in groups (``alphas[g]`` the pseudo-count of
    each table of ``tables[g]``); a table of pseudo-count 0 adds nothing, even with
    entries of 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        total = root_alpha * np.log(root_marginal).sum() if root_alpha else 0.0
        for t, a in zip(tables, alphas):
            some = a != 0
            if some.all():
                total += float(a @ np.log(t).sum(axis=(1, 2)))
            elif some.any():
                total += float(a[some] @ np.log(t[some]).sum(axis=(1, 2)))
    return float(total)


#: growth of the over-relaxation step after an accepted step (adaptive over-relaxed EM)
_STEP_GROWTH = 1.3
#: largest over-relaxation step
_MAX_STEP = 100.0


def _relax(p, q, step):
    """Rows of ``p * (q / p) ** step``, renormalised: the log-space over-relaxed step
    from ``p`` through the EM update ``q`` (``step = 1`` is ``q``)."""
    if step == 1.0:
        return q
    lp = np.log(np.maximum(p, 1e-300))
    lr = lp + step * (np.log(np.maximum(q, 1e-300)) - lp)
    r = np.exp(lr - lr.max(axis=-1, keepdims=True))
    return r / r.sum(axis=-1, keepdims=True)


def _relax_stacks(tables, updates, step):
    """:func:`_relax` of every stack of ``tables`` through the stacks ``updates``."""
    if step == 1.0:
        return updates
    return [_relax(p, q, step) for p, q in zip(tables, updates)]


class EarlyStopping:
    """Stop EM on a held-out score instead of the training objective alone.

    ``score(root_marginal, cpts)`` (the mean log-likelihood of held-out rows, say) is read
    every ``every`` accepted steps; EM stops after ``patience`` readings in a row that do
    not improve the best one by more than ``tol``, and returns the parameters of the best
    reading. This is the stopping rule of the hidden Chow-Liu tree circuits of Liu & Van
    den Broeck ("Tractable Regularization of Probabilistic Circuits", NeurIPS 2021):
    training stops after three drops of the validation likelihood.

    One object serves one EM run at a time: :func:`fit_em` calls :meth:`reset` first.
    After the run ``best_score`` and ``best_iter`` describe the kept parameters.

    Parameters
    ----------
    score : callable
        ``score(root_marginal, cpts) -> float``, higher is better.
    every : int, default=5
        Accepted steps between two readings.
    patience : int, default=3
        Readings in a row without improvement that stop EM.
    tol : float, default=0.0
        Least improvement of the held-out score that counts.
    keep_start : bool, default=True
        Whether the start itself (the reading before the first step) may be the best.
        ``False`` compares runs that go on from one common fit with different settings
        (a prior, say) by where each one leads: otherwise every run whose first readings
        do not improve on the start returns the start, and the settings tie.
    """

    def __init__(self, score, every=5, patience=3, tol=0.0, keep_start=True):
        if every < 1 or patience < 1:
            raise ValueError(f"every and patience must be >= 1, got {every}, {patience}.")
        self.score = score
        self.every = int(every)
        self.patience = int(patience)
        self.tol = float(tol)
        self.keep_start = bool(keep_start)
        self.reset()

    def reset(self):
        self.best_score = -np.inf
        self.best_iter = 0
        self.best = None
        self.n_readings = 0
        self._stale = 0

    def snapshot(self):
        """The readings so far, for :meth:`restore` (an EM run going on: :class:`EMState`)."""
        return (self.best_score, self.best_iter, self.best, self.n_readings, self._stale)

    def restore(self, snapshot):
        self.best_score, self.best_iter, self.best, self.n_readings, self._stale = snapshot

    def update(self, n_iter, root_marginal, cpts, objective, force=False):
        """Read the score after ``n_iter`` steps (every ``every`` steps, or with
        ``force``); ``True`` when EM should stop."""
        if not force and n_iter % self.every:
            return False
        if n_iter == 0 and not self.keep_start:
            return False
        if isinstance(cpts, StackedTables):
            cpts = cpts.to_dict()
        value = float(self.score(root_marginal, cpts))
        self.n_readings += 1
        if value > self.best_score + self.tol or self.best is None:
            self.best_score, self.best_iter = value, n_iter
            self.best = (root_marginal, cpts, objective)
            self._stale = 0
            return False
        self._stale += 1
        return self._stale >= self.patience


class EMState:
    """Where an EM run of :func:`fit_em` ended, for another run to go on from exactly
    there: the last parameters (not the best held-out reading that the run returns),
    the over-relaxed step, the accepted steps and the held-out rule's readings. A run
    given an empty state fills it; given a filled one, it goes on from it as if it had
    not stopped, and fills it again. Two runs of 50 E-steps then make the run of 100."""

    def __init__(self):
        self.root_marginal = None
        self.cpts = None
        self.step = 1.0
        self.accepted = 0
        self.monitor = None

    @property
    def started(self):
        return self.root_marginal is not None


def fit_em(
    tree,
    root_marginal,
    cpts,
    evidence,
    weights,
    *,
    alpha=0.0,
    max_iter=100,
    tol=1e-4,
    accelerate=True,
    verbose=0,
    n_jobs=None,
    dtype=np.float64,
    early_stopping=None,
    entropy=0.0,
    state=None,
):
    """Iterate (over-relaxed) EM from a starting point.

    Each iteration is one E-step. With ``accelerate`` the parameters move past the EM
    update in log space, ``theta <- theta * (M(theta) / theta) ** step`` (rows
    renormalised), with a step that grows by ``1.3`` after every accepted move and falls
    back to the plain EM update (``step = 1``) as soon as a move would lower the
    objective - the adaptive over-relaxed EM of Salakhutdinov & Roweis ("Adaptive Overrelaxed
    Bound Optimization Methods", ICML 2003), which
    keeps EM's monotone objective and needed 4-7x fewer E-steps than plain EM to come
    within 1e-3 nats per row of the optimum on the ground-truth trees of the tests.

    The objective is the log-likelihood per unit of weight plus the log prior of
    :func:`m_step` divided by the total weight, plus ``entropy`` times the entropy of the
    model's complete data (:func:`complete_entropy`): the entropy regularisation of Liu &
    Van den Broeck, "Tractable Regularization of Probabilistic Circuits" (NeurIPS 2021),
    whose M-step (:func:`entropy_rows`) holds the parents' marginals at their
    current values. That M-step is not guaranteed to raise the objective, so with
    ``entropy > 0`` every step is checked, and EM stops at the first plain step that
    would lower it. The iterations stop when an accepted step
    improves it by less than ``tol`` nats per row (the convention of
    :class:`sklearn.mixture.GaussianMixture`), or after ``max_iter`` E-steps (``0`` returns
    the start unchanged).

    Parameters
    ----------
    tree : LatentTree
        Rooted; observed nodes may be internal.
    root_marginal, cpts : starting parameters (row-stochastic tables).
    evidence : CodeEvidence or DenseEvidence
        Or, with ``weights=None``, an object whose ``expected_totals(tree, root, tables)``
        returns the weighted log-likelihood sum and the expected counts of all its rows,
        and whose ``total_weight`` is their weight (the distributed E-step).
    weights : ndarray of shape (n_rows,) or None
    alpha : float, default=0.0
        Strength of the Dirichlet prior: the pseudo-count of an observed node's table
        entry, spread as :func:`pseudo_counts` says over a hidden node's states.
    max_iter : int, default=100
    tol : float, default=1e-4
    accelerate : bool, default=True
        Over-relaxed steps (``False``: plain EM).
    n_jobs : int, default=None
        Threads over blocks of rows in the E-step.
    dtype : {np.float64, np.float32}, default=np.float64
        Precision of the E-step's messages (:func:`expected_counts`).
    early_stopping : EarlyStopping, default=None
        A held-out score read along the way: EM also stops when it stops improving, and
        the parameters of its best reading are returned (``converged`` is then true).
    entropy : float, default=0.0
        Strength of the entropy regulariser (nats of objective per nat of entropy).
    state : EMState, default=None
        Filled with where the run ended; if already filled, the run goes on from it
        (its parameters replace ``root_marginal, cpts``, and the first E-step, which
        recomputes where the last run ended, is not counted in ``n_iter``).

    Returns
    -------
    root_marginal, cpts : the final parameters.
    objective : float
        Objective of the final parameters (non-decreasing over the accepted steps).
    n_iter : int
        E-steps run.
    converged : bool
    history : list of float
        The objective after every accepted step, the start first.
    """
    if max_iter == 0:
        return root_marginal, cpts, float("nan"), 0, True, []
    going_on = state is not None and state.started
    if going_on:
        root_marginal, cpts = state.root_marginal, state.cpts
    root_alpha, alphas = pseudo_counts(tree, alpha, root_marginal, cpts)
    total = float(np.sum(weights)) if weights is not None else evidence.total_weight
    # the parameters stay stacked as the passes read them (StackedTables) from here on
    start = stacked_tables(tree, root_marginal, cpts)
    alphas = start.stack_values(alphas, float)

    def e_step(root, tables):
        if weights is None:  # an E-step that sums over its own rows (distributed data)
            value, rc, ec = evidence.expected_totals(tree, root, tables.to_dict())
            counts = tables.stack_values(ec, float)
        else:
            ll, rc, counts = expected_counts_stacked(
                tree, root, tables, evidence, weights, n_jobs=n_jobs, dtype=dtype
            )
            with np.errstate(invalid="ignore"):
                value = float(weights @ np.where(weights > 0, ll, 0.0))
        value = (value + _log_prior_stacks(root, tables.shapes, root_alpha, alphas)) / total
        if not entropy:
            return value, _m_step_stacks(rc, counts, root_alpha, alphas)
        as_dict = tables.to_dict()
        marginals = node_marginals(tree, root, as_dict)
        value += entropy * complete_entropy(tree, root, as_dict, marginals)
        # the rows' weights in counts: the objective times the total weight
        root_weight, row_weights = entropy_weights(tree, marginals, entropy * total)
        row_weights = (root_weight, tables.stack_values(row_weights, float))
        return value, _m_step_stacks(rc, counts, root_alpha, alphas, row_weights)

    tables = start
    objective, update = e_step(root_marginal, tables)
    history = [objective]
    n_iter, step, converged = 1, 1.0, False
    monitor = early_stopping
    accepted, stopped = 0, False
    if going_on:
        n_iter, step, accepted = 0, state.step, state.accepted
        if monitor is not None and state.monitor is not None:
            monitor.restore(state.monitor)
    elif monitor is not None:
        monitor.reset()
        monitor.update(0, root_marginal, tables, objective, force=True)
    while n_iter < max_iter:
        cand_root = _relax(root_marginal, update[0], step)
        cand = tables.like(_relax_stacks(tables.shapes, update[1], step))
        value, cand_update = e_step(cand_root, cand)
        n_iter += 1
        if step == 1.0 and entropy and value < objective:
            converged = True  # the regularised M-step no longer raises the objective
            break
        if value >= objective or step == 1.0:  # a plain EM step never lowers it
            gain = value - objective
            root_marginal, tables, objective, update = cand_root, cand, value, cand_update
            history.append(objective)
            accepted += 1
            if verbose > 1:
                print(f"  EM iteration {n_iter}: objective {objective:.6f} nats/row")
            step = min(step * _STEP_GROWTH, _MAX_STEP) if accelerate else 1.0
            if gain < tol:
                converged = True
                break
            if monitor is not None and monitor.update(accepted, root_marginal, tables, objective):
                converged = stopped = True
                break
        else:
            step = 1.0
    cpts = tables.to_dict()
    if state is not None:
        state.root_marginal, state.cpts = root_marginal, cpts
        state.step, state.accepted = step, accepted
        state.monitor = None if monitor is None else monitor.snapshot()
    if monitor is not None:
        if not stopped and (monitor.best is None or monitor.best_iter != accepted):
            # the last ones were not read
            monitor.update(accepted, root_marginal, tables, objective, force=True)
        if monitor.best is not None:
            root_marginal, cpts, objective = monitor.best
    return root_marginal, cpts, objective, n_iter, converged, history


def minibatch_em(
    tree,
    root_marginal,
    cpts,
    evidence,
    weights,
    *,
    alpha=0.0,
    n_epochs=5,
    batch_size=1024,
    decay=0.6,
    random_state=None,
    n_jobs=None,
    dtype=np.float64,
    verbose=0,
):
    """Stepwise (mini-batch) EM: a few passes over shuffled batches of rows.

    The running expected counts move toward each batch's counts scaled to the whole
    data, ``mu <- (1 - eta_t) mu + eta_t (W / W_batch) s_batch``, and the tables are the
    M-step of ``mu`` after every batch (stepwise EM of Sato & Ishii, "On-line EM Algorithm for
    the Normalized Gaussian Network", Neural Computation, 2000, and Liang & Klein, "Online
    EM for Unsupervised Models", NAACL 2009, with step sizes ``eta_t = (t + 2) ** -decay``,
    ``0.5 < decay <= 1``). Many cheap updates per pass bring a random or moment start near
    an optimum in a few passes; full-batch EM (:func:`fit_em`) finishes from there, as the
    objective is only guaranteed not to decrease for full-batch steps.

    Parameters
    ----------
    tree, root_marginal, cpts, evidence, weights, alpha : as in :func:`fit_em`
        ``weights`` must be given (an array).
    n_epochs : int, default=5
        Passes over the rows.
    batch_size : int, default=1024
        Rows per batch.
    decay : float, default=0.6
        Exponent of the step-size schedule.
    random_state : int, RandomState instance or None
        Shuffles the rows of every pass.
    n_jobs, dtype : as in :func:`fit_em`.

    Returns
    -------
    root_marginal, cpts : the tables after the last batch.
    n_batches : int
        Updates made.
    """
    if not 0.5 < decay <= 1:
        raise ValueError(f"decay must be in (0.5, 1], got {decay}.")
    rng = check_random_state(random_state)
    alpha = pseudo_counts(tree, alpha, root_marginal, cpts)
    weights = np.asarray(weights, dtype=float)
    rows = np.flatnonzero(weights > 0)
    total = weights[rows].sum()
    mu_root, mu_edges = None, None
    step = 0
    for epoch in range(n_epochs):
        order = rng.permutation(rows)
        for start in range(0, order.size, batch_size):
            batch = np.sort(order[start : start + batch_size])
            w = weights[batch]
            _, rc, ec = expected_counts(
                tree, root_marginal, cpts, evidence.block(batch), w, n_jobs=n_jobs, dtype=dtype
            )
            scale = total / w.sum()
            eta = 1.0 if mu_root is None else (step + 2.0) ** -decay
            if mu_root is None:
                mu_root, mu_edges = rc * scale, {u: c * scale for u, c in ec.items()}
            else:
                mu_root = (1 - eta) * mu_root + eta * scale * rc
                for u, c in ec.items():
                    mu_edges[u] = (1 - eta) * mu_edges[u] + eta * scale * c
            root_marginal, cpts = m_step(mu_root, mu_edges, alpha)
            step += 1
        if verbose > 1:
            print(f"  mini-batch EM pass {epoch + 1}/{n_epochs}: {step} updates")
    return root_marginal, cpts, step


#: with more distinct rows than twice this, EM first converges on a subsample of about
#: this many
STAGE_ROWS = 20_000


def polish(
    tree,
    root_marginal,
    cpts,
    codes,
    weights,
    n_states,
    *,
    others=(),
    alpha=0.0,
    softening=0.0,
    max_iter=100,
    tol=1e-4,
    verbose=0,
    n_jobs=None,
    dtype=np.float64,
    early_stopping=None,
    entropy=0.0,
    state=None,
):
    """EM from a starting point on category codes, identical rows merged, softened by
    ``softening`` (:class:`~ltm_sklearn._engine.evidence.CodeEvidence`), with the entropy
    regulariser of strength ``entropy`` (:func:`fit_em`).

    With more than ``2 * STAGE_ROWS`` distinct rows (of positive weight), EM first runs
    to convergence on a subsample of at most about ``STAGE_ROWS`` of them (pseudo-count
    scaled by the subsample's share of the weight, so the prior weighs the same per row),
    then continues on all rows from there: the expensive full-data E-steps start near the
    optimum. The subsample is a share of every distinct row's weight, chosen by the rows'
    values (:func:`~ltm_sklearn._engine.row_keys.holdout_weights`): the same rows with
    integer weights or repeated, in any order, from memory or from the partitions of
    distributed data, give the same subsample and the same fit.

    ``others`` are further starting points ``(root_marginal, cpts)``: each is polished
    the same way and the best training objective is kept - with a subsample stage, the
    starts are compared there (on the same rows) and only the best goes on to the full
    data (the full-data steps of the others would cost as much and, measured on 16-64-leaf
    ground truths at 1e5 rows, not change the choice).

    ``early_stopping`` (:class:`EarlyStopping`) is read in the EM runs on all the rows:
    without a subsample stage every start stops on it and the best held-out score is
    kept; with one, the starts are compared on the subsample's training objective and
    the kept one stops on it over all the rows.

    ``state`` (:class:`EMState`, one start only) is passed to the EM run on all the
    rows: filled, that run goes on from it, with no subsample stage.

    Returns what :func:`fit_em` returns for the kept start, and the start's index
    (0 = ``root_marginal, cpts``; ``i`` = ``others[i - 1]``).
    """
    starts = [(root_marginal, cpts), *others]
    if max_iter == 0:  # the start is kept: no need to merge the rows
        return (*fit_em(tree, root_marginal, cpts, None, weights, max_iter=0), 0)
    if state is not None and others:
        raise ValueError("An EM state goes with one start.")
    options = dict(
        max_iter=max_iter, tol=tol, verbose=verbose, n_jobs=n_jobs, dtype=dtype, entropy=entropy
    )
    c, w = unique_rows(codes, weights)
    full = CodeEvidence(c, n_states, softening=softening)
    on_all_rows = dict(alpha=alpha, early_stopping=early_stopping, state=state, **options)
    if state is not None and state.started:
        return (*fit_em(tree, root_marginal, cpts, full, w, **on_all_rows), 0)
    if w.size <= 2 * STAGE_ROWS:
        fits, held = [], []
        for s in starts:
            fits.append(fit_em(tree, *s, full, w, **on_all_rows))
            held.append(0.0 if early_stopping is None else early_stopping.best_score)
        # the best training objective, or the best held-out score with early stopping
        best = max(range(len(fits)), key=lambda i: (held[i], fits[i][2], -i))
        if early_stopping is not None and best != len(fits) - 1:
            early_stopping.best_score, early_stopping.best_iter = held[best], fits[best][3]
        return (*fits[best], best)
    held, _, _ = holdout_weights(c, w, STAGE_ROWS / w.size)
    sub = np.flatnonzero(held > 0)
    c_sub, w_sub = c[:, sub], held[sub]
    share = w_sub.sum() / w.sum()
    evidence = CodeEvidence(c_sub, n_states, softening=softening)
    fits = [fit_em(tree, *s, evidence, w_sub, alpha=alpha * share, **options) for s in starts]
    best = max(range(len(fits)), key=lambda i: (fits[i][2], -i))
    root_marginal, cpts, objective, n_iter, _, _ = fits[best]
    if verbose:
        print(
            f"EM on a subsample of {STAGE_ROWS} rows: {n_iter} iterations, objective "
            f"{objective:.6f} nats/row (start {best} of {len(starts)})"
        )
    final = fit_em(tree, root_marginal, cpts, full, w, **on_all_rows)
    return (*final, best)


def unique_rows(codes, weights):
    """Merge identical rows: ``(codes of the distinct rows, summed weights)``; rows of
    zero weight are dropped."""
    codes = np.asarray(codes)
    keep = weights > 0
    if not keep.all():
        codes, weights = codes[:, keep], weights[keep]
    if codes.shape[1] == 0:
        return codes, weights
    shifted = codes.astype(np.int64) + 2  # codes are >= -2
    radix = shifted.max(axis=1) + 1
    if np.sum(np.log2(radix)) < 62:  # one integer key per row
        key = np.zeros(codes.shape[1], dtype=np.int64)
        for row, r in zip(shifted, radix):
            key = key * int(r) + row
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    else:
        # a 64-bit hash per row (row_hash): sorting one integer per row instead of the
        # rows' bytes; kept only when every row equals its group's first row
        key = row_hash(shifted, seed=0)
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        inverse = inverse.ravel()
        if not np.array_equal(codes[:, first[inverse]], codes):  # a collision
            rows = np.ascontiguousarray(shifted.T)
            view = rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel()
            _, first, inverse = np.unique(view, return_index=True, return_inverse=True)
    w = np.bincount(inverse.ravel(), weights=weights, minlength=first.size)
    return np.ascontiguousarray(codes[:, first]), w
