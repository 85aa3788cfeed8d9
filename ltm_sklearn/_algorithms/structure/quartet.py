"""Quartet tests on 4th-order moments and tree building by leaf insertion (Ishteva, Park & Song
(ICML 2013)).

For four leaves ``a, b, c, d`` joined through two hidden variables ``H`` (holding ``a, b``)
and ``G`` (holding ``c, d``), the three unfoldings of the joint table ``P(a, b, c, d)``

* ``A = P_{ab;cd} = (O_b|H (.) O_a|H) P_HG (O_d|G (.) O_c|G)^T``       (Ishteva, Park & Song (ICML
2013) eq. (5))
* ``B = P_{ac;bd}`` and ``C = P_{ad;bc}``                               (eqs. (6)-(7))

have ranks ``rank(P_HG) = k`` for ``A`` and ``nnz(P_HG)`` for ``B`` and ``C``. The nuclear
norm, the convex proxy of the rank, is smallest for the unfolding that groups the true
pairs (Algorithm 1; exact when ``H`` and ``G`` are close enough to independence, Lemma 4,
and with probability ``1 - 8 exp(-m alpha^2 / 32)`` from ``m`` samples, Lemma 5). If
``G = H`` the four leaves hang off one hidden node and the three unfoldings have the same
rank: the quartet is undecidable.

:func:`build_tree_quartets` (Algorithm 2) inserts leaves one at a time: the region of the
current tree where the new leaf can go is cut at its centroid into three branches, one
quartet test with the nearest leaf of each branch picks the branch, and the search recurses
until one edge is left, which the new leaf subdivides. Each insertion needs ``O(log d)``
tests, the whole tree ``O(d log d)``. :func:`learn_tree_quartets` searches only the
edges near the inserted column nearest to the new one in the spectral tree metric (in a
deep tree the columns around the centroid are too far from the new one for its tests).
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass

import numpy as np

from ..._engine.checks import check_finite, check_moments, check_whole
from ..._engine.tree import LatentTree
from .censored import prefer_censored_fit
from .distances import spectral_distance
from .search import minimum_evolution_search

__all__ = [
    "QuartetResult",
    "quartet_test",
    "quartet_tables",
    "build_tree_quartets",
    "QuartetTreeInfo",
    "insertion_order",
    "learn_tree_quartets",
]

#: pairings of the modes (0, 1, 2, 3) by unfolding A, B, C
PAIRINGS = (((0, 1), (2, 3)), ((0, 2), (1, 3)), ((0, 3), (1, 2)))


@dataclass
class QuartetResult:
    """Outcome of one quartet test.

    Attributes
    ----------
    split : int
        0, 1 or 2: the unfolding ``A`` (pairs ``{0,1}{2,3}``), ``B`` (``{0,2}{1,3}``) or
        ``C`` (``{0,3}{1,2}``) with the smallest nuclear norm.
    nuclear_norms : ndarray of shape (3,)
        Nuclear norms of the unfoldings (with ``rank=k``: their ``(k+1)``-th singular
        values).
    margin : float
        Second smallest minus smallest of ``nuclear_norms`` (``alpha`` of Lemma 5).
    ranks : ndarray of shape (3,)
        Numerical ranks of the unfoldings at the test's tolerance.
    decidable : bool
        ``False`` when the winning unfolding does not have a strictly smaller numerical
        rank than both others (the ``G = H`` case, or a margin below the noise).
    """

    split: int
    nuclear_norms: np.ndarray
    margin: float
    ranks: np.ndarray
    decidable: bool

    @property
    def pairs(self):
        """The winning pairing of the modes, e.g. ``((0, 2), (1, 3))``."""
        return PAIRINGS[self.split]


def quartet_test(table, rank=None, tol=None):
    """Quartet test of Ishteva, Park & Song (ICML 2013) Algorithm 1 on a 4-way table.

    Parameters
    ----------
    table : ndarray of shape (n0, n1, n2, n3)
        Joint table of four variables, or a projected moment of them (each mode
        multiplied by a matrix with orthonormal rows, which keeps the rank structure).
    rank : int, default=None
        ``None``: compare nuclear norms (Algorithm 1). An integer ``k``: compare the
        ``(k+1)``-th singular values, the spectral norms of the residuals after the best
        rank-``k`` approximation. The true pairing has rank ``k``, so its residual
        vanishes in the population whatever the dependence between ``G`` and ``H``; the
        plain nuclear norm is only guaranteed under Lemma 4's near-independence and picks
        wrong pairings on exact tables of deeper trees (see the tests).
    tol : float, default=None
        Singular values above ``tol`` count towards the numerical ranks. ``None``:
        ``1e-8`` times the largest singular value (exact tables); from ``m`` samples a
        value of order ``1 / sqrt(m)`` separates signal from sampling noise.

    Returns
    -------
    QuartetResult

    Examples
    --------
    >>> import numpy as np
    >>> from ltm_sklearn.datasets import LatentTreeModel, balanced_binary_tree
    >>> model = LatentTreeModel.random(balanced_binary_tree(4), 2, 3, random_state=0)
    >>> result = quartet_test(model.marginal((0, 2, 1, 3)))
    >>> result.pairs, result.decidable
    (((0, 2), (1, 3)), True)
    """
    P = np.asarray(table, dtype=float)
    if P.ndim != 4:
        raise ValueError(f"quartet_test needs a 4-way table, got {P.ndim} modes.")
    P = check_finite(P, "quartet_test's table")
    if rank is not None:
        rank = check_whole(rank, "rank", 0)
    if tol is not None and not tol >= 0:
        raise ValueError(f"tol must be None or a number >= 0, got {tol!r}.")
    n0, n1, n2, n3 = P.shape
    unfoldings = (
        P.reshape(n0 * n1, n2 * n3),
        P.transpose(0, 2, 1, 3).reshape(n0 * n2, n1 * n3),
        P.transpose(0, 3, 1, 2).reshape(n0 * n3, n1 * n2),
    )
    svals = [np.linalg.svd(M, compute_uv=False) for M in unfoldings]
    if rank is None:
        norms = np.array([s.sum() for s in svals])
    else:
        norms = np.array([s[int(rank)] if s.size > rank else 0.0 for s in svals])
    order = np.argsort(norms, kind="stable")
    top = max(s[0] if s.size else 0.0 for s in svals)
    threshold = 1e-8 * top if tol is None else float(tol)
    ranks = np.array([int(np.sum(s > threshold)) for s in svals])
    best = int(order[0])
    others = [ranks[i] for i in range(3) if i != best]
    return QuartetResult(
        split=best,
        nuclear_norms=norms,
        margin=float(norms[order[1]] - norms[order[0]]),
        ranks=ranks,
        decidable=bool(ranks[best] < min(others)),
    )


def quartet_tables(moments, rank=None, normalize=True):
    """``table(quartet)`` returning the (projected) empirical 4-way moment of four columns.

    Parameters
    ----------
    moments : MomentEstimator
    rank : int, default=None
        Every variable with more than ``rank`` states is projected on the top ``rank``
        left singular vectors of its (normalised) pair marginals with all other columns
        (the span of ``P(X_v | hidden)`` in the population), so the moment has at most
        ``rank^4`` entries and no ``n^4`` table is formed for variables with many states.
    normalize : bool, default=True
        Scale each mode by ``P(X_v)^(-1/2)`` first (the normalisation of the spectral
        tree metric), which evens out the sampling noise across categories.

    Returns
    -------
    callable
    """
    n_states = moments.n_states
    d = len(n_states)
    if normalize:
        scale = [1.0 / np.sqrt(np.maximum(p, 1e-12)) for p in moments.singletons()]
    else:
        scale = [np.ones(int(n)) for n in n_states]
    proj = [np.diag(s) for s in scale]
    if rank is not None and np.any(n_states > rank):
        moments.all_pairs()  # one pass over the rows for every pair table
        for v in np.flatnonzero(n_states > rank):
            stacked = np.hstack(
                [scale[v][:, None] * moments.pair(v, j) * scale[j] for j in range(d) if j != v]
            )
            U = np.linalg.svd(stacked, full_matrices=False)[0]
            proj[v] = U[:, :rank].T * scale[v]

    def table(quartet):
        quartet = tuple(int(v) for v in quartet)
        return moments.projected([(quartet, tuple(proj[v] for v in quartet))])[0]

    return table


@dataclass
class QuartetTreeInfo:
    """Diagnostics of :func:`build_tree_quartets`."""

    n_tests: int  #: quartet tables evaluated
    min_margin: float  #: smallest margin of a decision (summed scores)
    n_undecidable: int  #: tests whose ranks did not separate the pairings


def build_tree_quartets(
    quartet_table,
    n_features,
    rank=None,
    n_representatives=3,
    order=None,
    tol=None,
    feature_names=None,
    distances=None,
    radius=None,
    refine=False,
):
    """Latent tree by quartet-guided leaf insertion (Ishteva, Park & Song (ICML 2013) Algorithm 2).

    Parameters
    ----------
    quartet_table : callable
        ``quartet_table((i, j, k, l))`` returns the (projected) joint table of columns
        ``i, j, k, l`` in that mode order, e.g. from :func:`quartet_tables`.
    n_features : int
    rank : int, default=None
        Passed to :func:`quartet_test`: ``None`` for plain nuclear norms (Algorithm 1),
        ``k`` for the residuals beyond rank ``k`` (exact in the population).
    n_representatives : int, default=3
        Leaves taken per branch (the nearest ones); the branch is chosen by the summed
        scores of the ``n_representatives^3`` quartets (one with ``1``, as in
        Algorithm 2). Several quartets per decision make each step robust to sampling
        noise at a constant factor more tests.
    order : sequence of int, default=None
        Insertion order of the columns (the first four form the first quartet);
        ``None`` is ``0, 1, ..., d-1``. :func:`insertion_order` grows the tree from
        the most dependent pair outwards.
    tol : float, default=None
        Rank tolerance of :func:`quartet_test` (only affects the diagnostics).
    feature_names : list of str, default=None
    distances : ndarray of shape (n_features, n_features), default=None
        A tree metric of the columns (e.g. :func:`spectral_distance`); with ``radius``,
        the search for the place of a new column starts from the edges within
        ``radius`` hops of the nearest inserted column instead of the whole tree.
    radius : int, default=None
        See ``distances`` (at least 2). ``None``: the whole tree (Algorithm 2).
    refine : bool, default=False
        After the insertions, revisit every internal edge: the quartets of the nearest
        leaves of its four subtrees ``A, B | C, E`` vote among the three ways of joining
        them (the edge as built and its two nearest-neighbour interchanges) and the
        winner is applied when its summed score is 10% below the edge's, in sweeps until
        no edge changes. A leaf placed early is tested
        only against the few leaves then inserted; the sweep re-tests every split against
        the final tree's nearest leaves.

    Returns
    -------
    tree : LatentTree
        Binary tree with the columns at the leaves, hidden nodes numbered from
        ``n_features`` on.
    info : QuartetTreeInfo
        Number of quartet tests, smallest margin, number of undecidable tests.

    Examples
    --------
    >>> from ltm_sklearn.datasets import LatentTreeModel, random_binary_tree
    >>> from ltm_sklearn.metrics import robinson_foulds
    >>> model = LatentTreeModel.random(random_binary_tree(10, random_state=0), 2, 3,
    ...                                random_state=0)
    >>> tree, info = build_tree_quartets(model.marginal, 10, rank=2)
    >>> robinson_foulds(tree, model.tree), info.n_undecidable
    (0, 0)
    """
    d = check_whole(n_features, "n_features", 1)
    n_representatives = check_whole(n_representatives, "n_representatives", 1)
    if radius is not None:
        radius = check_whole(radius, "radius", 2)
    if distances is not None:
        distances = np.asarray(distances, dtype=float)
        if distances.shape != (d, d):
            raise ValueError(
                f"distances has shape {distances.shape}; expected ({d}, {d}), one row and "
                "column a feature."
            )
    if d < 4:
        return LatentTree.star(d, feature_names=feature_names), QuartetTreeInfo(0, np.inf, 0)
    adj = {}
    counter = {"tests": 0, "min_margin": np.inf, "undecidable": 0}

    def connect(u, v):
        adj.setdefault(u, set()).add(v)
        adj.setdefault(v, set()).add(u)

    def vote(x, groups, keep=False):
        """Index of the group that pairs with ``x`` (a column, or several whose quartets
        all vote), from the summed quartet scores; ``keep``: 0 (the first group) unless
        another one's summed score is smaller by more than ``_MIN_GAIN`` of it."""
        total = np.zeros(3)
        for quartet in itertools.product(np.atleast_1d(x), *groups):
            res = quartet_test(quartet_table(quartet), rank=rank, tol=tol)
            counter["tests"] += 1
            counter["undecidable"] += not res.decidable
            total += res.nuclear_norms
        order = np.argsort(total, kind="stable")
        counter["min_margin"] = min(counter["min_margin"], total[order[1]] - total[order[0]])
        if keep and total[order[0]] >= (1.0 - _MIN_GAIN) * total[0]:
            return 0
        return int(order[0])

    order = list(range(d)) if order is None else [int(v) for v in order]
    if sorted(order) != list(range(d)):
        raise ValueError("order must be a permutation of the columns")
    # first quartet: two hidden nodes
    first = order[:4]
    split = vote(first[0], [[first[1]], [first[2]], [first[3]]])
    (a, b), (c, e) = ([first[i] for i in pair] for pair in PAIRINGS[split])
    h, g = d, d + 1
    for u in (a, b):
        connect(u, h)
    for u in (c, e):
        connect(u, g)
    connect(h, g)
    next_hidden = d + 2

    inserted = list(first)
    for x in order[4:]:
        if distances is not None and radius is not None:
            near = min(inserted, key=lambda y: (distances[x, y], y))
            region = _ball(adj, near, radius)
        else:
            region = {frozenset(edge) for edge in _edges(adj)}
        inserted.append(x)
        while len(region) > 1:
            centre, branches = _centroid(region)
            groups = [_nearest_leaves(adj, centre, v, d, n_representatives) for v in branches]
            region = _branch(region, centre, branches[vote(x, groups)])
        u, v = tuple(next(iter(region)))
        adj[u].discard(v)
        adj[v].discard(u)
        connect(u, next_hidden)
        connect(next_hidden, v)
        connect(next_hidden, x)
        next_hidden += 1

    if refine:
        _quartet_interchanges(adj, d, vote, n_representatives)
    tree = LatentTree(sorted(_edges(adj)), d, feature_names=feature_names)
    info = QuartetTreeInfo(counter["tests"], counter["min_margin"], counter["undecidable"])
    return tree, info


