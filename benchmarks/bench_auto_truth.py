"""Does ``n_hidden_states="auto"`` land on the true number of hidden states?

Ground truths of the tests (``tests/test_selection.py``): an 8-leaf balanced binary tree
with k = 3 hidden states and 3, 4 or 5 categories per column
(``LatentTreeModel.random``, ``random_state`` = seed), 20,000 training rows and 2,000
test rows; ``SpectralLatentTree(n_hidden_states="auto", tree=<the true tree>,
n_members=1, random_state=0)``. A fit counts as right when it chose k' = 3, or k' = 4
within 1e-3 nats per row of k' = 3 on its held-out rows (the tests' rule); 'gap' is the
truth's test log-likelihood per row minus the fit's.

Usage::

    python benchmarks/bench_auto_truth.py --label now [--seeds 12]
    python benchmarks/bench_auto_truth.py --report

Each run stores ``results/bench_auto_truth_parts/<label>.json``; ``--report`` writes
``results/bench_auto_truth.md`` with every label. To measure an earlier version run the
script with ``PYTHONPATH`` pointing at a checkout of it and another ``--label``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, machine, markdown_table, save  # noqa: E402

PARTS = RESULTS / "bench_auto_truth_parts"
STATES = (3, 4, 5)


def run(seeds):
    from ltm_sklearn import SpectralLatentTree
    from ltm_sklearn.datasets import LatentTreeModel, balanced_binary_tree

    rows = []
    for states in STATES:
        for seed in range(seeds):
            model = LatentTreeModel.random(balanced_binary_tree(8), 3, states, random_state=seed)
            X, X_test = (
                model.sample(20_000, random_state=seed),
                model.sample(2000, random_state=seed + 1),
            )
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est = SpectralLatentTree(
                    n_hidden_states="auto", tree=model.tree, n_members=1, random_state=0
                ).fit(X)
            seconds = time.perf_counter() - t0
            scores = est.n_hidden_states_scores_
            k = int(est.n_hidden_states_)
            right = k == 3 or (k == 4 and scores[4] - scores[3] < 1e-3)
            gap = float(model.log_likelihood(X_test).mean() - est.score(X_test))
            rows.append(
                dict(states=states, seed=seed, k=k, right=bool(right), gap=gap, seconds=seconds)
            )
            print(json.dumps(rows[-1]), flush=True)
    return rows


def report():
    parts = sorted(PARTS.glob("*.json"), key=lambda p: p.stat().st_mtime)
    table = []
    for path in parts:
        part = json.loads(path.read_text())
        for states in STATES:
            rs = [r for r in part["rows"] if r["states"] == states]
            wrong = [f"seed {r['seed']}: k'={r['k']}" for r in rs if not r["right"]]
            table.append(
                [
                    f"{part['label']} ({part['commit']})",
                    states,
                    f"{sum(r['right'] for r in rs)} of {len(rs)}",
                    sum(r["k"] == 3 for r in rs),
                    f"{np.mean([r['gap'] for r in rs]):.4f}",
                    f"{max(r['gap'] for r in rs):.4f}",
                    f"{np.mean([r['seconds'] for r in rs]):.2f}",
                    ", ".join(wrong) or "-",
                ]
            )
    text = "\n\n".join(
        [
            "# n_hidden_states='auto' on ground truths with k = 3",
            f"Machine: {machine()}. 8-leaf balanced binary trees with k = 3 hidden states, "
            "20,000 training rows, seeds 0-11 per category count; "
            "`SpectralLatentTree(n_hidden_states='auto', tree=<true tree>, n_members=1, "
            "random_state=0)`. 'right': k' = 3, or k' = 4 within 1e-3 nats per row of k' = 3 "
            "on the fit's held-out rows; 'gap': the truth's test log-likelihood per row minus "
            "the fit's. Labels: the code measured (commit); all labels ran in one session.",
            markdown_table(
                [
                    "code",
                    "categories",
                    "right",
                    "k' = 3",
                    "mean gap",
                    "largest gap",
                    "fit s",
                    "wrong",
                ],
                table,
            ),
        ]
    )
    save("bench_auto_truth", text)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--label", default="now")
    parser.add_argument("--seeds", type=int, default=12)
    parser.add_argument("--report", action="store_true")
    args = parser.parse_args()
    if args.report:
        report()
        return
    import ltm_sklearn

    root = Path(ltm_sklearn.__file__).resolve().parent.parent
    commit = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    rows = run(args.seeds)
    PARTS.mkdir(parents=True, exist_ok=True)
    (PARTS / f"{args.label}.json").write_text(
        json.dumps({"label": args.label, "commit": commit, "rows": rows}, indent=1)
    )
    report()


if __name__ == "__main__":
    main()
