"""HierarchicalTensorLTM: the hierarchical tensor decomposition of Song, Ishteva, Parikh, Xing &
Park (ICML 2013) as an estimator."""

from __future__ import annotations

from .._algorithms.hierarchical import LINKERS, fit_hierarchical
from .base import BaseLatentTree
from .sklearn_internals import StrOptions
from .spectral import ObservableMixin

__all__ = ["HierarchicalTensorLTM"]


class HierarchicalTensorLTM(ObservableMixin, BaseLatentTree):
    """Latent tree model by hierarchical low-rank tensor decomposition (Song, Ishteva, Parikh, Xing
    & Park (ICML 2013)).

    The joint table of the observed variables is decomposed recursively along the edges
    of the tree (Algorithm 1). With the ``"optimal"`` linker every edge uses the rank-``k'``
    minimiser ``M*`` of the Frobenius error of its unfolding (eq. (6)), computed on the
    sparse empirical unfolding through small QR-type factorisations (section 5.2); when the
    true number of hidden states exceeds ``n_hidden_states`` this is more accurate than
    the spectral algorithm. With the ``"inverse"`` linker (Theorem 3) it is a spectral
    algorithm of Parikh, Song & Xing (ICML 2011)'s family; with ``k' = k`` both linkers reproduce
    the joint
    table exactly from exact moments, as :class:`SpectralLatentTree` does.

    As in :class:`SpectralLatentTree`, the decomposition is the raw estimate
    (``raw_estimate_``, :meth:`raw_log_abs`); a three-view tensor decomposition of its
    marginals at every hidden node (Anandkumar, Ge, Hsu, Kakade & Telgarsky, JMLR 15,
    2014) gives explicit tables on the simplex (the model with ``max_iter=0``); EM
    polishes a moment start chosen as there, and ``score_samples`` is the exact
    log-likelihood of that normalised model.

    Parameters
    ----------
    n_hidden_states : int or "auto", default=2
        ``k'``: rank of every linker (number of states of the hidden variables);
        ``"auto"`` as in :class:`SpectralLatentTree`.
    linker : {"optimal", "inverse"}, default="optimal"
        ``"optimal"``: eq. (6), the best rank-``k'`` linker for each edge's unfolding;
        ``"inverse"``: ``(A^T P B)^-1`` on the top-``k'`` singular subspace of the linker
        pair (Theorem 3 and eq. (4)), the linker of :class:`SpectralLatentTree` (whose
        ``ref`` leaves may lie anywhere outside a subtree, here only in the factor
        being split).
    tree : LatentTree, edge list, Newick string or networkx graph, default=None
        The latent tree; ``None`` learns it with ``structure``.
    structure : {"auto", "chow_liu", "hclt", "grouped_hclt", "me", "nj", "rg", "clrg", "clnj", \
            "star", "quartet"}, default="auto"
        Structure learning when ``tree=None`` (see :class:`SpectralLatentTree`).
    categories : "auto" or list, default="auto"
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
        As in :class:`SpectralLatentTree`.
    n_jobs : int, default=None
    random_state : int, RandomState instance or None, default=None
    verbose : int, default=0

    Attributes
    ----------
    tree_, root_marginal_, cpts_, raw_estimate_, categories_, unseen_proba_, structure_,
    structure_scores_, n_hidden_states_, n_hidden_states_scores_, alpha_, alpha_scores_,
    n_members_, n_members_scores_, min_state_rows_, min_state_rows_scores_,
    hidden_state_counts_, softening_, softening_scores_, entropy_, entropy_scores_,
    lower_bound_, n_iter_, converged_, n_features_in_, feature_names_in_
        As in :class:`SpectralLatentTree`.

    Notes
    -----
    Rows with missing entries are left out of the unfoldings that fit ``M*`` (the pair
    and triple moments use every row); NaN entries are marginalised at scoring time.

    References
    ----------
    L. Song, M. Ishteva, A. Parikh, E. Xing and H. Park, "Hierarchical Tensor Decomposition
    of Latent Tree Graphical Models", ICML 2013: Algorithm 1, Theorem 3, eqs. (5)-(6) and
    section 5.2.

    Examples
    --------
    >>> from ltm_sklearn import HierarchicalTensorLTM
    >>> from ltm_sklearn.datasets import LatentTreeModel, random_binary_tree
    >>> # 4 hidden states in the truth, 2 in the model (misspecified)
    >>> truth = LatentTreeModel.random(random_binary_tree(6, random_state=0), 4, 4,
    ...                                noise=1.0, random_state=0)
    >>> X = truth.sample(20000, random_state=1)
    >>> est = HierarchicalTensorLTM(n_hidden_states=2, tree=truth.tree).fit(X)
    >>> X_test = truth.sample(1000, random_state=2)
    >>> gap = truth.log_likelihood(X_test).mean() - est.score(X_test)
    >>> bool(0 < gap < 0.05)
    True
    """

    _parameter_constraints: dict = {
        **BaseLatentTree._parameter_constraints,
        "linker": [StrOptions(set(LINKERS))],
    }

    def __init__(
        self,
        n_hidden_states=2,
        *,
        linker="optimal",
        tree=None,
        structure="auto",
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
        self.linker = linker

    def _fit_raw(self, raw_tree, moments, k, unseen_proba):
        return fit_hierarchical(raw_tree, moments, k, unseen_proba, linker=self.linker)
