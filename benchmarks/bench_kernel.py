"""KernelLatentTree and the kernel tree metric (Song, Parikh & Xing (NIPS 2011) section 6).

Three parts, each writing its own table under benchmarks/results/ (real numeric and mixed
tables: ``bench_continuous.py``):

* ``fig1``  - Song, Parikh & Xing (NIPS 2011) Fig. 1: average hop error of neighbor joining on the
kernel metric
  (eq. (12), d = 2, 5, 8 singular values, 50 quantile landmarks per column) vs the Gaussian
  and nonparanormal metrics; 64-leaf balanced, skewed (HMM-like chain) and random binary
  trees; the zero-correlation sign-flip process (sigma 0.3); 3 models per cell.
  -> bench_kernel_fig1.md / .png
* ``fig2``  - Song, Parikh & Xing (NIPS 2011) Fig. 2: held-out-likelihood choice of n_hidden_states
(2..8) on a
  16-leaf balanced tree with d-state hidden nodes and Gaussian-mixture leaves, d = 2..5,
  100,000 training rows, 500 held-out rows, 20 trials; bump bandwidths chosen per column
  (the default) and half the median bandwidth. -> bench_kernel_fig2.md / .png
* ``speed`` - fit and scoring time of 100,000 rows x 64 columns. -> bench_kernel_speed.md

    python benchmarks/bench_kernel.py [--part fig1|fig2|speed|all] [--quick]
"""

from __future__ import annotations

import argparse

import numpy as np
from _common import RESULTS, machine, markdown_table, save, timed

from ltm_sklearn import KernelLatentTree
from ltm_sklearn._algorithms.structure import (
    gaussian_distance,
    kernel_distance,
    neighbor_joining,
    nonparanormal_distance,
)
from ltm_sklearn._engine.kernel_features import rbf_features
from ltm_sklearn.datasets import (
    GaussianLeafTreeModel,
    balanced_binary_tree,
    hmm_chain,
    random_binary_tree,
    sample_sign_flip_tree,
)
from ltm_sklearn.metrics import hop_error, robinson_foulds

TREES = {
    "balanced": lambda d, s: balanced_binary_tree(d),
    "skewed (chain)": lambda d, s: hmm_chain(d),
    "random": lambda d, s: random_binary_tree(d, random_state=s),
}
SINGULAR = (2, 5, 8)


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


# ---------------------------------------------------------------------- Fig. 1
def fig1(quick=False):
    sizes = [500, 2_000] if quick else [500, 2_000, 10_000, 100_000]
    leaves = 16 if quick else 64
    n_models = 2 if quick else 3
    methods = [f"kernel d={d}" for d in SINGULAR] + ["Gaussian", "nonparanormal"]
    rows, curves = [], {}
    for name, make in TREES.items():
        for n in sizes:
            errs = {m: [] for m in methods}
            secs = []
            for seed in range(n_models):
                tree = make(leaves, seed)
                X = sample_sign_flip_tree(tree, n, sigma=0.3, random_state=seed)
                feats, t = timed(rbf_features, X, 50)
                for d in SINGULAR:
                    D, t_d = timed(kernel_distance, feats, d)
                    errs[f"kernel d={d}"].append(hop_error(tree, neighbor_joining(D), average=True))
                    if d == SINGULAR[0]:
                        secs.append(t + t_d)
                for label, metric in (
                    ("Gaussian", gaussian_distance),
                    ("nonparanormal", nonparanormal_distance),
                ):
                    errs[label].append(hop_error(tree, neighbor_joining(metric(X)), average=True))
            for m in methods:
                curves.setdefault((name, m), []).append((n, np.mean(errs[m])))
            rows.append(
                [name, f"{n:,}"]
                + [f"{np.mean(errs[m]):.3f}" for m in methods]
                + [f"{np.mean(secs):.2f}"]
            )
            print(rows[-1], flush=True)
    table = markdown_table(["tree", "N", *methods, "kernel metric s"], rows)
    suffix = "_quick" if quick else ""
    save(
        f"bench_kernel_fig1{suffix}",
        "# bench_kernel: Song, Parikh & Xing (NIPS 2011) Fig. 1\n\n"
        f"Machine: {machine()}. {leaves}-leaf trees, "
        f"zero-correlation sign-flip process (sigma 0.3), {n_models} models per cell, mean "
        "average hop error of neighbor joining on each metric; seconds to build the kernel "
        f"metric (features + d = 2).\n\n{table}",
    )
    plt = _pyplot()
    if plt is not None:
        fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
        for ax, name in zip(axes, TREES):
            for m in methods:
                pts = np.array(curves[(name, m)])
                ax.semilogx(pts[:, 0], pts[:, 1], "o-", label=m)
            ax.set_title(f"{name}, {leaves} leaves")
            ax.set_xlabel("training size N")
        axes[0].set_ylabel("average hop error")
        axes[0].legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(RESULTS / f"bench_kernel_fig1{suffix}.png", dpi=100)


