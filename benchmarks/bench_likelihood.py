"""Normalised models on ground truth: gaps to the truth against EM, k' = 1, and the cost
of polishing moment estimates by EM.

1. True tree, n = 4 observed states, k = 2 and k = 4 hidden states, k' = 1..4, N = 1e4,
   3 random models per cell (fully random tables, ``noise=1``): held-out gap to the truth
   (nats per row, 5,000 test rows) of SpectralLatentTree and HierarchicalTensorLTM with
   their defaults (explicit tables from the moment estimate, polished by EM), of
   LatentTreeEM with its defaults, and of the raw observable representation of the
   spectral algorithm (not normalised; its non-positive estimates are floored at
   1e-300, counted). At k' = 1 the largest difference to the independence model.
2. Moments to start, likelihood to finish: gap and fit time against ``max_iter`` (EM
   iterations after the moment estimate) at N = 1e4 and 1e5.
3. Time at N = 1e5: the default fit against the raw spectral fit (the observable
   representation alone, on the same tree, and with its structure learned by neighbor
   joining), one run each.

    python benchmarks/bench_likelihood.py [--quick]

Writes benchmarks/results/bench_likelihood.md.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from _common import machine, markdown_table, save
from sklearn.exceptions import ConvergenceWarning

from ltm_sklearn import HierarchicalTensorLTM, LatentTree, LatentTreeEM, SpectralLatentTree
from ltm_sklearn._algorithms.spectral import fit_spectral
from ltm_sklearn._algorithms.structure import learn_tree, spectral_distance
from ltm_sklearn._engine.encoding import CategoricalEncoder
from ltm_sklearn._engine.moments import MomentEstimator
from ltm_sklearn.datasets import (
    LatentTreeModel,
    balanced_binary_tree,
    hmm_chain,
    random_binary_tree,
)

warnings.simplefilter("ignore", ConvergenceWarning)


def trees():
    return {
        "balanced16": balanced_binary_tree(16),
        "random16": random_binary_tree(16, random_state=7),
        "hmm12": hmm_chain(12),
    }


def raw_spectral_fit(X, k, tree=None):
    """The observable representation alone (the spectral algorithm's raw estimate): one
    pass of moments, the structure by neighbor joining when ``tree`` is None."""
    t0 = time.perf_counter()
    enc = CategoricalEncoder()
    codes = enc.fit_transform(X)
    mom = MomentEstimator(codes, enc.n_states_)
    if tree is None:
        tree = learn_tree(spectral_distance(mom, k), "nj")
    tree = LatentTree(tree.edges, tree.n_observed)
    params = fit_spectral(tree.with_observed_leaves(), mom, k, np.full(X.shape[1], 1e-6))
    return params, time.perf_counter() - t0


def part_gaps(quick):
    n_models = 1 if quick else 3
    n = 2000 if quick else 10_000
    rows = []
    indep_err = 0.0
    for name, tree in trees().items():
        for k in (2, 4):
            for kp in range(1, 5):
                gaps = {"spectral": [], "hierarchical": [], "EM": [], "raw spectral": []}
                floored = 0
                for seed in range(n_models):
                    truth = LatentTreeModel.random(tree, k, 4, noise=1.0, random_state=seed)
                    X = truth.sample(n, random_state=100 + seed)
                    X_test = truth.sample(5000, random_state=200 + seed)
                    ll = truth.log_likelihood(X_test).mean()
                    for label, cls in (
                        ("spectral", SpectralLatentTree),
                        ("hierarchical", HierarchicalTensorLTM),
                        ("EM", LatentTreeEM),
                    ):
                        est = cls(kp, tree=tree, random_state=0).fit(X)
                        gaps[label].append(ll - est.score(X_test))
                        if kp == 1 and label == "spectral":
                            indep = np.zeros(len(X_test))
                            for j in range(tree.n_observed):
                                c = np.bincount(X[:, j], minlength=4) + est.alpha
                                indep += np.log(c / c.sum())[X_test[:, j]]
                            indep_err = max(
                                indep_err, float(np.abs(est.score_samples(X_test) - indep).max())
                            )
                    spec = SpectralLatentTree(kp, tree=tree, max_iter=0, random_state=0).fit(X)
                    sign, logabs = spec.raw_log_abs(X_test)
                    floored += int(np.sum(sign <= 0))
                    gaps["raw spectral"].append(
                        ll - np.mean(np.where(sign > 0, logabs, np.log(1e-300)))
                    )
                med = {m: float(np.median(v)) for m, v in gaps.items()}
                margin = 0.02 if kp >= k else 0.05
                ok = all(med[m] <= med["EM"] + margin for m in ("spectral", "hierarchical"))
                rows.append(
                    [name, k, kp]
                    + [f"{med[m]:.4f}" for m in ("spectral", "hierarchical", "EM")]
                    + [f"{med['raw spectral']:.3f} ({floored} floored)", "yes" if ok else "NO"]
                )
    header = [
        "tree",
        "k",
        "k'",
        "spectral",
        "hierarchical",
        "EM",
        "raw spectral (research)",
        "within EM + 0.02 / 0.05",
    ]
    text = [
        f"## 1. Held-out gap to the truth (nats per row, median of {n_models} models, N = {n:,})",
        "",
        markdown_table(header, rows),
        "",
        f"k' = 1: largest |score_samples - independence model| over the test rows: "
        f"{indep_err:.2e}.",
    ]
    return text


def part_polish(quick):
    sizes = [10_000] if quick else [10_000, 100_000]
    iters = [0, 5, 20, 100]
    rows = []
    for name, tree, k in (
        ("balanced16", balanced_binary_tree(16), 2),
        ("balanced16, k = 3", balanced_binary_tree(16), 3),
        ("balanced64", balanced_binary_tree(64), 2),
    ):
        if quick and "64" in name:
            continue
        truth = LatentTreeModel.random(tree, k, 4, random_state=0)
        X_test = truth.sample(5000, random_state=1)
        ll = truth.log_likelihood(X_test).mean()
        for n in sizes:
            X = truth.sample(n, random_state=0)
            _, raw_s = raw_spectral_fit(X, k, tree)
            spec = SpectralLatentTree(k, tree=tree, max_iter=0, random_state=0).fit(X)
            raw_gap = ll - spec.raw_log_abs(X_test)[1].mean()
            cells = []
            for m in iters:
                t0 = time.perf_counter()
                est = SpectralLatentTree(k, tree=tree, max_iter=m, random_state=0).fit(X)
                dt = time.perf_counter() - t0
                cells.append(f"{ll - est.score(X_test):.4f} / {dt / raw_s:.0f}x")
            rows.append([name, f"{n:,}", f"{raw_gap:.4f} / {raw_s:.3f} s"] + cells)
    header = ["tree", "N", "raw spectral gap / fit"] + [f"max_iter={m}: gap / time" for m in iters]
    return [
        "## 2. EM polishing: held-out gap (nats per row) / fit time relative to the raw "
        "spectral fit (tree given)",
        "",
        markdown_table(header, rows),
    ]


def part_time(quick):
    n = 20_000 if quick else 100_000
    rows = []
    for name, tree in (
        ("balanced16", balanced_binary_tree(16)),
        ("hmm20", hmm_chain(20)),
        ("balanced64", balanced_binary_tree(64)),
    ):
        truth = LatentTreeModel.random(tree, 2, 4, random_state=0)
        X = truth.sample(n, random_state=0)
        X_test = truth.sample(5000, random_state=1)
        ll = truth.log_likelihood(X_test).mean()
        for given in (True, False):
            raw_s = min(raw_spectral_fit(X, 2, tree if given else None)[1] for _ in range(2))
            t0 = time.perf_counter()
            est = SpectralLatentTree(2, tree=tree if given else None, random_state=0).fit(X)
            dt = time.perf_counter() - t0
            rows.append(
                [
                    name,
                    "given" if given else f"learned ({est.structure_})",
                    f"{raw_s:.3f}",
                    f"{dt:.2f}",
                    f"{dt / raw_s:.1f}x",
                    est.n_iter_,
                    f"{ll - est.score(X_test):.4f}",
                ]
            )
    header = ["tree", "tree", "raw spectral s", "default s", "ratio", "EM iterations", "gap"]
    return [
        f"## 3. Default fit time at N = {n:,} against the raw spectral fit",
        "",
        markdown_table(header, rows),
    ]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--part", default="gaps,polish,time")
    args = ap.parse_args()
    text = [f"# bench_likelihood{'_quick' if args.quick else ''}", "", f"Machine: {machine()}.", ""]
    if "gaps" in args.part:
        text += part_gaps(args.quick) + [""]
    if "polish" in args.part:
        text += part_polish(args.quick) + [""]
    if "time" in args.part:
        text += part_time(args.quick) + [""]
    save(f"bench_likelihood{'_quick' if args.quick else ''}", "\n".join(text))


if __name__ == "__main__":
    main()
