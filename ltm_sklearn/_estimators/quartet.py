"""QuartetTreeLearner: structure from quartet tests (Ishteva, Park & Song (ICML 2013)),
parameters from a selectable moment or likelihood method."""

from __future__ import annotations

from numbers import Integral

from .._algorithms.hierarchical import fit_hierarchical
from .._algorithms.spectral import fit_spectral
from .._algorithms.structure import learn_tree_quartets
from .._algorithms.tensor import tensor_cpts
from .._engine.user_warnings import warn
from .base import BaseLatentTree
from .sklearn_internals import Interval, StrOptions
from .spectral import ObservableMixin

#: ``"em"`` is the former name of ``"tensor"`` (deprecated)
INIT_METHODS = ("spectral", "hierarchical", "tensor", "em")


class QuartetTreeLearner(ObservableMixin, BaseLatentTree):
    """Latent tree whose structure comes from quartet tests on 4th-order moments.

    The tree is built by inserting the columns one at a time (Ishteva, Park & Song (ICML 2013)
    Algorithm 2):
    each insertion cuts the candidate region of the current tree at its centroid and
    resolves the quartet of the new column with the nearest columns of the three
    branches by comparing the three unfoldings of their 4-way moment (Algorithm 1),
    ``O(log d)`` tests per column. The parameters on that tree start from the spectral
    algorithm (default), the hierarchical decomposition, or the tensor decomposition of
    the empirical moments (``"em"``), and are polished by EM (see
    :class:`SpectralLatentTree`).

    Parameters
    ----------
    n_hidden_states : int or "auto", default=2
        ``k'`` (``"auto"`` as in :class:`SpectralLatentTree`): hidden states of the
        parameter model, rank of the projected quartet moments, and the rank beyond which
        the quartet tests measure the unfoldings.
    init : {"spectral", "hierarchical", "tensor"}, default="spectral"
        The explicit parameters on the learned tree before EM: those of the spectral or
        the hierarchical algorithm (whose raw estimate is ``raw_estimate_``), or the
        tensor decomposition of the empirical moments (``"tensor"``, as
        :class:`LatentTreeEM`'s ``init="tensor"``; ``"em"``, its former name, is
        deprecated and will be removed in 0.3). They are the model with
        ``max_iter=0`` and the start of the automatic fit's candidates; EM at a given
        ``k'`` within what the moments identify starts from the tensor decomposition
        (see :class:`SpectralLatentTree`).
    n_representatives : int, default=3
        Nearest columns per branch in each decision; the branch wins on the summed scores
        of ``n_representatives^3`` quartets (``1`` is Algorithm 2 verbatim).
    local_search : bool, default=True
        End the structure with nearest-neighbour interchanges under balanced minimum
        evolution on the spectral tree metric, from the quartet tree (see
        :func:`~ltm_sklearn.structure.learn_tree_quartets`; the quartet tree is kept when
        it fits the reliable distances clearly better): at 1e4 rows it recovers the
        balanced 16- and 64-leaf ground truths of ``benchmarks/bench_quartet.py`` in 5 of
        5 models, against 4 and 0 of 5 for the quartet tree alone. On random trees with
        weaker edges (CPT noise 0.5) the quartet tree alone is closer at 1e4-1e5 rows
        (random32 at 1e5: mean Robinson-Foulds distance 0.8 against 6.0). ``False`` keeps
        the tree of the quartet tests.
    categories : "auto" or list, default="auto"
    alpha : float or "auto", default=0.5
        Dirichlet pseudo-count of EM; ``"auto"`` chooses it on held-out rows (see
        :class:`SpectralLatentTree`).
    softening : float in [0, 0.5) or "auto", default=0.0
        Data softening of EM's evidence (see :class:`SpectralLatentTree`).
    entropy : float >= 0 or "auto", default=0.0
        Entropy regularisation of EM (see :class:`SpectralLatentTree`).
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
    tree_ : LatentTree
    n_quartet_tests_ : int
        Quartet tables evaluated while building ``tree_``.
    min_quartet_margin_ : float
        Smallest gap between the best and second best summed score of a decision in
        building ``tree_``.
    root_marginal_, cpts_, raw_estimate_, categories_, unseen_proba_, n_hidden_states_,
    n_hidden_states_scores_, alpha_, alpha_scores_, n_members_, n_members_scores_,
    min_state_rows_, min_state_rows_scores_, hidden_state_counts_, softening_,
    softening_scores_, entropy_, entropy_scores_, lower_bound_, n_iter_, converged_,
    n_features_in_, feature_names_in_
        As in :class:`SpectralLatentTree`.
    structure_ : str
        ``"quartet"``.
    structure_scores_ : dict
        ``{"quartet": held-out log-likelihood per row}`` when an ``"auto"`` value
        (``n_hidden_states``, ``alpha``, ``softening``, ``entropy``) held rows out;
        empty otherwise (the quartet tree is the only candidate).

    Notes
    -----
    Each quartet score is the ``(k'+1)``-th singular value of an unfolding of the
    normalised, rank-``k'`` projected 4-way moment (see
    :func:`~ltm_sklearn.structure.quartet_test`): the plain nuclear norm of
    Algorithm 1 is only reliable when the two hidden variables of a quartet are nearly
    independent (Lemma 4) and already fails on exact moments of 16-leaf trees. Columns
    are inserted from the most dependent pair outwards.

    References
    ----------
    M. Ishteva, H. Park and L. Song, "Unfolding Latent Tree Structures using 4th Order
    Tensors", ICML 2013: Algorithms 1 and 2, Lemmas 4-5.

    Examples
    --------
    >>> from ltm_sklearn import QuartetTreeLearner
    >>> from ltm_sklearn.datasets import LatentTreeModel, random_binary_tree
    >>> from ltm_sklearn.metrics import robinson_foulds
    >>> truth = LatentTreeModel.random(random_binary_tree(8, random_state=0), 2, 4,
    ...                                noise=0.3, random_state=0)
    >>> est = QuartetTreeLearner(n_hidden_states=2).fit(truth.sample(20000, random_state=1))
    >>> robinson_foulds(est.tree_, truth.tree)
    0
    """

    _parameter_constraints: dict = {
        **{
            key: value
            for key, value in BaseLatentTree._parameter_constraints.items()
            if key not in ("tree", "structure")
        },
        "init": [StrOptions(set(INIT_METHODS))],
        "n_representatives": [Interval(Integral, 1, None, closed="left")],
        "local_search": ["boolean"],
    }

    def __init__(
        self,
        n_hidden_states=2,
        *,
        init="spectral",
        n_representatives=3,
        local_search=True,
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
        self.n_hidden_states = n_hidden_states
        self.init = init
        self.n_representatives = n_representatives
        self.local_search = local_search
        self.categories = categories
        self.alpha = alpha
        self.softening = softening
        self.entropy = entropy
        self.n_members = n_members
        self.min_state_rows = min_state_rows
        self.max_iter = max_iter
        self.tol = tol
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    def _structure_spec(self):
        return None, "quartet"

    def _build_tree(self, moments, method, k):
        # distributed data: the quartet tests (one fourth-order moment each, asked one
        # after another) read the uniform sample, not the whole data
        moments = moments.sample_moments()
        tree, info = learn_tree_quartets(
            moments,
            k,
            n_representatives=self.n_representatives,
            local_search=self.local_search,
        )
        self.__dict__["_quartet_last"] = (int(info.n_tests), float(info.min_margin))
        return tree

    def _learn_tree(self, moments, method, k):
        tree = super()._learn_tree(moments, method, k)
        # every tree this fit learns (its columns of one category attached), by its
        # edges: the fitted attributes describe tree_, which a selection may have learned
        # among others (one per k')
        tests = self.__dict__.setdefault("_quartet_tests", {})
        tests[_edge_key(tree)] = self.__dict__.pop("_quartet_last")
        return tree

    def _set_fitted(self, fitted):
        super()._set_fitted(fitted)
        tests = self.__dict__.pop("_quartet_tests", {})
        if _edge_key(self.tree_) in tests:
            self.n_quartet_tests_, self.min_quartet_margin_ = tests[_edge_key(self.tree_)]

    def _init_method(self):
        if self.init == "em":
            warn(
                'init="em" was renamed init="tensor" (the tensor decomposition of the '
                "empirical moments, as LatentTreeEM's); the old name will be removed in 0.3.",
                FutureWarning,
            )
            return "tensor"
        return self.init

    def _fit_raw(self, raw_tree, moments, k, unseen_proba):
        fit_raw = fit_hierarchical if self._init_method() == "hierarchical" else fit_spectral
        return fit_raw(raw_tree, moments, k, unseen_proba)

    def _initial_parameters(self, tree, moments, k, rng):
        if self._init_method() == "tensor":
            return (*tensor_cpts(tree, moments, k, random_state=rng), {})
        return super()._initial_parameters(tree, moments, k, rng)

    def _raw_extras(self, tree, moments, k):
        if self._init_method() == "tensor":
            return {}
        return super()._raw_extras(tree, moments, k)


def _edge_key(tree):
    """The edges of ``tree`` whatever their direction and order."""
    return tuple(sorted(tuple(sorted(e)) for e in tree.edges))
