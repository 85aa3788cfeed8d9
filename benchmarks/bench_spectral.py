"""Spectral algorithm (Parikh, Song & Xing (ICML 2011)) against ground truth: accuracy, fit and
score time.

For a 16-leaf balanced binary tree and a 20-step non-homogeneous HMM chain (n = 4 observed
states, k = 2 hidden states) and N = 1e3 .. 1e6 training rows, prints for the raw
observable representation of Parikh, Song & Xing (ICML 2011) (the algorithm itself, not normalised)
and for
``SpectralLatentTree`` with its defaults (explicit tables from that estimate, polished by
EM) the fit time, the median relative joint error |P_hat(x) - P(x)| / P(x) on 2,000 test
rows and the held-out log-likelihood gap to the true model (nats per row), each the median
over random models, and the score time of the default model. Then times fits on 1e6 rows
x 64 leaves and scoring 1e5 rows x 64 leaves.

    python benchmarks/bench_spectral.py [--quick]

Writes benchmarks/results/bench_spectral.md and bench_spectral.png.
"""

from __future__ import annotations

import argparse

import numpy as np
from _common import (
    RESULTS,
    machine,
    markdown_table,
    raw_spectral_fit,
    save,
    timed,
)

from ltm_sklearn import SpectralLatentTree
from ltm_sklearn.datasets import LatentTreeModel, balanced_binary_tree, hmm_chain
from ltm_sklearn.metrics import relative_joint_error


def run(quick=False):
    sizes = [1_000, 10_000, 100_000] if quick else [1_000, 10_000, 100_000, 1_000_000]
    n_models = 2 if quick else 3
    settings = {"balanced16": balanced_binary_tree(16), "hmm20": hmm_chain(20)}
    rows, curves = [], {}
    for name, tree in settings.items():
        curves[name] = []
        for n in sizes:
            stats = {
                key: [] for key in ("raw_s", "raw_err", "raw_gap", "fit_s", "score_s", "err", "gap")
            }
            for seed in range(n_models):
                model = LatentTreeModel.random(tree, 2, 4, random_state=seed)
                X = model.sample(n, random_state=seed + 100)
                X_test = model.sample(2000, random_state=seed + 200)
                truth = model.log_likelihood(X_test)
                _, raw_s, raw_score = raw_spectral_fit(X, 2, tree)
                sign, logabs = raw_score(X_test)
                raw_ll = np.where(sign > 0, logabs, np.log(1e-300))
                est, t_fit = timed(SpectralLatentTree(2, tree=tree, random_state=0).fit, X)
                ll, t_score = timed(est.score_samples, X_test)
                stats["raw_s"].append(raw_s)
                stats["raw_err"].append(np.median(relative_joint_error(truth, raw_ll)))
                stats["raw_gap"].append(truth.mean() - raw_ll.mean())
                stats["fit_s"].append(t_fit)
                stats["score_s"].append(t_score)
                stats["err"].append(np.median(relative_joint_error(truth, ll)))
                stats["gap"].append(truth.mean() - ll.mean())
            med = {key: float(np.median(v)) for key, v in stats.items()}
            rows.append(
                [
                    name,
                    f"{n:,}",
                    f"{med['raw_s']:.3f} / {med['fit_s']:.3f}",
                    f"{med['raw_err']:.4f} / {med['err']:.4f}",
                    f"{med['raw_gap']:+.4f} / {med['gap']:+.4f}",
                    f"{med['score_s']:.4f}",
                ]
            )
            curves[name].append((med["raw_err"], med["err"]))
            print(rows[-1], flush=True)
    table = markdown_table(
        [
            "tree",
            "N",
            "fit s: raw / default",
            "median rel. joint error: raw / default",
            "held-out gap (nats/row): raw / default",
            "score s (2k rows)",
        ],
        rows,
    )

    # large: 64 leaves
    n_big = 200_000 if quick else 1_000_000
    tree64 = balanced_binary_tree(64)
    model = LatentTreeModel.random(tree64, 2, 4, random_state=0)
    X = model.sample(n_big, random_state=1)
    X_test = model.sample(100_000, random_state=2)
    _, raw_fit, raw_score = raw_spectral_fit(X, 2, tree64)
    _, raw_fit_nj, _ = raw_spectral_fit(X, 2)
    est, t_fit = timed(SpectralLatentTree(2, tree=tree64, random_state=0).fit, X)
    nj, t_fit_nj = timed(SpectralLatentTree(2, structure="nj", random_state=0).fit, X)
    ll, t_score = timed(est.score_samples, X_test)
    truth = model.log_likelihood(X_test)
    raw_ll = raw_score(X_test)[1]
    big = markdown_table(
        ["task", "rows", "seconds", "target"],
        [
            [
                "raw spectral fit, 64 leaves, tree given",
                f"{n_big:,}",
                f"{raw_fit:.2f}",
                "< 5 s at 1e6",
            ],
            [
                "raw spectral fit, 64 leaves, tree learned (NJ)",
                f"{n_big:,}",
                f"{raw_fit_nj:.2f}",
                "-",
            ],
            ["default fit, 64 leaves, tree given", f"{n_big:,}", f"{t_fit:.2f}", "-"],
            ["default fit, 64 leaves, structure='nj'", f"{n_big:,}", f"{t_fit_nj:.2f}", "-"],
            ["score_samples (default), 64 leaves", "100,000", f"{t_score:.2f}", "< 1 s"],
        ],
    )
    big += (
        f"\n\nHeld-out gap of the 64-leaf fits: raw {truth.mean() - raw_ll.mean():+.4f}, "
        f"default {truth.mean() - ll.mean():+.4f} nats/row ({est.n_iter_} EM iterations on "
        f"all rows); median relative joint error raw "
        f"{np.median(relative_joint_error(truth, raw_ll)):.4f}, default "
        f"{np.median(relative_joint_error(truth, ll)):.4f}."
    )
    text = (
        f"# bench_spectral\n\nMachine: {machine()}. Models: n = 4 observed states, k = k' = 2, "
        f"true tree given, median over {n_models} random models (noise = 0.5). 'raw': the "
        "observable representation of Parikh, Song & Xing (ICML 2011) (not normalised; a "
        "non-positive estimate "
        "counts as probability 1e-300); 'default': SpectralLatentTree().\n\n"
        f"{table}\n\n## 64 leaves\n\n{big}"
    )
    save("bench_spectral", text)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(5, 3.5))
        for name, errs in curves.items():
            errs = np.array(errs)
            ax.loglog(sizes, errs[:, 0], "o-", label=f"{name}, raw")
            ax.loglog(sizes, errs[:, 1], "s--", label=f"{name}, default")
        ax.loglog(
            sizes,
            curves["balanced16"][0][0] * (np.array(sizes) / sizes[0]) ** -0.5,
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
