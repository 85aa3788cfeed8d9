"""The tree of a discrete estimator's fit and the candidates of its selection.

:class:`StructureMixin` learns a tree over the columns with a named method (or takes the
given one), lists the structures and ``k'`` a selection compares, splits the rows for it,
and refuses a ``k'`` that the rows or the memory cannot hold.
"""

from __future__ import annotations

import numpy as np

from .._algorithms.structure import (
    chow_liu,
    grouped_chow_liu,
    hidden_chow_liu,
    learn_tree,
    learn_tree_quartets,
    mutual_information,
    spectral_distance,
)
from .._algorithms.structure.learn import DISTANCE_METHODS
from .._engine.tree import LatentTree, attach_columns
from .fits import TABLE_MEMORY
from .selection import held_out_split

__all__ = [
    "StructureMixin",
    "AUTO_CANDIDATES",
    "AUTO_HIDDEN_STATES",
    "estimable_states",
    "most_estimable_states",
]

#: candidate structures compared by ``structure="auto"``, in the order that breaks ties
#: (held-out scores within ``TIE_TOL``)
AUTO_CANDIDATES = ("me", "clnj", "hclt", "grouped_hclt", "chow_liu", "star")
#: structures whose tree does not depend on ``k'`` (learned once per selection)
_K_FREE_STRUCTURES = ("given", "chow_liu", "hclt", "grouped_hclt", "star")
#: ``n_hidden_states="auto"``: the ``k'`` tried, grown while the held-out likelihood
#: improves, each level from the fit of the one below. Doubling from 4 to 16 (no 6 and
#: 12): two levels fewer, the same scores within their noise in less time
#: (docs/architecture.md, "Tuning constants")
AUTO_HIDDEN_STATES = (1, 2, 3, 4, 8, 16, 24, 32, 48, 64, 96, 128)
#: most entries of a table between two hidden nodes per row of data (``k'^2`` against
#: the rows): admits k' = 128 on 15,000 rows and refuses k' = 1,000 on 3,000 rows
_ENTRIES_PER_ROW = 10


def estimable_states(k, n_rows):
    """Whether ``k`` hidden states can be estimated from ``n_rows`` rows (of positive
    weight): at most one state per row, and a ``k x k`` table between hidden nodes of at
    most ``_ENTRIES_PER_ROW`` entries per row.

    >>> estimable_states(32, 103), estimable_states(32, 102)
    (True, False)
    """
    return k <= n_rows and k * k <= _ENTRIES_PER_ROW * n_rows


def estimable_rows(sample_weight):
    """The rows that :func:`estimable_states` reads: a row of weight ``w >= 1`` counts as
    ``w`` rows (frequency weights: the same as its copies), and every row of positive
    weight as at least one (weights normalised to sum to one are not fewer rows).

    >>> estimable_rows(np.array([3.0, 1.0, 0.0])), estimable_rows(np.full(4, 0.25))
    (4.0, 4.0)
    """
    w = np.asarray(sample_weight, dtype=float)
    return float(max(np.count_nonzero(w > 0), w.sum()))


def most_estimable_states(values, n_rows):
    """The largest of ``values`` that :func:`estimable_states` admits on ``n_rows``
    rows, or ``None``.

    >>> most_estimable_states(AUTO_HIDDEN_STATES, 100)
    24
    """
    return max((k for k in values if estimable_states(k, n_rows)), default=None)


