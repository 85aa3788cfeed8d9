"""LatentTreeEM: a latent tree model fitted by EM alone (the baseline of every paper)."""

from __future__ import annotations

from numbers import Integral

from .._algorithms.em import node_states, random_cpts
from .._algorithms.tensor import tensor_cpts
from .base import BaseLatentTree
from .sklearn_internals import Interval, StrOptions

__all__ = ["LatentTreeEM"]


class LatentTreeEM(BaseLatentTree):
    """Latent tree model with explicit conditional tables fitted by EM.

    Maximum a posteriori estimation on a given, learned or selected tree (the
    ``structure`` options of the shared base), with ``n_init`` restarts. Each hidden node
    has ``n_hidden_states`` states; observed nodes, including observed internal nodes,
    keep their categories. Missing entries are marginalised in the E-step.

    Parameters
    ----------
    n_hidden_states : int or "auto", default=2
        ``k'``: states of every hidden node (any positive number up to the rows, also
        more than a column's categories); ``"auto"`` as in :class:`SpectralLatentTree`.
    tree : LatentTree, edge list, Newick string or networkx graph, default=None
        ``None`` learns the tree with ``structure``.
    structure : {"auto", "chow_liu", "hclt", "grouped_hclt", "me", "nj", "rg", "clrg", "clnj", \
            "star", "quartet"}, default="auto"
        See :class:`SpectralLatentTree`.
    init : {"random", "tensor"}, default="tensor"
        Starting point of the first restart: flat-Dirichlet CPTs, or the tensor
        decomposition of the empirical moments (:func:`ltm_sklearn.tensor.tensor_cpts`,
        Anandkumar et al. (JMLR 2014)). Later restarts start at random.
    n_init : int, default=1
        Restarts of each fit from the estimator's own start (the tensor or a random
        start, ``init``; the selection's candidates too); the one with the highest final
        objective is kept. A fit that goes on from another one - a ``k'`` grown by
        ``n_hidden_states="auto"``, the final fit resuming the selection's - does not
        restart.
    categories : "auto" or list, default="auto"
        Categories of every column (see :class:`SpectralLatentTree`).
    alpha : float or "auto", default=0.5
        Dirichlet pseudo-count of EM; ``"auto"`` chooses it on held-out rows (see
        :class:`SpectralLatentTree`).
    softening : float in [0, 0.5) or "auto", default=0.0
        Data softening of EM; ``"auto"`` chooses it on held-out rows (see
        :class:`SpectralLatentTree`).
    entropy : float >= 0 or "auto", default=0.0
        Entropy regularisation of EM; ``"auto"`` chooses it on held-out rows (see
        :class:`SpectralLatentTree`).
    n_members : int or "auto", default="auto"
        EM fits from different starts averaged into one latent tree of
        ``n_members * n_hidden_states_`` states per hidden node; ``"auto"`` chooses their
        number with ``n_hidden_states="auto"`` (one fit for a given ``k'``), as in
        :class:`SpectralLatentTree`.
    min_state_rows : float >= 0 or "auto", default="auto"
        Hidden states the fitted model expects fewer training rows in are removed;
        ``"auto"`` chooses the threshold on held-out rows (see
        :class:`SpectralLatentTree`).
    max_iter : int, default=300
    tol : float, default=1e-4
        Stop when an iteration improves the objective by less than ``tol`` nats per row;
        as in :class:`SpectralLatentTree`, lower it to compare starts at their optimum
        (from random tables the default stops further below it than from the tensor
        start).
    n_jobs : int, default=None
        Threads over the blocks of rows of EM and scoring (``None``: the cores the
        process may use, at most ``OMP_NUM_THREADS``, as scikit-learn's ``KMeans`` uses
        its threads; the result does not depend on it); row chunks counted in parallel
        threads when estimating moments; the two starts of the minimum-evolution search
        (``structure="me"``, a candidate of ``"auto"``) in parallel processes.
    random_state : int, RandomState instance or None, default=None
    verbose : int, default=0
        1 prints one line per restart (and the structure choice), 2 one line per iteration.

    Attributes
    ----------
    tree_ : LatentTree
        The tree (given or learned), rooted at ``tree_.root``.
    root_marginal_ : ndarray of shape (k_root,)
    cpts_ : dict node -> ndarray of shape (k_parent, k_node)
        ``cpts_[u][a, b] = P(X_u = b | X_parent(u) = a)``; observed nodes index their
        states in the order of ``categories_``.
    lower_bound_ : float
        Objective of the kept restart (training log-likelihood per row plus the log
        prior per row), at its last E-step.
    n_iter_ : int
    converged_ : bool
    categories_ : list of list
    structure_ : str
        The structure method used (the selected one with ``structure="auto"``).
    structure_scores_ : dict
        Held-out log-likelihood per row of every candidate (``structure="auto"`` only).
    n_hidden_states_, n_hidden_states_scores_, alpha_, alpha_scores_, n_members_,
    n_members_scores_, min_state_rows_, min_state_rows_scores_, hidden_state_counts_,
    unseen_proba_, softening_, softening_scores_, entropy_, entropy_scores_
        As in :class:`SpectralLatentTree`.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` has feature names.

    References
    ----------
    A. Anandkumar, R. Ge, D. Hsu, S. M. Kakade and M. Telgarsky, "Tensor Decompositions for
    Learning Latent Variable Models", JMLR 15, 2014: the tensor power method and the
    three-view decomposition behind ``init="tensor"``.

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
    }

    def __init__(
        self,
        n_hidden_states=2,
        *,
        tree=None,
        structure="auto",
        init="tensor",
        n_init=1,
        categories="auto",
        alpha=0.5,
        softening=0.0,
        entropy=0.0,
        n_members="auto",
        min_state_rows="auto",
        max_iter=300,
        tol=1e-4,
        n_jobs=None,
        random_state=None,
        verbose=0,
    ):
        super().__init__(
            n_hidden_states,
            tree=tree,
            structure=structure,
            categories=categories,
            alpha=alpha,
            softening=softening,
            entropy=entropy,
            n_members=n_members,
            min_state_rows=min_state_rows,
            max_iter=max_iter,
            tol=tol,
            n_jobs=n_jobs,
            random_state=random_state,
            verbose=verbose,
        )
        self.init = init
        self.n_init = n_init

    def _initial_parameters(self, tree, moments, k, rng):
        if self.init == "tensor":
            return (*tensor_cpts(tree, moments, k, random_state=rng), {})
        n_states = node_states(tree, moments.n_states, k)
        return (*random_cpts(tree, n_states, rng), {})

    def _tensor_start(self, tree, moments, k, rng):
        return None  # the tensor start is this estimator's own (restarts: n_init)

    def _fit_parameters(
        self, tree, moments, k, rng, max_iter=None, tensor_start=False, early_stopping=None
    ):
        best = None
        for run in range(self.n_init):
            if run == 0:
                fitted = super()._fit_parameters(
                    tree, moments, k, rng, max_iter, tensor_start, early_stopping
                )
            else:
                n_states = node_states(tree, moments.n_states, k)
                start = random_cpts(tree, n_states, rng)
                fitted = self._polish(
                    tree, moments, k, *start, {}, rng, max_iter, early_stopping=early_stopping
                )
            if self.verbose:
                print(
                    f"EM restart {run + 1}/{self.n_init}: {fitted.n_iter} iterations, "
                    f"objective {fitted.objective:.6f} nats/row"
                )
            if best is None or fitted.objective > best.objective:
                best = fitted
        return best
