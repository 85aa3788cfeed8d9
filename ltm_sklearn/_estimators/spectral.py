"""SpectralLatentTree: the spectral algorithm of Parikh, Song & Xing (ICML 2011) as an estimator."""

from __future__ import annotations

from sklearn.utils.validation import check_is_fitted

from .._algorithms.spectral import (
    explicit_from_representation,
    fit_spectral,
    raw_representation,
    spectral_log_abs,
)
from .base import BaseLatentTree

__all__ = ["ObservableMixin", "SpectralLatentTree"]


class ObservableMixin:
    """The raw observable representation of a moment-based estimator, for research: the
    estimator fits it with ``_fit_raw(raw_tree, moments, k, unseen_proba)`` on the tree
    with every observed node a leaf, and its start is the explicit model recovered from
    that estimate (:func:`~ltm_sklearn._algorithms.spectral.explicit_from_representation`)."""

    def _fit_raw(self, raw_tree, moments, k, unseen_proba):
        raise NotImplementedError

    def _initial_parameters(self, tree, moments, k, rng):
        return explicit_from_representation(
            tree, moments, k, self._unseen_proba(moments), self._fit_raw, rng
        )

    def _raw_extras(self, tree, moments, k):
        if not self._keeps_raw_estimate:
            return {}
        unseen = self._unseen_proba(moments)
        raw = raw_representation(tree, moments, k, unseen, self._fit_raw)
        return {} if raw is None else {"raw_estimate_": raw}

    def raw_log_abs(self, X):
        """Sign and ``log |P_hat(x)|`` of the raw observable-representation estimate.

        ``P_hat`` (Parikh, Song & Xing (ICML 2011) eq. (34), renormalised to sum to one) is what the
        moments
        give before they are turned into explicit tables; it can be negative and is *not*
        what :meth:`score_samples` returns. ``None`` when the tree has no hidden node.

        Returns
        -------
        sign : ndarray of shape (n_samples,)
        log_abs : ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        raw = getattr(self, "raw_estimate_", None)
        if raw is None:
            return None
        codes = self._encode(self._validate_X(X, reset=False))
        return spectral_log_abs(raw, codes)


class SpectralLatentTree(ObservableMixin, BaseLatentTree):
    """Latent tree model learned by the spectral algorithm of Parikh, Song & Xing (ICML 2011)
    (Algorithm 1).

    The joint distribution of the observed variables is first recovered from empirical
    pair and projected triple marginals through thin SVDs (the observable representation,
    without EM and without local optima; ``raw_estimate_``); a three-view tensor
    decomposition (Anandkumar, Ge, Hsu, Kakade & Telgarsky, "Tensor Decompositions for
    Learning Latent Variable Models", JMLR 15, 2014) of that estimate's own marginals at
    every hidden node turns it into explicit conditional tables on the probability
    simplex: the model with ``max_iter=0``. EM then polishes a moment start (moments to
    start, likelihood to finish): with ``k'`` within what the moments identify, the same
    decomposition of the empirical moments, from which EM ends higher (all 10 fits of the
    digits demo's grid search at ``k' = 2, 3``, by 0.43 nats per row in the median, in
    half the iterations); beyond, random tables. ``score_samples`` is the exact
    log-likelihood of this normalised model.

    Parameters
    ----------
    n_hidden_states : int or "auto", default=2
        ``k'``: number of states of every hidden variable. Any positive number up to the
        rows (and ``k'^2`` up to ten times the rows): where the moments support fewer (an
        edge of lower numerical rank, e.g. binary columns), the spectral estimate uses
        that rank and the extra states start as copies that EM separates; beyond a typical
        column's number of categories EM starts from random tables. ``"auto"`` chooses
        ``k'`` inside ``fit`` by held-out likelihood (``n_hidden_states_``,
        ``n_hidden_states_scores_``).
    tree : LatentTree, edge list, Newick string or networkx graph, default=None
        The latent tree. Observed columns are nodes ``0..n_features-1`` by position (the
        integer nodes of an edge list or graph), or by feature name (a Newick label or a
        graph's text node or ``label`` attribute that names a column); hidden nodes follow;
        observed variables may be internal nodes. ``None`` learns it from the data with
        ``structure``.
    structure : {"auto", "chow_liu", "hclt", "grouped_hclt", "me", "nj", "rg", "clrg", "clnj", \
            "star", "quartet"}, default="auto"
        Structure learning when ``tree=None``. ``"auto"`` fits the candidates ``"me"``,
        ``"clnj"``, ``"hclt"``, ``"grouped_hclt"``, ``"chow_liu"`` and ``"star"`` on about
        80% of the rows (at most 20,000) and keeps the one with the best log-likelihood on
        the others (at most 5,000; ``structure_scores_``; a latent structure within one
        standard error of the Chow-Liu tree wins; under 10 rows, total weight, nothing is
        held out and the first, ``"me"``, is kept). ``"chow_liu"``: the maximum-likelihood
        tree over the columns, no hidden nodes (Chow & Liu, "Approximating Discrete Probability
        Distributions with Dependence Trees", IEEE Transactions on Information Theory,
        1968). ``"hclt"``: a hidden node
        above every column, linked along the Chow-Liu tree; ``"grouped_hclt"``: hidden
        nodes above groups of the most dependent columns
        (:func:`~ltm_sklearn.structure.hidden_chow_liu`,
        :func:`~ltm_sklearn.structure.grouped_chow_liu`). On the spectral tree metric
        (Song, Parikh & Xing (NIPS 2011) eq. (12)): ``"me"`` BIONJ improved by nearest-neighbour
        interchanges
        under balanced minimum evolution
        (:func:`~ltm_sklearn.structure.minimum_evolution_search`), ``"nj"`` neighbor
        joining, recursive grouping, Chow-Liu recursive grouping or Chow-Liu neighbor
        joining (Choi, Tan, Anandkumar & Willsky, "Learning Latent Tree Graphical Models",
        JMLR 2011; the last three may place columns at internal nodes,
        test tolerance ``2 / sqrt(n_samples)``). ``"star"``: one hidden node joined to
        every column (a latent class model). ``"quartet"``: quartet tests on 4-way
        moments (Ishteva, Park & Song (ICML 2013), see :class:`QuartetTreeLearner`).
    categories : "auto" or list, default="auto"
        Categories of every column: the observed values (and the declared categories of
        pandas ``Categorical`` columns), or one list per column (``None`` entries are
        ``"auto"``), so that models fitted on parts of the data share one encoding.
    alpha : float or "auto", default=0.5
        Dirichlet pseudo-count of every table entry in EM's M-step (additive smoothing, as
        in ``CategoricalNB``; a hidden node's states share ``2 alpha``). ``"auto"``
        chooses it on the held-out rows once the model is chosen: 0.5, then halved or
        doubled while the held-out log-likelihood gains more than ``tol`` per row
        (``alpha_``, ``alpha_scores_``); it pays on sparse tables, not on the density
        benchmark (see the user guide).
    softening : float in [0, 0.5) or "auto", default=0.0
        Data softening of EM (Liu & Van den Broeck, "Tractable Regularization of
        Probabilistic Circuits", NeurIPS 2021): every observed category counts as
        ``1 - softening`` on itself and ``softening`` spread over the column's other
        categories, so EM fits the data as if each entry were flipped at that rate - a
        regulariser for few rows and many columns. ``0`` fits the data as observed. The
        model stays a normalised density of the categories as observed. ``"auto"``
        chooses it on the held-out rows once the model is chosen (after ``alpha``): none,
        then 1/4096 doubled while the held-out log-likelihood gains more than ``tol`` per
        row (``softening_``, ``softening_scores_``).
    entropy : float >= 0 or "auto", default=0.0
        Entropy regularisation of EM (Liu & Van den Broeck, NeurIPS 2021):
        EM maximises the log-likelihood per row plus ``entropy`` times the entropy of
        the model's complete data (columns and hidden variables,
        :func:`~ltm_sklearn._algorithms.em.complete_entropy`), which pulls every table
        towards uniform in proportion to how often its parent's state occurs - a
        regulariser for few rows and many columns (on 1,600 rows of jester it gained
        0.22 nats per row at 0.01; on nltcs, plants and baudio it lost, and ``"auto"``
        lost on the full training sets of jester and bnetflix; see the user guide).
        ``"auto"`` chooses it once the model is chosen (after ``softening``): EM on the
        chosen tree from the start the chosen fit grew from (or a random one) with none,
        then 1/1024 doubled while the held-out log-likelihood gains more than ``tol``
        per row; a regularised fit replaces the chosen one only where it scores above
        both (``entropy_``, ``entropy_scores_``).
    n_members : int or "auto", default="auto"
        EM fits from different starts averaged into the model (a mixture of latent
        trees on the one tree, equal weights for a number, weights fitted by EM on the
        held-out rows with ``"auto"``; stored as a latent tree whose hidden nodes have
        ``n_members * n_hidden_states_`` states, member by member; see
        :func:`~ltm_sklearn._algorithms.em.average_members`). The fits after the first start
        at random. Averaging reduces the variance of EM's local optima: on the density
        benchmark three members at ``k' = 24`` gained 0.20 nats per row on bnetflix
        (``bench_debd.md``) where a single model with twice the states overfits (see the
        user guide). ``"auto"``: with
        ``n_hidden_states="auto"``, chosen with ``k'`` on the same held-out rows - members
        added one at a time, at most 4, while the held-out log-likelihood of the average
        gains (``n_members_scores_``); with a given ``k'``, one fit. A number after a
        selection on held-out rows (``k'``, the structure or a setting ``"auto"``): the
        members are fitted there with the chosen model, each stopped on the held-out rows,
        so that ``min_state_rows="auto"`` chooses on the average it prunes, and the final
        fits go on from them on every row, on their tree (learned on the selection's
        training rows, as with ``"auto"``). Needs every column at a leaf and EM
        (``max_iter > 0``): one fit is kept otherwise, with a warning for a number; a
        tree without hidden nodes, as ``"chow_liu"``, or one hidden state has nothing to
        average and keeps one fit silently. Costs ``n_members_`` final fits (and after a
        selection, their fits on its training rows).
    min_state_rows : float >= 0 or "auto", default="auto"
        Hidden states are removed from the fitted model when it expects fewer training
        rows in them than this (their marginal probability times the total sample
        weight), and the rest renormalised
        (:func:`~ltm_sklearn._algorithms.hidden_states.prune_states`), so that each
        hidden node keeps as many states as the rows support (``hidden_state_counts_``);
        ``0`` keeps every state. ``"auto"``: with a selection inside ``fit`` (any other
        ``"auto"`` choice, or several candidate structures), chosen on its held-out
        rows once the model is chosen - none, then 0.5 rows doubled while the held-out
        log-likelihood gains more than ``tol`` per row (``min_state_rows_scores_``);
        without one, every state is kept. On the digits demo (1,257 rows; four members
        of 32 states on the benchmarks' machine) it removed the states of under half a
        row: test log-likelihood -27.30 against -27.41 nats per row, with 68% of the
        states (see the user guide).
    max_iter : int, default=300
        EM iterations that polish the moment estimate (``0``: the moment estimate).
    tol : float, default=1e-4
        EM stops when an iteration improves the training objective by less than ``tol``
        nats per row (``converged_``). Near the optimum EM gains little per iteration: on
        1e5 rows of a 16-leaf ground truth (k = 3, 5 categories) the default fit's KL
        divergence to the truth is 0.0026 nats per row against 0.0016 with ``tol=1e-7``,
        and EM from random tables stops at 0.0059 (0.0016 too with ``tol=1e-7``). To
        compare starts or estimators at their optimum, lower ``tol``.
    n_jobs : int, default=None
        Threads over the blocks of rows of EM and scoring (``None``: the cores the
        process may use, at most ``OMP_NUM_THREADS``, as scikit-learn's ``KMeans`` uses
        its threads; the result does not depend on it); row chunks counted in parallel
        threads when estimating moments; the two starts of the minimum-evolution search
        (``structure="me"``, a candidate of ``"auto"``) in parallel processes; and the
        candidate fits of the automatic choices (``"auto"`` values), which run in this
        process and up to ``n_jobs - 1`` worker processes when a batch of them is long
        enough to pay for the workers (the user guide, "Candidates side by side").
    random_state : int, RandomState instance or None, default=None
        Seeds the tensor power method's starts, random starts and the perturbation of
        copied hidden states; an integer also seeds the held-out split of the ``"auto"``
        choices (``None``: a fixed split, a function of the rows).
    verbose : int, default=0
        Print the structure choice of ``"auto"``, the progress of the tree search and of
        EM.

    Attributes
    ----------
    tree_ : LatentTree
        The tree used (given or learned), rooted at a central node.
    root_marginal_ : ndarray of shape (k_root,)
    cpts_ : dict node -> ndarray of shape (k_parent, k_node)
        ``P(X_u | X_parent(u))`` for every non-root node of ``tree_``.
    raw_estimate_ : SpectralParams
        The observable representation of every row before the explicit tables (see
        :meth:`raw_log_abs`); absent when the tree has no hidden node or ``k'`` is more
        than the moments identify (EM then starts from other tables).
    categories_ : list of list
        Categories of every column, in code order.
    unseen_proba_ : ndarray of shape (n_features,)
        Likelihood of a category never seen in training.
    structure_ : str
        The structure method used (``"given"`` with ``tree``).
    structure_scores_ : dict
        Held-out log-likelihood per row of every candidate (``structure="auto"``; with a
        given structure and ``alpha="auto"`` it holds the one entry ``"given"``).
    n_hidden_states_ : int
        ``k'`` used (the chosen one with ``n_hidden_states="auto"``).
    n_hidden_states_scores_ : dict
        Held-out log-likelihood per row of every ``k'`` tried (``"auto"`` only): of the
        best structure with hidden nodes at that ``k'`` (a tree without them, such as the
        Chow-Liu tree, scores the same at every ``k'``: see ``structure_scores_``).
    alpha_ : float
        The Dirichlet pseudo-count used: ``alpha``, or the one chosen with ``"auto"``.
    alpha_scores_ : dict
        Held-out log-likelihood per row of every pseudo-count tried (``alpha="auto"``
        only). ``alpha_`` is the last value that gained more than ``tol`` per row over
        the previous one, so a value tried after it may score higher by less than that.
    softening_ : float
        The data softening used (``softening``, or the value ``"auto"`` chose).
    softening_scores_ : dict
        Held-out log-likelihood per row of every softening tried (``softening="auto"``
        only; ``0`` is the chosen fit as it stood).
    entropy_ : float
        The entropy regularisation used (``entropy``, or the value ``"auto"`` chose).
    entropy_scores_ : dict
        Held-out log-likelihood per row of every strength tried (``entropy="auto"``
        only), and ``"chosen"``: that of the chosen fit.
    n_members_ : int
        Fits averaged into the model (``n_members`` or the number chosen by ``"auto"``;
        1 for a tree without hidden nodes or with columns at internal nodes).
    n_members_scores_ : dict
        Held-out log-likelihood per row of the average of the first ``m`` fits, for
        every ``m`` tried (``n_members="auto"`` with ``n_hidden_states="auto"`` only).
    min_state_rows_ : float
        The expected training rows a hidden state needed to stay (``min_state_rows``,
        or the value ``"auto"`` chose; ``0``: every state kept).
    min_state_rows_scores_ : dict
        Held-out log-likelihood per row of every value tried (``min_state_rows="auto"``
        with a selection only).
    hidden_state_counts_ : ndarray of shape (n_hidden_nodes,)
        The states each hidden node keeps, in the order of ``tree_.hidden_nodes``
        (``n_members_ * n_hidden_states_`` before any is removed).
    lower_bound_ : float
        Training objective per row (log-likelihood plus log prior) at the last E-step
        (the members' mean with ``n_members_ > 1``).
    n_iter_ : int
        EM iterations (summed over the members). After a selection on held-out rows, the
        iterations of the selection's fits that the final fit goes on from (on the
        selection's training rows) count too, so it can pass ``max_iter``.
    converged_ : bool
        Whether EM stopped on ``tol``; after such a selection with
        ``n_hidden_states="auto"`` also when the final fit ran its 40 iterations on
        every row from fits that stopped on the held-out rows.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` has feature names.

    References
    ----------
    A. P. Parikh, L. Song and E. P. Xing, "A Spectral Algorithm for Latent Tree Graphical
    Models", ICML 2011: Algorithm 1 and eqs. (29)-(34).

    A. Anandkumar, R. Ge, D. Hsu, S. M. Kakade and M. Telgarsky, "Tensor Decompositions for
    Learning Latent Variable Models", JMLR 15, 2014: Theorems 2.3-2.4.

    Examples
    --------
    >>> from ltm_sklearn import SpectralLatentTree
    >>> from ltm_sklearn.datasets import LatentTreeModel, balanced_binary_tree
    >>> truth = LatentTreeModel.random(balanced_binary_tree(8), n_hidden_states=2,
    ...                                n_observed_states=3, random_state=0)
    >>> X = truth.sample(20000, random_state=1)
    >>> est = SpectralLatentTree(n_hidden_states=2, tree=truth.tree).fit(X)
    >>> X_test = truth.sample(1000, random_state=2)
    >>> gap = truth.log_likelihood(X_test).mean() - est.score(X_test)
    >>> bool(abs(gap) < 0.02)
    True
    """

    def _fit_raw(self, raw_tree, moments, k, unseen_proba):
        return fit_spectral(raw_tree, moments, k, unseen_proba)
