"""Structure learning: Robinson-Foulds distance vs N, and neighbor-joining speed.

1. RF distance of the learned tree to the truth for 16- and 32-leaf balanced and random
   binary trees (k = 2, n = 4), N = 1e3, 1e4, 1e5, 5 random models each, at two CPT noise
   levels, for every structure method (NJ, RG, CLRG, CLNJ on the spectral tree metric).
2. Neighbor joining time at 256, 1,024 and 2,048 leaves on exact additive distances of a
   random binary tree, next to scikit-bio's compiled ``nj`` on the same matrix (bench
   extra), in the same run.

    python benchmarks/bench_structure.py [--quick]
"""

from __future__ import annotations

import argparse

import numpy as np
import scipy.sparse as sp
from _common import machine, markdown_table, save, timed
from scipy.sparse.csgraph import shortest_path

from ltm_sklearn import SpectralLatentTree
from ltm_sklearn.datasets import LatentTreeModel, balanced_binary_tree, random_binary_tree
from ltm_sklearn.metrics import robinson_foulds
from ltm_sklearn.structure import neighbor_joining

METHODS = ["nj", "rg", "clrg", "clnj"]


def rf_table(sizes, n_models, noise):
    rows = []
    for shape in ("balanced", "random"):
        for n_leaves in (16, 32):
            for n in sizes:
                rfs = {m: [] for m in METHODS}
                secs = {m: [] for m in METHODS}
                for seed in range(n_models):
                    tree = (
                        balanced_binary_tree(n_leaves)
                        if shape == "balanced"
                        else random_binary_tree(n_leaves, random_state=seed)
                    )
                    model = LatentTreeModel.random(tree, 2, 4, noise=noise, random_state=seed)
                    X = model.sample(n, random_state=seed + 100)
                    for method in METHODS:
                        est = SpectralLatentTree(2, structure=method, max_iter=0)
                        est, t = timed(est.fit, X)
                        rfs[method].append(robinson_foulds(tree, est.tree_))
                        secs[method].append(t)
                for method in METHODS:
                    rows.append(
                        [
                            f"{shape}{n_leaves}",
                            f"{n:,}",
                            method,
                            " ".join(map(str, rfs[method])),
                            f"{sum(r == 0 for r in rfs[method])}/{n_models}",
                            f"{np.median(secs[method]):.2f}",
                        ]
                    )
                    print(noise, rows[-1], flush=True)
    return markdown_table(["tree", "N", "method", "RF per model", "exact", "fit s (median)"], rows)


def additive(n_leaves, seed=0):
    tree = random_binary_tree(n_leaves, random_state=seed)
    rng = np.random.RandomState(seed)
    e = np.asarray(tree.edges)
    G = sp.coo_matrix(
        (rng.uniform(0.1, 1.0, len(e)), (e[:, 0], e[:, 1])), shape=(tree.n_nodes,) * 2
    ).tocsr()
    D = shortest_path(G, directed=False)[:n_leaves, :n_leaves]
    return tree, (D + D.T) / 2


def nj_speed(leaf_counts):
    rows = []
    for n in leaf_counts:
        tree, D = additive(n)
        est, t_ours = timed(neighbor_joining, D)
        try:
            from skbio import DistanceMatrix
            from skbio.tree import nj

            dm = DistanceMatrix(D, ids=[str(i) for i in range(n)])
            _, t_skbio = timed(nj, dm)
            ratio = f"{t_ours / t_skbio:.2f}"
            t_skbio = f"{t_skbio:.3f}"
        except ImportError:
            t_skbio, ratio = "not installed", "-"
        rows.append([f"{n:,}", f"{t_ours:.3f}", t_skbio, ratio, robinson_foulds(tree, est)])
        print(rows[-1], flush=True)
    return markdown_table(
        ["leaves", "ours s", "scikit-bio nj s", "ours / scikit-bio", "RF to truth"], rows
    )


NOISE_LEVELS = (0.3, 0.5)


def main(quick=False):
    sizes = [1_000, 10_000] if quick else [1_000, 10_000, 100_000]
    n_models = 2 if quick else 5
    tables = [
        f"## RF distance to the true tree, noise = {noise}\n\n{rf_table(sizes, n_models, noise)}"
        for noise in NOISE_LEVELS
    ]
    speed = nj_speed([256, 1024] if quick else [256, 1024, 2048])
    save(
        "bench_structure",
        f"# bench_structure\n\nMachine: {machine()}. k = k' = 2, n = 4; CPTs of "
        "`LatentTreeModel.random(noise=...)` (smaller noise: better-conditioned edges). "
        "Thresholds of rg/clrg/clnj: 2 / sqrt(N).\n\n" + "\n\n".join(tables) + "\n\n"
        f"## Neighbor joining time (exact additive distances, random binary tree)\n\n{speed}",
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    main(parser.parse_args().quick)