#: most sweeps of quartet interchanges after the insertions
_MAX_SWEEPS = 10
#: an interchange needs its pairing's summed quartet score this share below the edge's:
#: wrong interchanges gain less (measurements: docs/architecture.md, "Tuning constants")
_MIN_GAIN = 0.1


def _quartet_interchanges(adj, d, vote, n_representatives, max_sweeps=None):
    """Nearest-neighbour interchanges decided by quartet votes (see ``refine`` of
    :func:`build_tree_quartets`); edges whose four subtrees' leaves pair differently
    from the tree are swapped, in sweeps over the internal edges until none changes
    (at most ``max_sweeps``: with few rows noisy votes can flip an edge back and forth;
    at 10,000 rows and more the sweeps settle in a few)."""
    max_sweeps = _MAX_SWEEPS if max_sweeps is None else int(max_sweeps)
    moved = False
    for _ in range(max_sweeps):
        changed = False
        for u, v in sorted(_edges(adj)):
            if u < d or v < d or v not in adj[u]:
                continue
            a, b = sorted(x for x in adj[u] if x != v)
            c, e = sorted(x for x in adj[v] if x != u)
            groups = [
                _nearest_leaves(adj, u, a, d, n_representatives),
                _nearest_leaves(adj, u, b, d, n_representatives),
                _nearest_leaves(adj, v, c, d, n_representatives),
                _nearest_leaves(adj, v, e, d, n_representatives),
            ]
            # the first leaf of A against B, C, E: split 0 keeps AB|CE, 1 gives AC|BE
            # (swap b, c), 2 gives AE|BC (swap b, e); all of A's representatives vote
            split = vote(groups[0], groups[1:], keep=True)
            if split == 0:
                continue
            other = c if split == 1 else e
            for x, y, old, new in ((u, b, u, v), (v, other, v, u)):
                adj[x].discard(y)
                adj[y].discard(old)
                adj[new].add(y)
                adj[y].add(new)
            changed = moved = True
        if not changed:
            break
    return moved


