"""Regularisers of EM on the binary density benchmark: the Dirichlet prior, data
softening and entropy regularisation, on and off.

Liu & Van den Broeck, "Tractable Regularization of Probabilistic Circuits" (NeurIPS
2021) train their hidden Chow-Liu trees with data softening (every observed value soft
evidence) and entropy regularisation (the entropy of the model's complete data added to
the objective, section 4), and report the gains largest on sets with few rows. Here,
per set, EM runs on the hidden Chow-Liu tree at ``k' = 16`` from one random start (the
same start for every row of the table: on binary columns the moments identify two states,
and beyond them the estimators start EM at random too), on 1,600 training rows drawn
at random (the size of the benchmark's small sets, where a regulariser pays most) and
on all training rows, with:

* ``prior``: the default Dirichlet pseudo-count (``alpha = 0.5``), nothing else;
* ``prior + entropy t``: with the entropy regulariser of strength ``t`` (nats of
  objective per nat of entropy; :func:`~ltm_sklearn._algorithms.em.fit_em`);
* ``prior + softening s``: with data softening ``s``;
* ``entropy t`` / ``none``: without the Dirichlet prior.

Scores are valid and test log-likelihoods per row (nats), exact; seconds are EM's.

A second table (``--part auto``) runs the automatic fit,
``SpectralLatentTree(n_hidden_states="auto")``, on the same rows with ``entropy`` 0 (the
default), a fixed 0.003 (the regulariser through the whole selection) and ``"auto"``
(chosen after the model, see ``select_entropy``): test log-likelihood and fit seconds.

Usage::

    python benchmarks/bench_regularisers.py [--sets nltcs plants ...] [--rows 1600 0]
        [--part em|auto]
    python benchmarks/bench_regularisers.py --report

``--rows 0`` means all training rows. Results are kept in
``results/bench_regularisers_parts/``; ``--report`` writes ``bench_regularisers.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, machine, markdown_table, save  # noqa: E402

from ltm_sklearn import SpectralLatentTree  # noqa: E402
from ltm_sklearn._algorithms.em import node_states, polish, random_cpts  # noqa: E402
from ltm_sklearn.datasets import DEBD_SETS, load_debd  # noqa: E402

PARTS = RESULTS / "bench_regularisers_parts"
K = 16
MAX_ITER = 300
#: (label, alpha, softening, entropy)
CONFIGS = [
    ("prior", 0.5, 0.0, 0.0),
    ("prior + entropy 0.001", 0.5, 0.0, 1e-3),
    ("prior + entropy 0.01", 0.5, 0.0, 1e-2),
    ("prior + softening 1/1024", 0.5, 1.0 / 1024, 0.0),
    ("entropy 0.01", 0.0, 0.0, 1e-2),
    ("none", 0.0, 0.0, 0.0),
]


def run(name, n_rows):
    train, valid, test = load_debd(name)
    if n_rows:
        train = train[np.random.RandomState(0).permutation(len(train))[:n_rows]]
    est = SpectralLatentTree(K, structure="hclt", n_members=1, random_state=0, max_iter=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tree is what is kept of this fit
        est.fit(train)
    n_states = np.array([len(c) for c in est.categories_])
    start = random_cpts(est.tree_, node_states(est.tree_, n_states, K), np.random.RandomState(0))
    codes = np.vstack([np.searchsorted(c, col) for c, col in zip(est.categories_, train.T)])
    out = {"set": name, "rows": len(train), "k": K, "results": {}}
    for label, alpha, softening, entropy in CONFIGS:
        t0 = time.perf_counter()
        root, cpts, _, n_iter, converged, _, _ = polish(
            est.tree_, *start, codes, np.ones(len(train)), n_states, alpha=alpha,
            softening=softening, max_iter=MAX_ITER, entropy=entropy,
        )  # fmt: skip
        seconds = time.perf_counter() - t0
        est.root_marginal_, est.cpts_ = root, cpts
        out["results"][label] = {
            "valid": float(est.score(valid)),
            "test": float(est.score(test)),
            "seconds": seconds,
            "n_iter": int(n_iter),
            "converged": bool(converged),
        }
        print(f"{name} ({len(train)} rows) {label}: {out['results'][label]}", flush=True)
    PARTS.mkdir(parents=True, exist_ok=True)
    (PARTS / f"{name}-{n_rows}.json").write_text(json.dumps(out, indent=1))


AUTO_ENTROPY = (0.0, 0.003, "auto")


def run_auto(name, n_rows):
    train, valid, test = load_debd(name)
    if n_rows:
        train = train[np.random.RandomState(0).permutation(len(train))[:n_rows]]
    out = {"set": name, "rows": len(train), "results": {}}
    for entropy in AUTO_ENTROPY:
        t0 = time.perf_counter()
        est = SpectralLatentTree(n_hidden_states="auto", entropy=entropy, random_state=0)
        est.fit(train)
        out["results"][str(entropy)] = {
            "test": float(est.score(test)),
            "seconds": time.perf_counter() - t0,
            "k": int(est.n_hidden_states_),
            "members": int(est.n_members_),
            "entropy_": float(est.entropy_),
        }
        print(f"{name} ({len(train)} rows) auto, entropy={entropy}: {out['results'][str(entropy)]}")
    PARTS.mkdir(parents=True, exist_ok=True)
    (PARTS / f"auto-{name}-{n_rows}.json").write_text(json.dumps(out, indent=1))


def report():
    records = [json.loads(p.read_text()) for p in sorted(PARTS.glob("*.json"))]
    autos = [r for r in records if "k" not in r]
    records = [r for r in records if "k" in r]
    autos.sort(key=lambda r: (r["rows"] > 1600, DEBD_SETS.index(r["set"])))
    records.sort(key=lambda r: (r["rows"] > 1600, DEBD_SETS.index(r["set"])))
    rows = []
    for r in records:
        res = r["results"]
        best = max(res, key=lambda c: res[c]["valid"])
        cells = []
        for label, *_ in CONFIGS:
            v = res[label]
            mark = " **(valid best)**" if label == best else ""
            cells.append(f"{v['test']:.3f} ({v['seconds']:.0f} s){mark}")
        rows.append([r["set"], f"{r['rows']:,}"] + cells)
    text = "\n".join(
        [
            "# bench_regularisers: the Dirichlet prior, data softening and entropy regularisation",
            "",
            f"Machine: {machine()}. EM on the hidden Chow-Liu tree at k' = {K} from one "
            f"random start (at most {MAX_ITER} iterations); test log-likelihood per row "
            "(nats) and EM seconds; the configuration of the best valid score is marked.",
            "",
            markdown_table(["set", "training rows"] + [c[0] for c in CONFIGS], rows),
        ]
    )
    if autos:
        rows = []
        for r in autos:
            res = r["results"]
            cells = []
            for e in AUTO_ENTROPY:
                v = res[str(e)]
                chosen = f", chose {v['entropy_']:g}" if e == "auto" else ""
                cells.append(
                    f"{v['test']:.3f} ({v['seconds']:.0f} s; k'={v['k']}, "
                    f"{v['members']} members{chosen})"
                )
            rows.append([r["set"], f"{r['rows']:,}"] + cells)
        text += "\n\n" + "\n".join(
            [
                "## The automatic fit with entropy regularisation",
                "",
                '`SpectralLatentTree(n_hidden_states="auto", entropy=...)` on the same '
                "rows: test log-likelihood per row, fit seconds and the choices.",
                "",
                markdown_table(
                    ["set", "training rows"] + [f"entropy={e}" for e in AUTO_ENTROPY], rows
                ),
            ]
        )
    save("bench_regularisers", text)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sets", nargs="+", default=list(DEBD_SETS))
    parser.add_argument("--rows", nargs="+", type=int, default=[1600])
    parser.add_argument("--part", choices=["em", "auto"], default="em")
    parser.add_argument("--report", action="store_true")
    args = parser.parse_args()
    if not args.report:
        warnings.simplefilter("ignore")
        for n_rows in args.rows:
            for name in args.sets:
                if args.part == "em" and not (PARTS / f"{name}-{n_rows}.json").exists():
                    run(name, n_rows)
                if args.part == "auto" and not (PARTS / f"auto-{name}-{n_rows}.json").exists():
                    run_auto(name, n_rows)
    report()


if __name__ == "__main__":
    main()
