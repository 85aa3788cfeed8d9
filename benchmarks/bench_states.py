"""Hidden nodes with their own numbers of states: ``min_state_rows="auto"`` against every
state kept (``min_state_rows=0``).

``SpectralLatentTree(n_hidden_states="auto")`` (the automatic fit) with the default
``min_state_rows="auto"`` and with ``0``, on the digits demo's rows (pixels cut into three
levels, 70/30 split, ``random_state`` 0-7) and on the categorical tables bundled with the
package (their categorical columns, one stratified 70/30 split each): test
log-likelihood per row, the threshold the held-out rows chose, the share of the hidden
states kept, and the fit seconds of both. The plot shows the states kept by each hidden
node of the digits fit with ``random_state=0``.

    python benchmarks/bench_states.py [--seeds 0 1 ...] [--tables breast car ...]

Writes ``results/bench_states.md`` and ``results/bench_states.png``.
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from _common import RESULTS, machine, markdown_table, save, timed
from sklearn.model_selection import train_test_split

from ltm_sklearn import SpectralLatentTree

TABLES = ["breast", "monk2", "car", "lymphography", "contraceptive", "german", "marketing"]


def _digits():
    from sklearn.datasets import load_digits

    digits = load_digits()
    X = np.digitize(digits.data, [1, 9])
    return train_test_split(X, test_size=0.3, stratify=digits.target, random_state=0)


def _table(name):
    from bench_real import load

    X, y = load(name)
    tr, te = train_test_split(np.arange(len(y)), test_size=0.3, stratify=y, random_state=0)
    X = X.astype(str)
    return X.iloc[tr], X.iloc[te]


def _pair(X_train, X_test, seed):
    out = {}
    for label, value in (("auto", "auto"), ("none", 0.0)):
        est = SpectralLatentTree(n_hidden_states="auto", min_state_rows=value, random_state=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _, seconds = timed(est.fit, X_train)
            test = float(est.score(X_test))
        full = est.n_members_ * est.n_hidden_states_ * len(est.tree_.hidden_nodes)
        out[label] = {
            "test": test,
            "seconds": seconds,
            "rows": est.min_state_rows_,
            "kept": float(est.hidden_state_counts_.sum() / full) if full else 1.0,
            "counts": est.hidden_state_counts_.tolist(),
            "model": f"k'={est.n_hidden_states_}, {est.structure_}, {est.n_members_} members",
        }
    return out


def _plot(counts, total, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.bar(range(len(counts)), sorted(counts, reverse=True), color="tab:blue")
    ax.axhline(total, color="grey", ls="--", label=f"before: {total} states a node")
    ax.set_xlabel("hidden node (sorted by states kept)")
    ax.set_ylabel("states kept")
    ax.set_title("digits demo, random_state=0: states per hidden node after min_state_rows")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", nargs="+", type=int, default=list(range(8)))
    parser.add_argument("--tables", nargs="*", default=TABLES)
    args = parser.parse_args()
    results = {}
    for seed in args.seeds:
        results[f"digits@{seed}"] = _pair(*_digits(), seed)
        print(f"digits@{seed}", {k: v["test"] for k, v in results[f"digits@{seed}"].items()})
    for name in args.tables:
        results[name] = _pair(*_table(name), 0)
        print(name, {k: v["test"] for k, v in results[name].items()})
    rows = []
    for name, r in results.items():
        auto, none = r["auto"], r["none"]
        rows.append(
            [
                name,
                none["model"],
                f"{none['test']:.4f}",
                f"{auto['test']:.4f}",
                f"{auto['test'] - none['test']:+.4f}",
                f"{auto['rows']:g}",
                f"{auto['kept']:.2f}",
                f"{none['seconds']:.1f}",
                f"{auto['seconds']:.1f}",
            ]
        )
    gains = [r["auto"]["test"] - r["none"]["test"] for r in results.values()]
    text = "\n\n".join(
        [
            "# Hidden nodes with their own numbers of states",
            f"Machine: {machine()}. `python benchmarks/bench_states.py`. "
            "`SpectralLatentTree(n_hidden_states='auto')` with `min_state_rows='auto'` "
            "(the default) and `0` (every state kept); test log-likelihood per row; the "
            "threshold chosen on the fit's held-out rows (expected training rows of a "
            "state); the share of the hidden states kept (of `n_members_ * k'` a hidden "
            "node); fit seconds of each, run one after the other. The model (k', "
            "structure, members) is the one of `0`; `auto` chooses the same, as the "
            "threshold is chosen after it.",
            markdown_table(
                [
                    "data",
                    "model",
                    "test, every state",
                    "test, auto",
                    "gain",
                    "rows chosen",
                    "states kept",
                    "fit s, every state",
                    "fit s, auto",
                ],
                rows,
            ),
            f"Gain per row: min {min(gains):+.4f}, median {float(np.median(gains)):+.4f}, "
            f"max {max(gains):+.4f}; lower on {sum(g < -1e-9 for g in gains)} of "
            f"{len(gains)}.",
        ]
    )
    save("bench_states", text)
    if "digits@0" in results:
        r = results["digits@0"]["auto"]
        total = results["digits@0"]["none"]["counts"][0]
        _plot(r["counts"], total, RESULTS / "bench_states.png")


if __name__ == "__main__":
    main()