def learn_tree_quartets(
    moments, rank, n_representatives=3, feature_names=None, refine=True, local_search=True
):
    """Quartet-based structure from a :class:`MomentEstimator` (what ``structure="quartet"``
    runs): normalised 4-way moments projected to ``rank``, scores beyond rank ``rank``,
    leaves inserted in :func:`insertion_order` of the spectral tree metric, each searched
    for within ``_RADIUS`` hops of its nearest inserted column in that metric.

    Searching the whole tree (Algorithm 2) first tests a new column against columns
    around the centroid of the tree, which in a deep tree are far from it: their
    dependence decays geometrically with the hops, the tests are decided by noise and a
    wrong branch is never left (on a 100-step hidden Markov chain, 5,000 rows, every
    split of the learned tree was wrong). The nearest column in the tree metric is next to
    the place of the new one, so the tests near it carry signal.

    With ``local_search=True`` the quartet tree is then the start of nearest-neighbour
    interchanges under balanced minimum evolution on the same spectral tree metric
    (:func:`~ltm_sklearn.structure.minimum_evolution_search` without regrafts), until no
    interchange shortens the tree. A split that the quartet tests got wrong is fixed by a
    local move, while the quartet tree keeps the search away from the wrong basins of the
    long, saturated distances. Balanced minimum evolution still sums those distances, and
    can prefer a wrong tree to the quartet tree: the quartet tree is kept when it fits
    the reliable distances clearly better (:func:`~.censored.prefer_censored_fit`, the
    check of ``"me"``). Measured on the k = 2, n = 4 ground truths of
    ``benchmarks/bench_quartet.py`` (5 models per cell, exact recoveries, the quartet
    tree alone -> the default): at CPT noise 0.3 and 1e4 rows balanced16 4/5 -> 5/5,
    balanced64 0/5 -> 5/5, random32 4/5 -> 5/5, random64 3/5 -> 4/5; of the 18 cells from
    1e3 to 1e5 rows and 16 to 64 leaves one loses a recovery (random32 at 1e3, 1/5 ->
    0/5). At noise 0.5 the default leads on the balanced trees (mean RF distance at 1e5
    rows 2.8 -> 1.2, 13.6 -> 3.2, 34.0 -> 8.8 for 16, 32 and 64 leaves) and trails on
    the random ones at 1e4-1e5 rows (random32 at 1e5: 3/5, mean RF 0.8, -> 2/5, 6.0).

    Parameters
    ----------
    moments : MomentEstimator
    rank : int
        ``k'``: rank of the projected moments and of the tree metric.
    n_representatives : int, default=3
        As in :func:`build_tree_quartets`.
    feature_names : list of str, default=None
    refine : bool, default=True
        The quartet interchanges of :func:`build_tree_quartets`.
    local_search : bool, default=True
        The minimum-evolution interchanges from the quartet tree.

    Returns
    -------
    tree : LatentTree
    info : QuartetTreeInfo
        Diagnostics of the quartet tests (the local search adds none).
    """
    check_moments(moments)
    rank = check_whole(rank, "rank", 1)
    if len(moments.n_states) < 4:
        star = LatentTree.star(len(moments.n_states), feature_names=feature_names)
        return star, QuartetTreeInfo(0, np.inf, 0)
    D = spectral_distance(moments, rank)
    order = insertion_order(D)
    tree, info = build_tree_quartets(
        quartet_tables(moments, rank=rank),
        len(moments.n_states),
        rank=rank,
        n_representatives=n_representatives,
        order=order,
        tol=4.0 / np.sqrt(moments.n_samples),  # rank tolerance of the diagnostics
        feature_names=feature_names,
        distances=D,
        radius=_RADIUS,
        refine=refine,
    )
    if local_search:
        searched = minimum_evolution_search(D, tree, spr_radius=0, feature_names=feature_names)
        # the search sums saturated distances too: the quartet tree stays when it fits the
        # reliable ones clearly better (as "me" checks its search against CLNJ's tree)
        tree = prefer_censored_fit(searched, tree, D, moments.n_samples)
    return tree, info