# ---------------------------------------------------------------------- Fig. 2
def _scale_label(scale):
    return "chosen per column" if scale is None else f"{scale:g} x median"


def fig2(quick=False):
    n_train = 5_000 if quick else 100_000
    trials = 3 if quick else 20
    candidates = list(range(2, 9))
    scales = (None, 0.5)  # bump bandwidths chosen per column; 0.5 x median for both
    diffs = {}
    for scale in scales:
        for d in (2, 3, 4, 5):
            out = []
            for trial in range(trials):
                truth = GaussianLeafTreeModel.random(
                    balanced_binary_tree(16), d, random_state=trial
                )
                X = truth.sample(n_train, random_state=1000 + trial)
                X_hold = truth.sample(500, random_state=2000 + trial)
                scores = [
                    KernelLatentTree(k, hidden="discrete", bandwidth_scale=scale, random_state=0)
                    .fit(X)
                    .score(X_hold)
                    for k in candidates
                ]
                out.append(candidates[int(np.argmax(scores))] - d)
            diffs[(scale, d)] = out
            print(scale, d, out, flush=True)
    rows = []
    for (scale, d), out in diffs.items():
        out = np.array(out)
        counts = " ".join(f"{v:+d}:{np.sum(out == v)}" for v in np.unique(out))
        rows.append(
            [_scale_label(scale), d, f"{np.mean(out == 0):.2f}", f"{np.mean(out):+.2f}", counts]
        )
    table = markdown_table(
        ["bandwidth", "true d", "exact", "mean (chosen - true)", "histogram"], rows
    )
    suffix = "_quick" if quick else ""
    save(
        f"bench_kernel_fig2{suffix}",
        "# bench_kernel: Song, Parikh & Xing (NIPS 2011) Fig. 2 (model selection)\n\n"
        f"Machine: {machine()}. "
        f"16-leaf balanced tree, hidden nodes with d states (random CPTs), leaves mixtures of "
        f"d Gaussians (spacing 2, sigma 0.5), {n_train:,} training rows, 500 held-out rows, "
        f"{trials} trials; n_hidden_states chosen among 2..8 by held-out log-likelihood.\n\n"
        f"{table}",
    )
    plt = _pyplot()
    if plt is not None:
        fig, axes = plt.subplots(len(scales), 4, figsize=(13, 3.2 * len(scales)), squeeze=False)
        for r, scale in enumerate(scales):
            for c, d in enumerate((2, 3, 4, 5)):
                ax = axes[r, c]
                ax.hist(diffs[(scale, d)], bins=np.arange(-3.5, 4.5), rwidth=0.8)
                ax.set_title(f"true d = {d}, bandwidth {_scale_label(scale)}", fontsize=9)
                ax.set_xlabel("chosen - true")
        fig.tight_layout()
        fig.savefig(RESULTS / f"bench_kernel_fig2{suffix}.png", dpi=100)


# ---------------------------------------------------------------------- speed
def speed(quick=False):
    n = 20_000 if quick else 100_000
    rows = []
    cases = {
        "sign-flip, balanced 64": lambda: (
            balanced_binary_tree(64),
            sample_sign_flip_tree(balanced_binary_tree(64), n, random_state=0),
        ),
        "Gaussian leaves d=3, random 64": lambda: _gaussian_case(n),
    }
    for name, make in cases.items():
        tree, X = make()
        for k, structure in ((2, "nj"), (5, "nj"), (3, "clnj")):
            est, t_fit = timed(KernelLatentTree(k, structure=structure, hidden="discrete").fit, X)
            _, t_score = timed(est.score_samples, X[:10_000])
            dims = int(est.feature_map_.offsets_[-1])
            rf = robinson_foulds(est.tree_, tree)
            rows.append([name, f"{n:,}", k, structure, dims, f"{t_fit:.1f}", f"{t_score:.2f}", rf])
            print(rows[-1], flush=True)
    table = markdown_table(
        ["data", "N", "k'", "structure", "feature dims", "fit s", "score 10k rows s", "RF"],
        rows,
    )
    suffix = "_quick" if quick else ""
    save(
        f"bench_kernel_speed{suffix}",
        f"# bench_kernel: speed\n\nMachine: {machine()}. KernelLatentTree (50 landmarks "
        "per column, kernel metric with the median bandwidth, explicit model with bump "
        "bandwidths chosen per column), 64 columns; RF = Robinson-Foulds distance of the "
        f"learned tree.\n\n{table}",
    )


def _gaussian_case(n):
    truth = GaussianLeafTreeModel.random(random_binary_tree(64, random_state=0), 3, random_state=0)
    return truth.tree, truth.sample(n, random_state=1)


PARTS = {"fig1": fig1, "fig2": fig2, "speed": speed}

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=[*PARTS, "all"], default="all")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    for name, run in PARTS.items():
        if args.part in (name, "all"):
            run(args.quick)
