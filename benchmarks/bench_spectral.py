"""Spectral algorithm (papers/003) against ground truth: accuracy, fit and score time.

For a 16-leaf balanced binary tree and a 20-step non-homogeneous HMM chain (n = 4 observed
states, k = 2 hidden states) and N = 1e3 .. 1e6 training rows, prints the fit and score
time, the median relative joint error |P_hat(x) - P(x)| / P(x) on 2,000 test rows and the
held-out log-likelihood gap to the true model (nats per row), each the median over
random models. Then times a fit on 1e6 rows x 64 leaves and scoring 1e5 rows x 64 leaves.

    python benchmarks/bench_spectral.py [--quick]

Writes benchmarks/results/bench_spectral.md and bench_spectral.png.
"""

from __future__ import annotations

import argparse

import numpy as np
from _common import RESULTS, machine, markdown_table, relative_joint_error, save, timed

from ltm_sklearn import SpectralLatentTree
from ltm_sklearn.datasets import LatentTreeModel, balanced_binary_tree, hmm_chain


def run(quick=False):
    sizes = [1_000, 10_000, 100_000] if quick else [1_000, 10_000, 100_000, 1_000_000]
    n_models = 2 if quick else 3
    settings = {"balanced16": balanced_binary_tree(16), "hmm20": hmm_chain(20)}
    rows, curves = [], {}
    for name, tree in settings.items():
        curves[name] = []
        for n in sizes:
            fit_s, score_s, err, gap = [], [], [], []
            for seed in range(n_models):
                model = LatentTreeModel.random(tree, 2, 4, random_state=seed)
                X = model.sample(n, random_state=seed + 100)
                X_test = model.sample(2000, random_state=seed + 200)
                est, t_fit = timed(SpectralLatentTree(2, tree=tree).fit, X)
                ll, t_score = timed(est.score_samples, X_test)
                truth = model.log_likelihood(X_test)
                fit_s.append(t_fit)
                score_s.append(t_score)
                err.append(np.median(relative_joint_error(ll, truth)))
                gap.append(truth.mean() - ll.mean())
            rows.append(
                [
                    name,
                    f"{n:,}",
                    f"{np.median(fit_s):.3f}",
                    f"{np.median(score_s):.4f}",
                    f"{np.median(err):.4f}",
                    f"{np.median(gap):+.4f}",
                ]
            )
            curves[name].append(np.median(err))
            print(rows[-1], flush=True)
    table = markdown_table(
        [
            "tree",
            "N",
            "fit s",
            "score s (2k rows)",
            "median rel. joint error",
            "held-out gap (nats/row)",
        ],
        rows,
    )

    # large: 64 leaves
    n_big = 200_000 if quick else 1_000_000
    tree64 = balanced_binary_tree(64)
    model = LatentTreeModel.random(tree64, 2, 4, random_state=0)
    X = model.sample(n_big, random_state=1)
    X_test = model.sample(100_000, random_state=2)
    est, t_fit = timed(SpectralLatentTree(2, tree=tree64).fit, X)
    _, t_fit_nj = timed(SpectralLatentTree(2).fit, X)
    ll, t_score = timed(est.score_samples, X_test)
    truth = model.log_likelihood(X_test)
    big = markdown_table(
        ["task", "rows", "seconds", "target"],
        [
            ["fit, 64 leaves, tree given", f"{n_big:,}", f"{t_fit:.2f}", "< 5 s at 1e6"],
            ["fit, 64 leaves, tree learned (NJ)", f"{n_big:,}", f"{t_fit_nj:.2f}", "-"],
            ["score_samples, 64 leaves", "100,000", f"{t_score:.2f}", "< 1 s"],
        ],
    )
    big += (
        f"\n\nHeld-out gap of the 64-leaf fit: {truth.mean() - ll.mean():+.4f} nats/row, "
        f"median relative joint error {np.median(relative_joint_error(ll, truth)):.4f}."
    )
    text = (
        f"# bench_spectral\n\nMachine: {machine()}. Models: n = 4 observed states, k = k' = 2, "
        f"true tree given, median over {n_models} random models (noise = 0.5).\n\n"
        f"{table}\n\n## 64 leaves\n\n{big}"
    )
    save("bench_spectral", text)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(5, 3.5))
        for name, errs in curves.items():
            ax.loglog(sizes, errs, "o-", label=name)
        ax.loglog(
            sizes,
            curves["balanced16"][0] * (np.array(sizes) / sizes[0]) ** -0.5,
            "k:",
            label="N^-1/2",
        )
        ax.set_xlabel("training rows N")
        ax.set_ylabel("median relative joint error")
        ax.legend()
        fig.tight_layout()
        fig.savefig(RESULTS / "bench_spectral.png", dpi=120)
    except ImportError:
        pass


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    run(parser.parse_args().quick)