class StructureMixin:
    """Tree hooks of :class:`~.base.BaseLatentTree` (parameters ``tree``, ``structure``,
    ``n_members``, ``random_state``; ``_unseen_proba`` from the estimator)."""

    #: the structures that ``structure="auto"`` compares
    _auto_structures = AUTO_CANDIDATES

    def _build_tree(self, moments, method, k):
        """A tree over the columns of ``moments`` learned with ``method`` (for ``k``
        hidden states: the spectral metric and the quartet tests read ``k``)."""
        d = len(moments.n_states)
        if method == "star" or d == 1:
            return LatentTree.star(d)
        if method == "chow_liu":
            return chow_liu(mutual_information(moments))
        if method == "hclt":
            return hidden_chow_liu(mutual_information(moments))
        if method == "grouped_hclt":
            return grouped_chow_liu(mutual_information(moments))
        if method == "quartet":  # on Dask the tests, asked one after another, read the sample
            sample = moments.sample_moments()
            return learn_tree_quartets(sample, k)[0]
        D = spectral_distance(moments, k)
        return learn_tree(
            D,
            method,
            n_samples=moments.sample_weight.sum(),
            n_jobs=self.n_jobs,
            verbose=self.verbose,
        )

    def _learn_tree(self, moments, method, k):
        """:meth:`_build_tree` on the informative columns (at least two categories); the
        others carry no information (a factor of one) and hang off the root as leaves."""
        d = len(moments.n_states)
        informative = np.flatnonzero(moments.n_states >= 2)
        if informative.size == d or informative.size < 2:
            return self._build_tree(moments, method, k)
        sub = moments.subset(informative)
        tree = self._build_tree(sub, method, k)
        return attach_columns(tree, informative, d)

    def _tree_rank(self, name, k, moments):
        """What the tree that ``name`` learns depends on in ``k'``: the selection of
        ``n_hidden_states="auto"`` learns each structure once per value. Nothing for the
        structures of mutual information; ``min(k', most categories of a column)`` for
        those of the spectral metric, whose pair terms keep ``min(k', n_i, n_j)`` singular
        values (on binary columns the metric, so the tree and the search, is the same at
        every ``k' >= 2``); ``k'`` for the others."""
        if name in _K_FREE_STRUCTURES:
            return None
        if name in DISTANCE_METHODS:
            return min(int(k), int(np.max(moments.n_states, initial=1)))
        return k

    def _resolve_tree(self, moments, structure, k):
        """The given tree (``structure="given"``) or one learned with ``structure`` from
        the data for ``k`` hidden states; rooted at its centre."""
        names = getattr(self, "feature_names_in_", None)
        names = None if names is None else [str(f) for f in names]
        d = len(moments.n_states)
        if structure == "given":
            tree = LatentTree.coerce(
                self._structure_spec()[0], d, feature_names=names, observed_leaves_only=False
            )
        else:
            tree = self._learn_tree(moments, structure, k)
        return LatentTree(tree.edges, d, feature_names=names)

    def _structure_spec(self):
        """``(given tree or None, structure method)``."""
        return self.tree, self.structure

    def _candidate_structures(self):
        """The structures a selection compares: the given tree, the named method, or the
        ``structure="auto"`` candidates."""
        given, method = self._structure_spec()
        if given is not None:
            return ["given"]
        return list(self._auto_structures) if method == "auto" else [method]

    def _selection_split(self, moments):
        """``(training moments, held-out split, unseen probabilities)`` for model
        selection (:func:`~ltm_sklearn._estimators.selection.held_out_split` on
        :meth:`LeafModel.row_values`), or ``None`` with a total weight under 10 rows."""
        split = held_out_split(
            self._leaves.row_values(moments), moments.sample_weight, self.random_state
        )
        if split is None:
            return None
        train_moments = moments.rows(split.train, split.train_weights)
        return train_moments, split, self._unseen_proba(train_moments)

    def _hidden_state_grid(self, moments):
        """The ``k'`` that ``n_hidden_states="auto"`` may try: at most the rows, and tables
        within the memory budget."""
        n_rows = estimable_rows(moments.sample_weight)
        grid = [k for k in AUTO_HIDDEN_STATES if estimable_states(k, n_rows)]
        return [k for k in grid if k == 1 or self._table_bytes(moments, k) <= TABLE_MEMORY]

    def _table_bytes(self, moments, k):
        """Bytes of the tables of a model with ``k`` hidden states (about one hidden node
        per column, a ``k x k`` table each)."""
        d = len(moments.n_states)
        return 8 * d * (k * k + k * int(np.max(moments.n_states, initial=1)))

    def _check_rows_for_states(self, moments, k):
        """Refuse more hidden states than rows (as scikit-learn's mixtures refuse more
        components than samples), and a ``k' x k'`` table between hidden nodes with more
        entries than ``_ENTRIES_PER_ROW`` times the rows (:func:`estimable_rows`: integer
        weights count as copies): neither can be estimated."""
        n_rows = estimable_rows(moments.sample_weight)
        if k > n_rows:
            raise ValueError(
                f"n_hidden_states={k} is more than the n_samples={n_rows:g} rows (a row of "
                "weight w >= 1 counts w times): a hidden state needs rows to be estimated. "
                "Use fewer hidden states, n_hidden_states='auto', or a structure without "
                "hidden nodes "
                "(structure='chow_liu')."
            )
        if k * k > _ENTRIES_PER_ROW * n_rows:
            raise ValueError(
                f"n_hidden_states={k} gives tables of {k * k} entries between hidden nodes, "
                f"more than {_ENTRIES_PER_ROW} per row of the n_samples={n_rows:g} rows: they "
                f"cannot be estimated. Use at most {int(np.sqrt(_ENTRIES_PER_ROW * n_rows))} "
                "hidden states, or n_hidden_states='auto'."
            )

    def _given_members(self):
        """The members fitted without a choice: ``n_members``, or 1 for ``"auto"`` (whose
        members are chosen, memory permitting, by :func:`~.auto_fit.select_members`)."""
        return 1 if isinstance(self.n_members, str) else int(self.n_members)

    def _check_table_memory(self, moments, k):
        """Refuse a ``k'`` (times ``n_members``) whose tables do not fit in the memory
        budget."""
        m = self._given_members()
        need = self._table_bytes(moments, k * m)
        if need > TABLE_MEMORY:
            members = f" with n_members={m}" if m > 1 else ""
            # the most states within the budget (the tables grow with k'^2: a bisection)
            low, high = 0, k
            while high - low > 1:
                mid = (low + high) // 2
                low, high = (
                    (mid, high)
                    if self._table_bytes(moments, mid * m) <= TABLE_MEMORY
                    else (low, mid)
                )
            fits = f"at most n_hidden_states={low} fits" if low else "no number of states fits"
            raise ValueError(
                f"n_hidden_states={k}{members} needs about {need / 2**30:.1f} GiB of tables for "
                f"{len(moments.n_states)} columns (the limit is {TABLE_MEMORY / 2**30:.0f} "
                f"GiB): {fits}{members}; or use n_hidden_states='auto'."
            )
