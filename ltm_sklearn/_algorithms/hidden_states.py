"""Hidden nodes with their own numbers of states: removing the states a model hardly uses.

A latent tree fitted with ``k'`` states at every hidden node (or an average of members,
``n_members * k'``) gives some nodes states that carry a few training rows' worth of
probability: EM spends them on single rows. :func:`prune_states` removes every hidden
state whose marginal probability is below a threshold and renormalises what remains,
so each hidden node keeps as many states as the rows support (more where the columns
below it are informative). The result is a latent tree like any other, with smaller
tables, whose density still sums to one.
"""

from __future__ import annotations

import numpy as np

from .em import node_marginals

__all__ = ["prune_states", "hidden_state_counts"]


def prune_states(tree, root_marginal, cpts, min_mass):
    """Remove the hidden states of marginal probability below ``min_mass``.

    For each hidden node ``u`` the kept states ``K_u`` are those with ``P(x_u = s) >=
    min_mass`` (the most probable one at least). The root marginal is restricted to
    ``K_root`` and renormalised; the table of ``u`` keeps the rows of its parent's kept
    states and its own kept columns, each row renormalised (a row whose kept columns
    carry no probability takes ``u``'s marginal over ``K_u``). The model that results is
    a normalised latent tree over the same columns: states no row reached are gone, and
    their probability goes to the others in proportion.

    Parameters
    ----------
    tree : LatentTree
        Rooted.
    root_marginal : ndarray of shape (n_root_states,)
    cpts : dict node -> ndarray of shape (n_parent_states, n_states)
    min_mass : float
        States of smaller marginal probability are removed (``0`` keeps every state).

    Returns
    -------
    root_marginal, cpts : the pruned parameters (new arrays).

    Examples
    --------
    >>> import numpy as np
    >>> from ltm_sklearn import LatentTree
    >>> tree = LatentTree([(0, 2), (1, 2)], n_observed=2)
    >>> cpts = {0: np.array([[0.9, 0.1], [0.2, 0.8], [0.5, 0.5]]),
    ...         1: np.array([[0.7, 0.3], [0.1, 0.9], [0.5, 0.5]])}
    >>> root, pruned = prune_states(tree, np.array([0.6, 0.3999, 0.0001]), cpts, 0.001)
    >>> root.round(4), pruned[0].shape
    (array([0.6001, 0.3999]), (2, 2))
    """
    marginals = node_marginals(tree, root_marginal, cpts)
    keep = {}
    for u in tree.hidden_nodes:
        p = marginals[u]
        kept = np.flatnonzero(p >= min_mass)
        keep[u] = kept if kept.size else np.array([int(np.argmax(p))])
    root = np.asarray(root_marginal, dtype=float)
    if tree.root in keep:
        root = root[keep[tree.root]]
        root = root / root.sum()
    out = {}
    for u, table in cpts.items():
        table = np.asarray(table, dtype=float)
        parent = tree.parent[u]
        if parent in keep:
            table = table[keep[parent]]
        if u in keep:
            table = table[:, keep[u]]
            sums = table.sum(axis=1, keepdims=True)
            kept_mass = marginals[u][keep[u]]
            table = np.where(
                sums > 0, table / np.where(sums > 0, sums, 1.0), kept_mass / kept_mass.sum()
            )
        out[u] = table
    return root, out


def hidden_state_counts(tree, root_marginal, cpts):
    """The number of states of each hidden node, in the order of ``tree.hidden_nodes``.

    >>> import numpy as np
    >>> from ltm_sklearn import LatentTree
    >>> tree = LatentTree([(0, 2), (1, 2)], n_observed=2)
    >>> hidden_state_counts(tree, np.full(3, 1 / 3), {0: np.full((3, 2), 0.5), 1: np.eye(3)})
    array([3])
    """
    counts = [
        len(root_marginal) if u == tree.root else np.shape(cpts[u])[1] for u in tree.hidden_nodes
    ]
    return np.asarray(counts, dtype=np.int64)
