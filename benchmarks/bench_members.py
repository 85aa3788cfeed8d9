"""How far averaging latent trees pays on the binary density benchmark: member-count curves.

The automatic fit averages at most four EM fits of one tree (``n_members="auto"``). The
published leaders average or mix many more models (a mixture of four HCLTs; mixtures of
all spanning trees, MoAT). This benchmark measures, per set, the test log-likelihood per
row of the mixture of the first ``m`` members, ``m = 1 ... M``, hidden Chow-Liu trees
(``structure="hclt"``) at one ``k'``. Every member is EM from a random start (on binary
columns the moments identify two states, and beyond them the estimators start EM at
random too), member 0 on the hidden Chow-Liu tree of all training rows:

* ``same tree, converged``: on that tree, EM to the training tolerance or the
  estimator's 300 iterations (what ``n_members=M`` with a given ``k'`` fits);
* ``same tree, stopped on valid``: on that tree, EM stopped after three readings (every
  five iterations) without a gain of the benchmark's valid log-likelihood, the best
  reading kept (the published hidden Chow-Liu trees' rule; ``n_members="auto"`` stops its
  members so on its own held-out rows);
* ``bootstrap trees, stopped on valid``: each member on the hidden Chow-Liu tree of a
  bootstrap resample of the training rows (its parameters on all of them), stopped the
  same way: members that differ in structure, as in a mixture of trees;
* ``..., EM weights``: the same members with mixture weights fitted by EM on the valid
  rows instead of equal weights.

Every member's log-likelihood is exact (a latent tree model), and so is the mixture's
(the log of the weighted mean of the members' densities). Seconds are per member.

Usage::

    python benchmarks/bench_members.py [--sets nltcs jester ...] [--k 16] [--members 8]
    python benchmarks/bench_members.py --report

Each set's result is kept in ``results/bench_members_parts/<set>-k<k>.json``;
``--report`` writes ``results/bench_members.md`` and ``bench_members.png``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from scipy.special import logsumexp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, machine, markdown_table, save  # noqa: E402

from ltm_sklearn import SpectralLatentTree  # noqa: E402
from ltm_sklearn._algorithms.em import (  # noqa: E402
    EarlyStopping,
    mixture_weights,
    node_states,
    polish,
    random_cpts,
)
from ltm_sklearn._engine.moments import MomentEstimator  # noqa: E402
from ltm_sklearn.datasets import DEBD_PUBLISHED, DEBD_SETS, load_debd  # noqa: E402
from ltm_sklearn.structure import hidden_chow_liu, mutual_information  # noqa: E402

PARTS = RESULTS / "bench_members_parts"


def curve(lls, weights=None):
    """Test log-likelihood per row of the mixture of the first ``m`` members, every
    ``m``; ``weights(m)``: the weights of the first ``m`` (default equal)."""
    out = []
    for m in range(1, len(lls) + 1):
        w = np.full(m, 1.0 / m) if weights is None else weights(m)
        out.append(float(logsumexp(lls[:m] + np.log(w)[:, None], axis=0).mean()))
    return out


def _members(est, train, valid, trees, n_members, stop):
    """The members ``(tree, root_marginal, cpts)``, member ``i`` fitted on ``trees[i]``
    (each from a random start) with EM stopped on the valid rows when ``stop``; and the
    seconds of each fit."""
    n_states = np.array([len(c) for c in est.categories_])
    codes = np.vstack([np.searchsorted(c, col) for c, col in zip(est.categories_, train.T)])
    start, tree0 = (est.root_marginal_, est.cpts_), est.tree_
    fits, seconds = [], []
    for i in range(n_members):
        tree = trees[i]
        rng = np.random.RandomState(i)
        root, cpts = random_cpts(tree, node_states(tree, n_states, est.n_hidden_states), rng)

        def score(r, c, tree=tree):
            est.tree_, est.root_marginal_, est.cpts_ = tree, r, c
            return est.score(valid)

        stopping = EarlyStopping(score, every=5, patience=3) if stop else None
        t0 = time.perf_counter()
        r, c, *_ = polish(
            tree, root, cpts, codes, np.ones(len(train)), n_states, alpha=est.alpha_,
            max_iter=est.max_iter, early_stopping=stopping,
        )  # fmt: skip
        seconds.append(time.perf_counter() - t0)
        fits.append((tree, r, c))
    est.tree_, (est.root_marginal_, est.cpts_) = tree0, start
    return fits, seconds


def _scores(est, fits, X):
    out = []
    for tree, r, c in fits:
        est.tree_, est.root_marginal_, est.cpts_ = tree, r, c
        out.append(est.score_samples(X))
    return np.array(out)


def run_set(name, k, n_members):
    train, valid, test = load_debd(name)
    record = {"set": name, "k": k, "members": n_members}
    est = SpectralLatentTree(k, structure="hclt", n_members=1, random_state=0, max_iter=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tree is what is kept of this fit
        est.fit(train)
    est.max_iter = 300  # the estimator's default: EM's budget below
    start = est.tree_, est.root_marginal_, est.cpts_
    rng, d = np.random.RandomState(0), train.shape[1]
    boot = [est.tree_]
    for _ in range(1, n_members):
        rows = rng.randint(len(train), size=len(train))
        codes = train[rows].T.astype(np.int64)
        boot.append(hidden_chow_liu(mutual_information(MomentEstimator(codes, np.full(d, 2)))))
    same = [est.tree_] * n_members
    for kind, trees, stop in [
        ("same_tree", same, False),
        ("same_tree_stopped", same, True),
        ("bootstrap_stopped", boot, True),
    ]:
        fits, seconds = _members(est, train, valid, trees, n_members, stop)
        lls_test, lls_valid = _scores(est, fits, test), _scores(est, fits, valid)
        est.tree_, est.root_marginal_, est.cpts_ = start
        record[kind] = curve(lls_test)
        record[f"{kind}_seconds"] = seconds
        if stop:
            weights = [mixture_weights(lls_valid[:m]) for m in range(1, n_members + 1)]
            record[f"{kind}_em_weights"] = curve(lls_test, lambda m, w=weights: w[m - 1])
            record[f"{kind}_weights"] = mixture_weights(lls_valid).tolist()
        print(f"{name} {kind}: {[round(v, 3) for v in record[kind]]}", flush=True)
    PARTS.mkdir(parents=True, exist_ok=True)
    (PARTS / f"{name}-k{k}.json").write_text(json.dumps(record, indent=1))
    return record


KINDS = [
    ("same_tree", "same tree, converged"),
    ("same_tree_stopped", "same tree, stopped on valid"),
    ("same_tree_stopped_em_weights", "same tree, stopped, EM weights"),
    ("bootstrap_stopped", "bootstrap trees, stopped on valid"),
    ("bootstrap_stopped_em_weights", "bootstrap trees, stopped, EM weights"),
]


def report():
    records = [json.loads(p.read_text()) for p in sorted(PARTS.glob("*.json"))]
    records.sort(key=lambda r: (DEBD_SETS.index(r["set"]), r["k"]))
    lines = [
        "# bench_members: how far averaging latent trees pays",
        "",
        f"Machine: {machine()}. Test log-likelihood per row (nats) of the average of the "
        "first m members, hidden Chow-Liu trees at one k' (see the script's docstring); "
        "published: HCLT / MT / MoAT (Selvam, Zhang & Van den Broeck, AISTATS 2023, "
        "Table 1).",
        "",
    ]
    for r in records:
        m_all = list(range(1, r["members"] + 1))
        shown = [m for m in m_all if m in (1, 2, 3, 4, 6, 8, 12, 16) or m == m_all[-1]]
        rows = [[label] + [f"{r[kind][m - 1]:.3f}" for m in shown] for kind, label in KINDS]
        pub = DEBD_PUBLISHED.get(r["set"], {})
        text = " / ".join(f"{pub[p]:.2f}" for p in ("HCLT", "MT", "MoAT") if p in pub)
        lines += [
            f"## {r['set']}, k' = {r['k']}",
            "",
            markdown_table(["members"] + [str(m) for m in shown], rows),
            "",
            "Seconds a member: "
            + ", ".join(
                f"{label} {np.mean(r[kind + '_seconds']):.0f} s"
                for kind, label in KINDS
                if kind + "_seconds" in r
            )
            + f". Published HCLT / MT / MoAT: {text}.",
            "",
        ]
    save("bench_members", "\n".join(lines))
    _plot(records)


def _plot(records):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(records), figsize=(4 * len(records), 3.4), squeeze=False)
    for ax, r in zip(axes[0], records):
        m = np.arange(1, r["members"] + 1)
        for kind, label in KINDS:
            ax.plot(m, r[kind], marker="o", ms=3, label=label)
        pub = DEBD_PUBLISHED.get(r["set"], {})
        for p, style in (("HCLT", ":"), ("MoAT", "--")):
            if p in pub:
                ax.axhline(pub[p], color="grey", ls=style, lw=1, label=f"published {p}")
        ax.set_title(f"{r['set']} (k'={r['k']})")
        ax.set_xlabel("members")
    axes[0][0].set_ylabel("test log-likelihood / row")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(RESULTS / "bench_members.png", dpi=110)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sets", nargs="+", default=list(DEBD_SETS))
    parser.add_argument("--k", type=int, default=16)
    parser.add_argument("--members", type=int, default=8)
    parser.add_argument("--report", action="store_true")
    args = parser.parse_args()
    if not args.report:
        warnings.simplefilter("ignore")
        for name in args.sets:
            if (PARTS / f"{name}-k{args.k}.json").exists():
                continue
            run_set(name, args.k, args.members)
    report()


if __name__ == "__main__":
    main()
