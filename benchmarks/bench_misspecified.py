"""Misspecified latent trees (k' < k): Song, Ishteva, Parikh, Xing & Park (ICML 2013) Fig. 2.

Settings {O, n, k, k'}: {9, 4, 4, 2} on random binary trees, {16, 4, 4, 2} on balanced
binary trees, {16, 6, 4, 3} on random binary trees and a 20-step non-homogeneous HMM
{20, 4, 4, 2}; N from 200 to 1e5, fully random CPTs (`LatentTreeModel.random`, noise 1),
5 random models per cell (the paper used 10), 1,000 test rows. Every method gets the
true tree and k'. Median over models of the median relative joint error
|P_hat(x) - P(x)| / P(x), and of the fit time, for

* HierarchicalTensorLTM's raw decomposition (optimal linker M*, eq. (6)),
* SpectralLatentTree's raw observable representation (Parikh, Song & Xing (ICML 2011), Theorem 3's
linker) -
  the two algorithms as the paper compares them (fit times and errors of the raw
  decompositions, before their estimates are turned into normalised models),
* LatentTreeEM with 5 random restarts, stopping when an iteration gains less than 1e-4
  nats per row, up to N = 10,000 by default (``--em-max-n``).

    python benchmarks/bench_misspecified.py [--quick]

Writes benchmarks/results/bench_misspecified.md and bench_misspecified.png.
"""

from __future__ import annotations

import argparse
import warnings

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

from ltm_sklearn import LatentTreeEM
from ltm_sklearn._algorithms.hierarchical import fit_hierarchical
from ltm_sklearn._algorithms.spectral import fit_spectral
from ltm_sklearn.datasets import (
    LatentTreeModel,
    balanced_binary_tree,
    hmm_chain,
    random_binary_tree,
)
from ltm_sklearn.metrics import relative_joint_error

# name -> (tree factory(seed), n, k, k')
SETTINGS = {
    "{9,4,4,2} random": (lambda s: random_binary_tree(9, random_state=s), 4, 4, 2),
    "{16,4,4,2} balanced": (lambda s: balanced_binary_tree(16), 4, 4, 2),
    "{16,6,4,3} random": (lambda s: random_binary_tree(16, random_state=s), 6, 4, 3),
    "{20,4,4,2} NH HMM": (lambda s: hmm_chain(20), 4, 4, 2),
}
METHODS = ["hierarchical", "spectral", "EM"]


class _Raw:
    """A raw decomposition, scored by its signed estimate (non-positive: 1e-300)."""

    def __init__(self, score):
        self.score = score


def fit_method(method, tree, kp, X, seed):
    if method in ("hierarchical", "spectral"):
        fit_raw = fit_hierarchical if method == "hierarchical" else fit_spectral
        return _Raw(raw_spectral_fit(X, kp, tree, fit_raw=fit_raw)[2])
    est = LatentTreeEM(
        kp, tree=tree, init="random", n_init=5, tol=1e-4, max_iter=1000, random_state=seed
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit(X)


def log_estimate(est, X):
    """The raw estimate of the moment methods (non-positive values count as 1e-300), the
    model's log-likelihood for EM."""
    if isinstance(est, _Raw):
        sign, logabs = est.score(X)
        return np.where(sign > 0, logabs, np.log(1e-300))
    return est.score_samples(X)


def figure2(sizes, n_models, methods, em_max_n):
    rows, curves = [], {}
    for name, (make_tree, n, k, kp) in SETTINGS.items():
        for size in sizes:
            active = [m for m in methods if m != "EM" or size <= em_max_n]
            res = {m: {"err": [], "t": []} for m in active}
            for seed in range(n_models):
                tree = make_tree(seed)
                model = LatentTreeModel.random(tree, k, n, noise=1.0, random_state=seed)
                X = model.sample(size, random_state=seed + 100)
                Xt = model.sample(1000, random_state=seed + 200)
                truth = model.log_likelihood(Xt)
                for m in active:
                    est, t = timed(fit_method, m, tree, kp, X, seed)
                    err = relative_joint_error(truth, log_estimate(est, Xt))
                    res[m]["err"].append(np.median(err))
                    res[m]["t"].append(t)
            for m in active:
                err, t = (float(np.median(res[m][key])) for key in ("err", "t"))
                curves.setdefault((name, m), []).append((size, err, t))
                rows.append([name, f"{size:,}", m, f"{err:.3f}", f"{t:.3f}"])
                print(rows[-1], flush=True)
    table = markdown_table(["setting", "N", "method", "median rel. error", "fit s"], rows)
    return table, curves


def summary(curves, methods, threshold=10_000):
    """Claims of Song, Ishteva, Parikh, Xing & Park (ICML 2013) as numbers, per setting, at every N
    >= threshold."""
    rows = []
    for name in SETTINGS:
        get = {m: {c[0]: c for c in curves[(name, m)]} for m in methods}
        for size in sorted(get["hierarchical"]):
            if size < threshold:
                continue
            h, s = get["hierarchical"][size], get["spectral"][size]
            row = [name, f"{size:,}", f"{h[1] / s[1]:.2f}"]
            if "EM" in get:
                e = get["EM"].get(size)
                row += ["-", "-"] if e is None else [f"{h[1] / e[1]:.2f}", f"{e[2] / h[2]:.0f}x"]
            rows.append(row)
    header = ["setting", "N", "error hier / spectral"]
    if "EM" in methods:
        header += ["error hier / EM", "EM time / hier time"]
    return markdown_table(header, rows)


def main(quick=False, no_em=False, em_max_n=10_000):
    sizes = [1_000, 10_000] if quick else [200, 1_000, 5_000, 10_000, 100_000]
    n_models = 2 if quick else 5
    methods = [m for m in METHODS if not (no_em and m == "EM")]
    table, curves = figure2(sizes, n_models, methods, em_max_n)
    plot_error_and_time(curves, SETTINGS, methods, RESULTS / "bench_misspecified.png")
    save(
        "bench_misspecified",
        f"# bench_misspecified\n\nMachine: {machine()}. Song, Ishteva, Parikh, Xing & Park "
        "(ICML 2013) Fig. 2: true tree and "
        f"k' given to every method, fully random CPTs (noise 1), {n_models} models per "
        "cell, medians over models of the median relative joint error on 1,000 test rows; "
        f"EM (5 restarts, tol 1e-4) up to N = {em_max_n:,}.\n\n"
        f"## Error and fit time vs N\n\n{table}\n\n"
        f"## Ratios at N >= 10,000\n\n{summary(curves, methods)}\n\n"
        "![error and time](bench_misspecified.png)",
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-em", action="store_true", help="skip the EM column")
    parser.add_argument("--em-max-n", type=int, default=10_000, help="largest N fitted by EM")
    args = parser.parse_args()
    main(args.quick, args.no_em, args.em_max_n)
