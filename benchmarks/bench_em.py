"""EM baseline and spectral learning (Parikh, Song & Xing (ICML 2011) Fig. 2), with peers on the
same data.

1. Four topologies of Parikh, Song & Xing (ICML 2011) Fig. 2 (broad4, broad9, deep4, deep5 of
ltm_sklearn.datasets),
   n = 6 observed states, k = 2, N from 200 to 1e5, 3 random models each: median relative
   joint error on 1,000 test rows, held-out log-likelihood gap to the truth and fit time of
   the spectral algorithm (its raw observable representation), SpectralLatentTree with
   its defaults (explicit tables from that estimate, polished by EM), EM- (stops when an
   iteration gains less than 1e-2 nats per row) and EM+ (1e-4) with 5 random restarts,
   tensor-initialised EM (LatentTreeEM's defaults, one start) and a Chow-Liu tree over
   the observed variables (CPTs fitted on the learned fully observed tree), all on the
   true latent tree.
2. pgmpy's EM with the true latent structure on broad9, N = 1,000: seconds per iteration
   next to ours (bench extra).
3. A homogeneous 10-step HMM (k = 3, n = 6): hmmlearn's CategoricalHMM (one start, up to
   100 iterations, tol 1e-4) vs our spectral estimator and EM on the same rows: fit time
   and held-out gap to the true model (bench extra).

    python benchmarks/bench_em.py [--quick]

Writes benchmarks/results/bench_em.md and bench_em.png.
"""

from __future__ import annotations

import argparse

import numpy as np
from _common import (
    RESULTS,
    machine,
    markdown_table,
    plot_error_and_time,
    raw_spectral_fit,
    save,
    timed,
)

from ltm_sklearn import LatentTree, LatentTreeEM, SpectralLatentTree
from ltm_sklearn._algorithms.structure import spanning_tree_edges
from ltm_sklearn._engine.encoding import CategoricalEncoder
from ltm_sklearn._engine.moments import MomentEstimator
from ltm_sklearn.datasets import LatentTreeModel, broad_tree, deep_tree
from ltm_sklearn.metrics import relative_joint_error

TOPOLOGIES = {
    "broad4": broad_tree(2),
    "broad9": broad_tree(3),
    "deep4": deep_tree(2),
    "deep5": deep_tree(3),
}
METHODS = ["spectral", "SpectralLatentTree", "EM-", "EM+", "EM tensor", "Chow-Liu"]


def chow_liu_model(X):
    """Fully observed Chow-Liu tree (maximum mutual information) with fitted CPTs."""
    enc = CategoricalEncoder()
    codes = enc.fit_transform(X)
    mom = MomentEstimator(codes, enc.n_states_)
    d = X.shape[1]
    mi = np.zeros((d, d))
    for (i, j), P in mom.all_pairs().items():
        pi, pj = P.sum(axis=1), P.sum(axis=0)
        nz = P > 0
        mi[i, j] = mi[j, i] = np.sum(P[nz] * np.log(P[nz] / np.outer(pi, pj)[nz]))
    D = mi.max() - mi
    np.fill_diagonal(D, 0.0)
    tree = LatentTree(spanning_tree_edges(D), d, root=0)
    # EM on a tree without hidden nodes is maximum likelihood in one step
    return LatentTreeEM(tree=tree, max_iter=3, tol=1e-12).fit(X)


class _Raw:
    """The raw observable representation, scored like an estimator (a non-positive
    estimate counts as probability 1e-300)."""

    def __init__(self, score):
        self._score = score

    def score_samples(self, X):
        sign, logabs = self._score(X)
        return np.where(sign > 0, logabs, np.log(1e-300))


def fit_method(method, tree, X, seed):
    if method == "spectral":  # Parikh, Song & Xing (ICML 2011)'s algorithm itself
        return _Raw(raw_spectral_fit(X, 2, tree)[2])
    if method == "SpectralLatentTree":  # its normalised model, polished by EM
        return SpectralLatentTree(2, tree=tree, random_state=seed).fit(X)
    if method == "Chow-Liu":
        return chow_liu_model(X)
    if method == "EM tensor":
        est = LatentTreeEM(2, tree=tree, init="tensor", max_iter=1000)
    else:
        tol = 1e-2 if method == "EM-" else 1e-4
        est = LatentTreeEM(2, tree=tree, init="random", n_init=5, tol=tol, max_iter=1000)
    return est.set_params(random_state=seed).fit(X)


