"""One entry point from a distance matrix to a tree, shared by every estimator."""

from __future__ import annotations

import numpy as np
from joblib import Parallel, delayed

from ..._engine.checks import check_real
from ..._engine.threads import single_threaded_blas
from ..._engine.tree import LatentTree
from .censored import CENSORED_CHECK_MAX, CENSORED_MAX_EXCESS, prefer_censored_fit
from .chow_liu import clnj, clrg
from .distances import check_distance_matrix
from .nj import neighbor_joining
from .rg import recursive_grouping
from .search import binary_leaf_tree, bionj, bme_length, minimum_evolution_search

__all__ = ["STRUCTURE_METHODS", "learn_tree", "sample_threshold"]

STRUCTURE_METHODS = (
    "auto",
    "chow_liu",
    "hclt",
    "grouped_hclt",
    "me",
    "nj",
    "rg",
    "clrg",
    "clnj",
    "star",
    "quartet",
)
#: methods that work from a distance matrix (``"quartet"`` needs 4-way moments)
DISTANCE_METHODS = ("me", "nj", "rg", "clrg", "clnj", "star")

#: the tests of RG/CLRG/CLNJ accept differences up to ``_THRESHOLD_SCALE / sqrt(N)``
_THRESHOLD_SCALE = 2.0


def sample_threshold(n_samples):
    """Tolerance of the distance-equality tests for ``n_samples`` rows.

    Estimated information distances have standard errors of order ``1 / sqrt(N)``; the
    tests of recursive grouping (``Phi`` constant, ``Phi = d``) and the merging of short
    hidden-observed edges accept differences up to ``2 / sqrt(N)``.

    Parameters
    ----------
    n_samples : int or float
        Rows (or the total weight) the distances were estimated from.

    Returns
    -------
    float
        ``2 / sqrt(max(n_samples, 1))``.
    """
    n_samples = check_real(n_samples, "n_samples", 0.0, low_open=True)
    return _THRESHOLD_SCALE / np.sqrt(max(n_samples, 1.0))


def learn_tree(
    D,
    method="nj",
    n_samples=None,
    feature_names=None,
    n_jobs=None,
    verbose=0,
    censored_max_excess=CENSORED_MAX_EXCESS,
):
    """Learn a latent tree from a distance matrix between observed variables.

    Parameters
    ----------
    D : ndarray of shape (d, d)
        Tree metric (for instance :func:`spectral_distance`).
    method : {"me", "nj", "rg", "clrg", "clnj", "star"}, default="nj"
        Minimum-evolution search (NNIs and SPRs under balanced minimum evolution,
        :func:`~ltm_sklearn.structure.minimum_evolution_search`, from BIONJ and from
        Chow-Liu neighbor joining; the shorter tree wins - up to 512 columns the neighbor
        joining tree competes too - and with ``n_samples`` and at most 512 columns the
        CLNJ tree replaces it when it fits the distances clearly better with the
        saturated ones censored, :func:`~ltm_sklearn.structure.censored_residual`, and
        is at most ``censored_max_excess`` longer under balanced minimum evolution),
        neighbor joining (all
        observed variables at leaves), recursive grouping, Chow-Liu recursive grouping,
        Chow-Liu neighbor joining (these three may place observed variables at internal
        nodes), or a star around one hidden node.
    n_samples : int, default=None
        Rows behind ``D``; sets the test tolerance :func:`sample_threshold` (``None``:
        exact distances, tolerance 1e-8).
    n_jobs : int, default=None
        ``"me"``: processes searching from the two starts at once (joblib).
    verbose : int, default=0
        ``"me"``: print the progress of each search.
    censored_max_excess : float or None, default=0.03
        ``"me"``: the CLNJ tree replaces the searched one only when its balanced
        minimum-evolution length is at most this share above the searched tree's
        (``None``: the censored residual alone decides). Chosen on the spectral metric
        of categorical data (``bench_structure.py``); :class:`GaussianLatentTree` passes
        ``None`` (with it, its ``structure="me"`` lost 0.05-0.47 nats per row on three
        numeric tables of ``bench_continuous.py``).
    feature_names : sequence of str, default=None
        Names of the observed variables, kept on the returned tree.

    Returns
    -------
    LatentTree

    Examples
    --------
    >>> import numpy as np
    >>> D = np.array([[0, 2, 3, 3], [2, 0, 3, 3], [3, 3, 0, 2], [3, 3, 2, 0]], float)
    >>> learn_tree(D, "clnj", n_samples=10_000).to_newick()
    '(0,1,(2,3));'
    """
    if censored_max_excess is not None and not censored_max_excess >= 0:
        raise ValueError(
            f"censored_max_excess must be a non-negative share or None, got {censored_max_excess}."
        )
    if method not in DISTANCE_METHODS:
        raise ValueError(
            f"learn_tree works from distances with one of {DISTANCE_METHODS}, got {method!r}"
            " (quartet trees need 4-way moments: see structure.quartet.learn_tree_quartets)."
        )
    # every method, the star and trees of 3 columns too, reads a valid matrix
    D = check_distance_matrix(D)
    d = D.shape[0]
    if method == "star" or d <= 3:
        return LatentTree.star(d, feature_names=feature_names)
    if method == "nj":
        return neighbor_joining(D, feature_names=feature_names)
    threshold = 1e-8 if n_samples is None else sample_threshold(n_samples)
    if method == "me":
        # the search from both starts (BIONJ; Chow-Liu neighbor joining, made binary),
        # the shorter tree under balanced minimum evolution wins
        local = clnj(D, threshold=threshold)
        # in threads: two searches of a fraction of a second each, where worker
        # processes took 7-9 s to start (n_jobs=2: a fit of 1.4-2.3 s took 10-11 s)
        found = Parallel(n_jobs=n_jobs, prefer="threads")(
            delayed(_search_from)(D, start, local, verbose) for start in ("bionj", "clnj")
        )
        if d <= CENSORED_CHECK_MAX:
            # neighbor joining's own tree is a candidate too: the search from the two
            # starts stops short of it on 6 of the 120 sweep samples of bench_structure.py
            found.append(neighbor_joining(D))
        best = min(found, key=lambda tree: bme_length(tree, D))
        if verbose:
            lengths = ", ".join(f"{bme_length(t, D):.6f}" for t in found)
            print(f"minimum evolution: lengths from BIONJ, CLNJ starts (and NJ) {lengths}")
        if n_samples is not None:
            # balanced minimum evolution sums saturated distances; the CLNJ tree (short
            # distances only) wins when it fits the data with them censored clearly better
            best = prefer_censored_fit(best, local, D, n_samples, censored_max_excess, verbose)
        return LatentTree(best.edges, d, feature_names=feature_names)
    fn = {"rg": recursive_grouping, "clrg": clrg, "clnj": clnj}[method]
    return fn(D, threshold=threshold, feature_names=feature_names)


def _search_from(D, start, clnj_tree, verbose):
    """The minimum-evolution search from one start ("bionj", or "clnj": ``clnj_tree``),
    with BLAS on one thread in this process as in a worker of ``n_jobs`` (the sums of
    several threads round differently, and a search that compares lengths can then
    take another move)."""
    with single_threaded_blas():
        tree = bionj(D) if start == "bionj" else binary_leaf_tree(clnj_tree)
        if verbose:
            print(f"minimum evolution: search from {start}")
        return minimum_evolution_search(D, tree, verbose=verbose)
