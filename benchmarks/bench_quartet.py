"""Quartet tests and quartet-based tree building (Ishteva, Park & Song (ICML 2013)).

1. Quartet-test success rate on random 4-leaf models (k = 2, n = 4) vs N and vs the
   strength of the hidden edge (P(G | H) = s I + (1 - s) random rows): Algorithm 1's plain
   nuclear norm next to the rank-k residual score, 20 models per cell.
2. Robinson-Foulds distance vs N for 16, 32 and 64-leaf random and balanced binary trees
   (k = 2, n = 4, CPT noise 0.3 and the simulator's default 0.5, 5 models):
   QuartetTreeLearner's structure (the quartet tree polished by minimum-evolution
   interchanges and kept when it fits the reliable distances clearly better, the default)
   and the quartet tree alone (``local_search=False``) next to neighbor joining and
   recursive grouping on the spectral tree metric; quartet tests and seconds per tree
   (local search included).

    python benchmarks/bench_quartet.py [--quick]

Writes benchmarks/results/bench_quartet.md.
"""

from __future__ import annotations

import argparse
import itertools

import numpy as np
from _common import machine, markdown_table, save, timed

from ltm_sklearn._algorithms.structure import (
    learn_tree,
    learn_tree_quartets,
    quartet_tables,
    quartet_test,
    spectral_distance,
)
from ltm_sklearn._engine.moments import MomentEstimator
from ltm_sklearn._engine.tree import LatentTree
from ltm_sklearn.datasets import LatentTreeModel, balanced_binary_tree, random_binary_tree
from ltm_sklearn.metrics import robinson_foulds

QUARTET = LatentTree([(0, 4), (1, 4), (4, 5), (2, 5), (3, 5)], 4, root=4)


def success_rates(sizes, strengths, n_models):
    rows = []
    for s, n in itertools.product(strengths, sizes):
        hits = {"nuclear norm": 0, "rank-k residual": 0}
        for seed in range(n_models):
            rng = np.random.default_rng(seed)
            model = LatentTreeModel.random(QUARTET, 2, 4, noise=0.5, random_state=seed)
            model.cpts[5] = s * np.eye(2) + (1 - s) * rng.dirichlet(np.ones(2), size=2)
            X = model.sample(n, random_state=seed + 1)
            perm = rng.permutation(4)  # the table's mode order
            mom = MomentEstimator(X.T.astype(np.int16), np.full(4, 4))
            table = quartet_tables(mom, rank=2)(tuple(perm))
            pos = {int(v): i for i, v in enumerate(perm)}
            pair = tuple(sorted((pos[0], pos[1])))
            truth = {(0, 1): 0, (2, 3): 0, (0, 2): 1, (1, 3): 1, (0, 3): 2, (1, 2): 2}[pair]
            hits["nuclear norm"] += quartet_test(table).split == truth
            hits["rank-k residual"] += quartet_test(table, rank=2).split == truth
        rows.append([f"{s:.2f}", f"{n:,}"] + [f"{h}/{n_models}" for h in hits.values()])
        print(rows[-1], flush=True)
    return markdown_table(
        ["hidden edge strength s", "N", "nuclear norm (Alg. 1)", "rank-k residual"], rows
    )


def tree_recovery(sizes, leaves, n_models, noise):
    rows = []
    for kind, d in itertools.product(("balanced", "random"), leaves):
        for n in sizes:
            res = {m: [] for m in ("quartet", "quartet tests alone", "nj", "rg")}
            tests, secs = [], []
            for seed in range(n_models):
                tree = (
                    balanced_binary_tree(d)
                    if kind == "balanced"
                    else random_binary_tree(d, random_state=seed)
                )
                model = LatentTreeModel.random(tree, 2, 4, noise=noise, random_state=seed)
                X = model.sample(n, random_state=seed + 10)
                mom = MomentEstimator(X.T.astype(np.int16), np.full(d, 4))
                (qt, info), t = timed(learn_tree_quartets, mom, 2)
                tests.append(info.n_tests)
                secs.append(t)
                D = spectral_distance(mom, 2)
                res["quartet"].append(robinson_foulds(qt, tree))
                alone, _ = learn_tree_quartets(mom, 2, local_search=False)
                res["quartet tests alone"].append(robinson_foulds(alone, tree))
                res["nj"].append(robinson_foulds(learn_tree(D, "nj", n_samples=n), tree))
                res["rg"].append(robinson_foulds(learn_tree(D, "rg", n_samples=n), tree))
            cells = [
                f"{sum(r == 0 for r in v)}/{n_models} ({np.mean(v):.1f})" for v in res.values()
            ]
            rows.append(
                [f"{kind}{d}", f"{n:,}", *cells, f"{np.mean(tests):.0f}", f"{np.mean(secs):.2f}"]
            )
            print(rows[-1], flush=True)
    header = ["tree", "N", "quartet (polished)", "quartet tree alone", "NJ", "RG"]
    return markdown_table([*header, "quartet tests", "quartet s"], rows)


def main(quick=False):
    sizes = [1_000, 10_000] if quick else [1_000, 10_000, 100_000]
    n_models = 3 if quick else 5
    rates = success_rates(sizes, [0.0, 0.5, 0.9], 8 if quick else 20)
    leaves = [16] if quick else [16, 32, 64]
    recovery = [
        f"## Tree recovery: exact / {n_models} (mean RF distance), k = 2, n = 4, noise {noise}"
        f"\n\n{tree_recovery(sizes, leaves, n_models, noise)}"
        for noise in (0.3, 0.5)
    ]
    save(
        "bench_quartet",
        f"# bench_quartet\n\nMachine: {machine()}.\n\n"
        "## Quartet-test success rate (random 4-leaf models, k = 2, n = 4)\n\n"
        f"{rates}\n\n" + "\n\n".join(recovery),
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    main(parser.parse_args().quick)