def figure2(sizes, n_models):
    rows, curves = [], {}
    for name, tree in TOPOLOGIES.items():
        for n in sizes:
            res = {m: {"err": [], "gap": [], "t": []} for m in METHODS}
            for seed in range(n_models):
                model = LatentTreeModel.random(tree, 2, 6, random_state=seed)
                X = model.sample(n, random_state=seed + 100)
                Xt = model.sample(1000, random_state=seed + 200)
                truth = model.log_likelihood(Xt)
                for m in METHODS:
                    est, t = timed(fit_method, m, tree, X, seed)
                    ll = est.score_samples(Xt)
                    res[m]["err"].append(np.median(relative_joint_error(truth, ll)))
                    res[m]["gap"].append(np.mean(truth - ll))
                    res[m]["t"].append(t)
            for m in METHODS:
                med = {k: float(np.median(v)) for k, v in res[m].items()}
                curves.setdefault((name, m), []).append((n, med["err"], med["t"]))
                rows.append(
                    [
                        name,
                        f"{n:,}",
                        m,
                        f"{med['err']:.3f}",
                        f"{med['gap']:+.4f}",
                        f"{med['t']:.3f}",
                    ]
                )
                print(rows[-1], flush=True)
    table = markdown_table(
        ["tree", "N", "method", "median rel. error", "held-out gap (nats)", "fit s"], rows
    )
    return table, curves


def ratio_table(curves, n):
    rows = []
    for name in TOPOLOGIES:
        get = {m: dict((c[0], c) for c in curves[(name, m)]) for m in METHODS}
        if n not in get["spectral"]:
            continue
        s, em = get["spectral"][n], get["EM+"][n]
        rows.append([name, f"{em[2] / s[2]:.0f}x", f"{s[1]:.3f}", f"{em[1]:.3f}"])
    return markdown_table(["tree", "EM+ time / spectral time", "spectral error", "EM+ error"], rows)


def pgmpy_comparison():
    try:
        from pgmpy.estimators import ExpectationMaximization
        from pgmpy.models import DiscreteBayesianNetwork
    except ImportError:
        return "pgmpy not installed (bench extra)."
    import logging

    import pandas as pd

    logging.getLogger("pgmpy").setLevel(logging.ERROR)
    tree = TOPOLOGIES["broad9"]
    model = LatentTreeModel.random(tree, 2, 6, random_state=0)
    X = model.sample(1000, random_state=1)
    names = [f"x{u}" if u < tree.n_observed else f"h{u}" for u in range(tree.n_nodes)]
    edges = [(names[tree.parent[u]], names[u]) for u in tree.preorder[1:]]
    hidden = {names[h] for h in tree.hidden_nodes}
    data = pd.DataFrame(X, columns=names[: tree.n_observed])
    per_iter = {}
    for iters in (1, 3):
        bn = DiscreteBayesianNetwork(edges, latents=hidden)
        est = ExpectationMaximization(bn, data)
        _, t = timed(
            est.get_parameters,
            latent_card={h: 2 for h in hidden},
            max_iter=iters,
            atol=0.0,
            show_progress=False,
            seed=0,
        )
        per_iter[iters] = t
    t_pgmpy = (per_iter[3] - per_iter[1]) / 2
    ours = {}
    for iters in (10, 30):
        est = LatentTreeEM(2, tree=tree, max_iter=iters, tol=0.0, random_state=0)
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _, ours[iters] = timed(est.fit, X)
    t_ours = (ours[30] - ours[10]) / 20
    rows = [
        ["pgmpy ExpectationMaximization", f"{t_pgmpy:.3f}"],
        ["ltm_sklearn LatentTreeEM", f"{t_ours:.5f}"],
        ["ratio", f"{t_pgmpy / t_ours:,.0f}x"],
    ]
    return markdown_table(["broad9, N = 1,000, k = 2, n = 6", "seconds per EM iteration"], rows)


