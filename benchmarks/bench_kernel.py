"""Kernel tree metric vs Gaussian and nonparanormal metrics (papers/002 Fig. 1).

Structure part of the kernel issue: 64-leaf balanced binary, skewed (HMM-like chain) and
random binary trees with the zero-correlation process of papers/002 (root a mixture of two
Gaussians, each child N(+-parent, sigma^2)), N from 500 to 10,000, 3 models per cell.
Average hop error (papers/002 section 6) of neighbor joining on the kernel metric
(eq. (12), RBF Nystroem features with 50 components, d = 2, 5, 8 singular values) next
to the Gaussian (-log|corr|) and nonparanormal metrics, plus the seconds to build the
kernel metric.

    python benchmarks/bench_kernel.py [--quick]

Writes benchmarks/results/bench_kernel.md.
"""

from __future__ import annotations

import argparse

import numpy as np
from _common import machine, markdown_table, save, timed

from ltm_sklearn.datasets import (
    balanced_binary_tree,
    hmm_chain,
    random_binary_tree,
    sample_sign_flip_tree,
)
from ltm_sklearn.metrics import hop_error
from ltm_sklearn.moments import rbf_features
from ltm_sklearn.structure import (
    gaussian_distance,
    kernel_distance,
    neighbor_joining,
    nonparanormal_distance,
)

TREES = {
    "balanced": lambda d, s: balanced_binary_tree(d),
    "skewed (chain)": lambda d, s: hmm_chain(d),
    "random": lambda d, s: random_binary_tree(d, random_state=s),
}
SINGULAR = (2, 5, 8)


def kernel_metric(X, d, seed):
    feats = rbf_features(X, n_components=50, random_state=seed)
    return kernel_distance(feats, d)


def main(quick=False):
    sizes = [500, 2_000] if quick else [500, 2_000, 10_000]
    leaves = 16 if quick else 64
    n_models = 2 if quick else 3
    rows = []
    for name, make in TREES.items():
        for n in sizes:
            errs = {f"kernel d={d}": [] for d in SINGULAR}
            errs.update({"Gaussian": [], "nonparanormal": []})
            secs = []
            for seed in range(n_models):
                tree = make(leaves, seed)
                X = sample_sign_flip_tree(tree, n, sigma=0.3, random_state=seed)
                feats, t = timed(rbf_features, X, 50, seed)
                for d in SINGULAR:
                    D, t_d = timed(kernel_distance, feats, d)
                    est = neighbor_joining(D)
                    errs[f"kernel d={d}"].append(hop_error(tree, est, average=True))
                    if d == SINGULAR[0]:
                        secs.append(t + t_d)
                for label, metric in (
                    ("Gaussian", gaussian_distance),
                    ("nonparanormal", nonparanormal_distance),
                ):
                    est = neighbor_joining(metric(X))
                    errs[label].append(hop_error(tree, est, average=True))
            rows.append(
                [name, f"{n:,}"]
                + [f"{np.mean(v):.3f}" for v in errs.values()]
                + [f"{np.mean(secs):.2f}"]
            )
            print(rows[-1], flush=True)
    header = ["tree", "N", *[f"kernel d={d}" for d in SINGULAR], "Gaussian", "nonparanormal"]
    table = markdown_table(header + ["kernel metric s"], rows)
    save(
        "bench_kernel",
        f"# bench_kernel\n\nMachine: {machine()}. papers/002 Fig. 1 (structure only): "
        f"{leaves}-leaf trees, zero-correlation sign-flip process (sigma 0.3), {n_models} "
        "models per cell, mean average hop error of neighbor joining on each metric.\n\n"
        f"{table}",
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    main(parser.parse_args().quick)