#: hops around the nearest inserted column searched for the place of a new one
_RADIUS = 6


def insertion_order(D):
    """Columns in the order of Prim's algorithm on the distance matrix ``D``, from the
    closest pair: each new column is the one nearest to those already inserted."""
    D = np.asarray(D, dtype=float)
    d = D.shape[0]
    masked = D + np.diag(np.full(d, np.inf))
    i, j = np.unravel_index(np.argmin(masked), D.shape)
    order = [int(i), int(j)]
    best = np.minimum(masked[i], masked[j])
    best[order] = np.inf
    while len(order) < d:
        v = int(np.argmin(best))
        order.append(v)
        best = np.minimum(best, masked[v])
        best[order] = np.inf
    return order


def _edges(adj):
    return {(min(u, v), max(u, v)) for u, nbrs in adj.items() for v in nbrs}


def _ball(adj, centre, radius):
    """Edges of the current tree within ``radius`` hops of ``centre``."""
    depth, queue, edges = {centre: 0}, deque([centre]), set()
    while queue:
        u = queue.popleft()
        if depth[u] >= radius:
            continue
        for v in adj[u]:
            edges.add(frozenset((u, v)))
            if v not in depth:
                depth[v] = depth[u] + 1
                queue.append(v)
    return edges


def _region_adjacency(region):
    adj = {}
    for edge in region:
        u, v = tuple(edge)
        adj.setdefault(u, []).append(v)
        adj.setdefault(v, []).append(u)
    return adj


