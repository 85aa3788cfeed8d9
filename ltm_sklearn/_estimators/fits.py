"""Fitted parameter sets of a latent tree, and what the fit and its selection share."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from .._algorithms.em import average_members
from .._algorithms.hidden_states import prune_states
from .._engine.tree import LatentTree

__all__ = ["FittedModel", "ModelChoice", "average_fits", "moment_states", "pruned_fit"]

#: memory the tables of one model may take (EM holds a few copies), in bytes
TABLE_MEMORY = 2**30
#: the Dirichlet pseudo-count of the estimators' ``alpha`` default, where ``alpha="auto"``
#: starts its search
DEFAULT_ALPHA = 0.5


@dataclass
class FittedModel:
    """Explicit parameters of one fitted latent tree model and how EM ended
    (``em_state``: where its EM run stopped, :class:`~ltm_sklearn._algorithms.em.EMState`,
    when a task asked for it, so that a later task goes on from there)."""

    tree: LatentTree
    root_marginal: np.ndarray
    cpts: dict
    objective: float = float("nan")
    n_iter: int = 0
    converged: bool = True
    extras: dict = field(default_factory=dict)
    em_state: object = None


@dataclass
class ModelChoice:
    """What a selection chose (:func:`~.auto_fit.select_model`), for ``fit`` to
    assign: ``k'``, the structure, the fit on the training rows (and the members), the
    held-out scores of every candidate, and the training weight of the selection;
    ``held_out`` and ``unseen_proba``: the selection's split (a
    :class:`~.selection.HeldOutSplit`) and the unseen-category probabilities of its
    training rows."""

    k: int
    structure: str
    fit: FittedModel | None = None
    train_weight: float = 0.0
    structure_scores: dict = field(default_factory=dict)
    k_scores: dict = field(default_factory=dict)
    alpha: float | None = None
    alpha_scores: dict | None = None
    softening: float | None = None
    softening_scores: dict | None = None
    entropy: float | None = None
    entropy_scores: dict | None = None
    members: list | None = None
    member_scores: dict | None = None
    member_weights: np.ndarray | None = None
    held_out: object = None
    unseen_proba: np.ndarray | None = None
    min_state_rows: float | None = None
    min_state_rows_scores: dict | None = None

    def model_of_training_rows(self):
        """The chosen model as the selection fitted it on its training rows: the fit, or
        the average of its members, without its hidden states of fewer expected rows
        than ``min_state_rows`` (when set)."""
        fitted = self.fit
        if self.members and len(self.members) > 1:
            fitted = average_fits(self.members, self.member_weights)
        if self.min_state_rows:
            fitted = pruned_fit(fitted, self.min_state_rows / self.train_weight)
        return fitted


def average_fits(fits, weights=None):
    """EM fits of one tree averaged into one model with mixture ``weights`` (default
    equal; :func:`~ltm_sklearn._algorithms.em.average_members`): the members' mean
    objective, their summed iterations, converged when all are, the first one's extras."""
    tree = fits[0].tree
    root, cpts = average_members(tree, [(f.root_marginal, f.cpts) for f in fits], weights)
    return FittedModel(
        tree,
        root,
        cpts,
        float(np.mean([f.objective for f in fits])),
        sum(f.n_iter for f in fits),
        all(f.converged for f in fits),
        fits[0].extras,
    )


def pruned_fit(fitted, min_mass):
    """``fitted`` without its hidden states of marginal probability below ``min_mass``
    (:func:`~ltm_sklearn._algorithms.hidden_states.prune_states`); the EM state is
    dropped (the tables no longer have its shapes)."""
    if min_mass <= 0 or not fitted.tree.hidden_nodes:
        return fitted
    root, cpts = prune_states(fitted.tree, fitted.root_marginal, fitted.cpts, min_mass)
    return replace(fitted, root_marginal=root, cpts=cpts, em_state=None)


def moment_states(n_states):
    """The most hidden states the moment starts are used for: pair tables of columns
    with ``n`` categories have rank at most ``n``, so moments identify no more hidden
    states than a typical column has categories (the median, at least 2)."""
    n_states = np.asarray(n_states)
    return max(2, int(np.median(n_states))) if n_states.size else 2