def homogeneous_hmm(n_steps, k, n, seed):
    rng = np.random.RandomState(seed)
    edges = [(t, n_steps + t) for t in range(n_steps)]
    edges += [(n_steps + t, n_steps + t + 1) for t in range(n_steps - 1)]
    tree = LatentTree(edges, n_steps, root=n_steps)
    A = 0.5 * np.eye(k) + 0.5 * rng.dirichlet(np.ones(k), size=k)
    B = 0.5 * rng.dirichlet(np.ones(n) * 0.3, size=k) + 0.5 * rng.dirichlet(np.ones(n), size=k)
    pi = rng.dirichlet(np.ones(k))
    cpts = {t: B for t in range(n_steps)}
    cpts.update({n_steps + t: A for t in range(1, n_steps)})
    n_states = [n] * n_steps + [k] * n_steps
    return LatentTreeModel(tree, n_states, pi, cpts)


def hmmlearn_comparison(sizes):
    try:
        from hmmlearn.hmm import CategoricalHMM
    except ImportError:
        return "hmmlearn not installed (bench extra)."
    import warnings

    rows = []
    for n in sizes:
        model = homogeneous_hmm(10, 3, 6, seed=0)
        X = model.sample(n, random_state=1)
        Xt = model.sample(5000, random_state=2)
        truth = model.log_likelihood(Xt).mean()

        def hmmlearn_fit(X=X):
            h = CategoricalHMM(n_components=3, n_iter=100, tol=1e-4, random_state=0)
            return h.fit(X.reshape(-1, 1), lengths=[X.shape[1]] * X.shape[0])

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            h, t_h = timed(hmmlearn_fit)
        ll_h = h.score(Xt.reshape(-1, 1), lengths=[Xt.shape[1]] * Xt.shape[0]) / Xt.shape[0]
        sp, t_s = timed(SpectralLatentTree(3, tree=model.tree).fit, X)
        em, t_e = timed(LatentTreeEM(3, tree=model.tree, init="tensor", random_state=0).fit, X)
        for name, t, ll in (
            ("hmmlearn CategoricalHMM", t_h, ll_h),
            ("ltm_sklearn SpectralLatentTree", t_s, sp.score(Xt)),
            ("ltm_sklearn LatentTreeEM (tensor init)", t_e, em.score(Xt)),
        ):
            rows.append([f"{n:,}", name, f"{t:.2f}", f"{truth - ll:+.4f}", f"{t_h / t:.0f}x"])
            print(rows[-1], flush=True)
    return markdown_table(
        ["N", "method", "fit s", "held-out gap to truth (nats/row)", "hmmlearn time / this"],
        rows,
    )


def main(quick=False, hmm_sizes=(10_000,)):
    sizes = [200, 1_000, 10_000] if quick else [200, 1_000, 5_000, 20_000, 100_000]
    n_models = 2 if quick else 3
    table, curves = figure2(sizes, n_models)
    ratios = ratio_table(curves, sizes[-1])
    pg = pgmpy_comparison()
    print(pg, flush=True)
    hm = hmmlearn_comparison(hmm_sizes)
    plot_error_and_time(curves, TOPOLOGIES, METHODS, RESULTS / "bench_em.png")
    save(
        "bench_em",
        f"# bench_em\n\nMachine: {machine()}. Parikh, Song & Xing (ICML 2011) Fig. 2 "
        "setting: n = 6, k = 2, "
        f"{n_models} random models (`LatentTreeModel.random`, noise 0.5) per cell, medians; "
        "every method gets the true latent tree (Chow-Liu learns a fully observed tree).\n\n"
        f"## Error and fit time vs N\n\n{table}\n\n"
        f"## Spectral vs EM+ at N = {sizes[-1]:,}\n\n{ratios}\n\n"
        f"## EM time per iteration vs pgmpy\n\n{pg}\n\n"
        f"## Homogeneous 10-step HMM (k = 3, n = 6) vs hmmlearn\n\n{hm}\n\n"
        "![error and time](bench_em.png)",
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--hmm-sizes",
        type=int,
        nargs="+",
        default=[10_000],
        help="training sizes of the hmmlearn comparison (hmmlearn needs ~90 s at 1e4)",
    )
    args = parser.parse_args()
    main(args.quick, args.hmm_sizes)