def _centroid(region):
    """Node of the region with three branches whose largest branch is smallest."""
    adj = _region_adjacency(region)
    m = len(region)
    start = next(u for u, nb in adj.items() if len(nb) == 1)
    parent, order = {start: None}, [start]
    for u in order:  # BFS order
        for v in adj[u]:
            if v not in parent:
                parent[v] = u
                order.append(v)
    below = dict.fromkeys(adj, 0)  # edges in the subtree below each node
    for u in reversed(order):
        if parent[u] is not None:
            below[parent[u]] += below[u] + 1
    best, best_size = None, np.inf
    for u in order:
        if len(adj[u]) != 3:
            continue
        sizes = [below[v] + 1 for v in adj[u] if v != parent[u]]
        if parent[u] is not None:
            sizes.append(m - below[u])
        if max(sizes) < best_size:
            best, best_size = u, max(sizes)
    return best, sorted(adj[best])


def _branch(region, centre, first):
    """Edges of ``region`` reachable from ``centre`` through ``first``, with the edge."""
    adj = _region_adjacency(region)
    keep = {frozenset((centre, first))}
    seen, queue = {centre, first}, deque([first])
    while queue:
        u = queue.popleft()
        for v in adj[u]:
            if v not in seen:
                seen.add(v)
                keep.add(frozenset((u, v)))
                queue.append(v)
    return keep


def _nearest_leaves(adj, centre, first, n_observed, count):
    """The ``count`` closest observed leaves of the whole tree in the direction of
    ``first`` (breadth first, ties by node id)."""
    seen, queue, found = {centre, first}, deque([first]), []
    while queue and len(found) < count:
        u = queue.popleft()
        if u < n_observed:
            found.append(u)
        for v in sorted(adj[u]):
            if v not in seen:
                seen.add(v)
                queue.append(v)
    return found
