"""The binary density-estimation benchmark ("twenty datasets", five sets bundled).

The literature's protocol: learn on train, choose hyper-parameters on valid, report the
mean test log-likelihood per row (nats). Rows of the table, per set:

* ours, defaults with ``n_hidden_states="auto"`` (``SpectralLatentTree``: the structure,
  k' and the number of averaged EM fits chosen inside ``fit`` on a held-out share of the
  training rows), the same with one fit (``n_members=1``) and with three;
* the hidden Chow-Liu tree at fixed k' (``structure="hclt"``), k' in {16, 32} chosen on
  valid;
* a Chow-Liu tree and the independence model (ours);
* peers run side by side: pgmpy's Chow-Liu ``TreeSearch`` and a Bayesian network by
  hill climbing (BIC), each with BDeu parameters, where they finish within 10 minutes;
* the published HCLT / MT / MoAT figures (Selvam, Zhang & Van den Broeck, AISTATS 2023,
  Table 1; ``ltm_sklearn.datasets.DEBD_PUBLISHED``).

A second part measures the EM engine: one E-step on the hidden Chow-Liu tree of each set
at k' = 16-128 (float64 and float32), its multiply-adds per second against NumPy's own
matrix product on the same shapes; and time to converge from a random start, with and
without two passes of mini-batch EM first.

Usage::

    python benchmarks/bench_debd.py [--sets nltcs plants ...] [--part PART]

PART: density (ours and peers), ours, peers, engine, report, all (the default).

Each (set, model) result is kept in ``results/bench_debd_parts/`` (a re-run skips what is
there); ``--part report`` writes ``results/bench_debd.md`` and ``bench_debd.png``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, machine, markdown_table, save  # noqa: E402

from ltm_sklearn import LatentTreeEM, SpectralLatentTree  # noqa: E402
from ltm_sklearn._algorithms.em import (  # noqa: E402
    fit_em,
    minibatch_em,
    node_states,
    random_cpts,
    unique_rows,  # noqa: E402
)
from ltm_sklearn._engine.evidence import CodeEvidence  # noqa: E402
from ltm_sklearn._engine.inference import _block_rows, _plan, expected_counts  # noqa: E402
from ltm_sklearn._engine.moments import MomentEstimator  # noqa: E402
from ltm_sklearn.datasets import DEBD_PUBLISHED, DEBD_SETS, load_debd  # noqa: E402
from ltm_sklearn.structure import hidden_chow_liu, mutual_information  # noqa: E402

PARTS = RESULTS / "bench_debd_parts"
PEER_TIMEOUT = 600
HCLT_STATES = (16, 32)
#: ``n_members`` of the averaged row (EM fits from different starts averaged)
MEMBERS = 3
#: timings of the engine part: the best of this many runs
_REPEATS = 3


def _part(name):
    return PARTS / f"{name}.json"


def _done(name):
    return _part(name).exists()


def _keep(name, record):
    PARTS.mkdir(parents=True, exist_ok=True)
    _part(name).write_text(json.dumps(record, indent=1))
    print(name, record, flush=True)


# ---------------------------------------------------------------------- our models
def _ours(est, train, valid, test):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        est.fit(train)
        seconds = time.perf_counter() - t0
    return {
        "valid": est.score(valid),
        "test": est.score(test),
        "seconds": seconds,
        "k": int(est.n_hidden_states_),
        "structure": est.structure_,
        "n_iter": int(est.n_iter_),
        "n_members": int(getattr(est, "n_members_", 1)),
        "min_state_rows": float(getattr(est, "min_state_rows_", 0.0)),
        "min_state_rows_scores": {
            str(v): s for v, s in getattr(est, "min_state_rows_scores_", {}).items()
        },
    }


def run_density(name, peers=True, ours=True, hill_climbing=True):
    train, valid, test = load_debd(name)
    if not ours:
        pass
    elif not _done(f"{name}-auto"):
        est = SpectralLatentTree(n_hidden_states="auto", random_state=0)
        _keep(f"{name}-auto", _ours(est, train, valid, test))
    if ours and not _done(f"{name}-auto-one"):
        est = SpectralLatentTree(n_hidden_states="auto", n_members=1, random_state=0)
        _keep(f"{name}-auto-one", _ours(est, train, valid, test))
    if ours and not _done(f"{name}-auto-soft"):
        est = SpectralLatentTree(n_hidden_states="auto", softening="auto", random_state=0)
        record = _ours(est, train, valid, test)
        record.update(softening=est.softening_, softening_scores=est.softening_scores_)
        _keep(f"{name}-auto-soft", record)
    if ours and not _done(f"{name}-auto-members{MEMBERS}"):
        est = SpectralLatentTree(n_hidden_states="auto", n_members=MEMBERS, random_state=0)
        _keep(f"{name}-auto-members{MEMBERS}", _ours(est, train, valid, test))
    for k in HCLT_STATES if ours else ():
        if not _done(f"{name}-hclt{k}"):
            est = LatentTreeEM(k, structure="hclt", init="random", random_state=0)
            _keep(f"{name}-hclt{k}", _ours(est, train, valid, test))
    if ours and not _done(f"{name}-chow_liu"):
        est = SpectralLatentTree(2, structure="chow_liu", random_state=0)
        _keep(f"{name}-chow_liu", _ours(est, train, valid, test))
    if ours and not _done(f"{name}-independence"):
        est = SpectralLatentTree(1, structure="star", random_state=0)
        _keep(f"{name}-independence", _ours(est, train, valid, test))
    names = ("pgmpy_chow_liu", "pgmpy_hill_climbing") if hill_climbing else ("pgmpy_chow_liu",)
    for peer in names if peers else ():
        if not _done(f"{name}-{peer}"):
            _keep(f"{name}-{peer}", _with_timeout(_pgmpy, name, peer))


# ---------------------------------------------------------------------- peers
def _pgmpy(name, method, queue):
    import pandas as pd
    from pgmpy.estimators import HillClimbSearch, TreeSearch

    try:  # pgmpy >= 1.1
        from pgmpy.parameter_estimator import DiscreteBayesianEstimator

        bdeu = DiscreteBayesianEstimator(prior_type="BDeu", equivalent_sample_size=5)
    except ImportError:
        from pgmpy.estimators import BayesianEstimator as bdeu

    try:
        from pgmpy.models import DiscreteBayesianNetwork as Network
    except ImportError:  # older pgmpy
        from pgmpy.models import BayesianNetwork as Network

    train, valid, test = load_debd(name)
    cols = [f"x{j}" for j in range(train.shape[1])]
    df = pd.DataFrame(train, columns=cols).astype(str)  # categorical columns
    t0 = time.perf_counter()
    if method == "pgmpy_chow_liu":
        dag = TreeSearch(df, root_node=cols[0]).estimate(
            estimator_type="chow-liu", show_progress=False
        )
    else:
        dag = HillClimbSearch(df).estimate(scoring_method="bic-d", show_progress=False)
    model = Network(dag.edges())
    model.add_nodes_from(cols)
    model.fit(df, estimator=bdeu)
    seconds = time.perf_counter() - t0
    queue.put(
        {
            "valid": _network_log_likelihood(model, valid, cols),
            "test": _network_log_likelihood(model, test, cols),
            "seconds": seconds,
            "edges": len(dag.edges()),
        }
    )


def _network_log_likelihood(model, X, cols):
    """Mean log-likelihood per row of a discrete Bayesian network's CPDs."""
    index = {c: j for j, c in enumerate(cols)}
    total = np.zeros(X.shape[0])
    for cpd in model.get_cpds():
        values = np.asarray(cpd.values)
        position = []
        for v in cpd.variables:
            states = list(cpd.state_names[v])
            lookup = {s: i for i, s in enumerate(states)}
            position.append(np.array([lookup[str(x)] for x in X[:, index[v]].tolist()]))
        total += np.log(values[tuple(position)])
    return float(total.mean())


def _with_timeout(func, name, method):
    """``func`` in a child process; its result, or a timeout after ``PEER_TIMEOUT``.

    The result is read before the child is joined: a child that used joblib's worker
    processes can hang on exit after it has answered."""
    import queue as queues

    results = mp.Queue()
    proc = mp.Process(target=func, args=(name, method, results))
    t0 = time.perf_counter()
    proc.start()
    try:
        out = results.get(timeout=PEER_TIMEOUT)
    except queues.Empty:
        out = {"timeout": PEER_TIMEOUT} if proc.is_alive() else {"error": "no result"}
        out["seconds"] = time.perf_counter() - t0
    proc.terminate()
    proc.join(5)
    return out


# ---------------------------------------------------------------------- the EM engine
def _hclt(name):
    train, _, _ = load_debd(name)
    d = train.shape[1]
    codes = train.T.astype(np.int64)
    tree = hidden_chow_liu(mutual_information(MomentEstimator(codes, np.full(d, 2))))
    c, w = unique_rows(codes, np.ones(train.shape[0]))
    return tree, CodeEvidence(c, np.full(d, 2)), w, d


def _numpy_rate(k, rows, dtype, repeat=50, batches=20):
    """Multiply-adds per second of NumPy's ``(k x k) @ (k x rows)`` (single-threaded BLAS,
    as the engine runs it): the best of ``batches`` batches of ``repeat`` products. A
    product takes 0.1-0.3 ms, and the best of 3 batches of 20 moved by a third between
    runs minutes apart (48-65 GFLOP/s at k' = 32); the best of 20 batches of 50 moved by
    1-8% over five runs, and its higher rate makes the share conservative."""
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)
    A = rng.random((k, k)).astype(dtype)
    B = rng.random((k, rows)).astype(dtype)
    with threadpool_limits(1, user_api="blas"):
        A @ B
        times = []
        for _ in range(batches):
            t0 = time.perf_counter()
            for _ in range(repeat):
                A @ B
            times.append((time.perf_counter() - t0) / repeat)
    return 2.0 * k * k * rows / min(times)


def run_engine(name):
    key = f"{name}-engine"
    if _done(key):
        return
    tree, ev, w, d = _hclt(name)
    n = ev.n_rows
    records = []
    for k in (16, 32, 64, 128):
        n_states = node_states(tree, np.full(d, 2), k)
        root, cpts = random_cpts(tree, n_states, 0)
        hidden_edges = sum(1 for u in cpts if u >= d)
        # products of one E-step: k x k tables times k x rows messages, three per
        # hidden edge (upward message, downward message, expected counts)
        flops = 3 * 2.0 * k * k * n * hidden_edges
        for dtype in (np.float64, np.float32):
            expected_counts(tree, root, cpts, ev, w, dtype=dtype)
            times = []
            for _ in range(_REPEATS):  # the best of a few: other jobs on the machine
                t0 = time.perf_counter()
                expected_counts(tree, root, cpts, ev, w, dtype=dtype)
                times.append(time.perf_counter() - t0)
            seconds = min(times)
            rate = flops / seconds
            numpy_rate = _numpy_rate(k, _block_rows(_plan(tree, root, cpts)), dtype)
            records.append(
                {
                    "k": k,
                    "dtype": np.dtype(dtype).name,
                    "seconds": seconds,
                    "gflops": rate / 1e9,
                    "numpy_gflops": numpy_rate / 1e9,
                    "share": rate / numpy_rate,
                }
            )
    converge = []
    for k in (16, 32):
        n_states = node_states(tree, np.full(d, 2), k)
        for epochs in (0, 2):
            root, cpts = random_cpts(tree, n_states, 0)
            t0 = time.perf_counter()
            updates = 0
            if epochs:
                root, cpts, updates = minibatch_em(
                    tree,
                    root,
                    cpts,
                    ev,
                    w,
                    alpha=0.5,
                    n_epochs=epochs,
                    batch_size=1024,
                    random_state=0,
                    dtype=np.float32,
                )
            root, cpts, objective, n_iter, converged, _ = fit_em(
                tree, root, cpts, ev, w, alpha=0.5, max_iter=500, tol=1e-4, dtype=np.float32
            )
            converge.append(
                {
                    "k": k,
                    "minibatch_epochs": epochs,
                    "updates": updates,
                    "full_iterations": n_iter,
                    "converged": converged,
                    "seconds": time.perf_counter() - t0,
                    "objective": objective,
                }
            )
    _keep(key, {"rows": n, "estep": records, "converge": converge})


# ---------------------------------------------------------------------- report
def _load(name):
    return json.loads(_part(name).read_text()) if _done(name) else None


def _fmt(record, field="test"):
    if record is None:
        return "not run"
    if "timeout" in record:
        return f"> {record['timeout'] // 60} min"
    if "error" in record:
        return "failed"
    return f"{record[field]:.3f}"


def report(sets):
    rows = []
    times = []
    for name in sets:
        pub = DEBD_PUBLISHED[name]
        auto = _load(f"{name}-auto")
        one = _load(f"{name}-auto-one")
        members = _load(f"{name}-auto-members{MEMBERS}")
        hclt = [r for k in HCLT_STATES if (r := _load(f"{name}-hclt{k}")) is not None]
        best_hclt = max(hclt, key=lambda r: r["valid"]) if hclt else None
        rec = {m: _load(f"{name}-{m}") for m in ("chow_liu", "independence")}
        peers = {m: _load(f"{name}-{m}") for m in ("pgmpy_chow_liu", "pgmpy_hill_climbing")}
        pruned = auto.get("min_state_rows", 0.0) if auto else 0.0
        pruned = f", hidden states of < {pruned:g} rows removed" if pruned else ""
        chosen = (
            f" (k'={auto['k']}, {auto['structure']}, members: {auto.get('n_members', 1)}{pruned})"
            if auto
            else ""
        )
        hclt_k = f" (k'={best_hclt['k']})" if best_hclt else ""
        rows.append(
            [
                name,
                _fmt(auto) + chosen,
                _fmt(one),
                _fmt(members),
                _fmt(best_hclt) + hclt_k,
                _fmt(rec["chow_liu"]),
                _fmt(rec["independence"]),
                _fmt(peers["pgmpy_chow_liu"]),
                _fmt(peers["pgmpy_hill_climbing"]),
                f"{pub['HCLT']:.2f} / {pub['MT']:.2f} / {pub['MoAT']:.2f}",
            ]
        )

        def sec(r):
            return "-" if r is None or "seconds" not in r else f"{r['seconds']:.0f}"

        times.append(
            [
                name,
                sec(auto),
                sec(one),
                sec(members),
                sec(best_hclt),
                sec(rec["chow_liu"]),
                sec(peers["pgmpy_chow_liu"]),
                sec(peers["pgmpy_hill_climbing"]),
            ]
        )
    text = [
        "# bench_debd: the binary density-estimation benchmark",
        "",
        f"Machine: {machine()}. Learn on train, test log-likelihood per row (nats); "
        "published: HCLT / mixture of trees / mixture of all trees (Selvam, Zhang & Van "
        "den Broeck, AISTATS 2023, Table 1).",
        "",
        markdown_table(
            [
                "set",
                "ours: defaults, n_hidden_states='auto'",
                "the same, one fit (n_members=1)",
                f"the same, n_members={MEMBERS}",
                "hidden Chow-Liu tree, k' on valid",
                "Chow-Liu (ours)",
                "independence",
                "pgmpy Chow-Liu",
                "pgmpy hill climbing (BIC)",
                "published HCLT / MT / MoAT",
            ],
            rows,
        ),
        "",
        "Fit seconds (k' choice included). Each (set, model) is kept from the run that made "
        "it: the columns were not all measured in one run (the defaults column with the "
        "current code, one set at a time; the n_members=3 column with earlier code, two "
        "sets at a time with single-threaded BLAS; the one-fit column earlier still, with "
        "other benchmarks sharing the two cores), so compare times within a column:",
        "",
        markdown_table(
            [
                "set",
                "ours auto",
                "one fit",
                f"n_members={MEMBERS}",
                "HCLT (chosen k')",
                "Chow-Liu",
                "pgmpy CL",
                "pgmpy HC",
            ],
            times,
        ),
    ]
    # the regularisers: the defaults (bench_speed.py's `after` rows, run in the same
    # session) against the same fit with softening="auto"
    soft_rows = []
    for name in sets:
        soft = _load(f"{name}-auto-soft")
        speed = RESULTS / "bench_speed_parts" / f"after-debd-{name}.json"
        plain = json.loads(speed.read_text()) if speed.exists() else None
        if soft is None:
            continue
        pub = DEBD_PUBLISHED[name]
        tried = ", ".join(f"{float(v):g}: {s:.4f}" for v, s in soft["softening_scores"].items())
        soft_rows.append(
            [
                name,
                "not run" if plain is None else f"{plain['test']:.3f} ({plain['seconds']:.0f} s)",
                f"{soft['test']:.3f} ({soft['seconds']:.0f} s)",
                f"{soft['softening']:g}",
                tried,
                f"{pub['HCLT']:.2f}",
            ]
        )
    if soft_rows:
        text += [
            "",
            "## Data softening",
            "",
            "The defaults against the same fit with `softening='auto'` (Liu & Van den Broeck, "
            "NeurIPS 2021: each observed value soft evidence; none, then 1/4096 doubled "
            "while the held-out score of the selection's split gains), test log-likelihood "
            "per row and fit seconds; the held-out score of every value tried (validation "
            "rows of the fit's own split, not the benchmark's valid split). Both columns "
            "come from one session with an earlier version (commit e479618; the defaults "
            "from `bench_speed.py`'s `after` cells), so their defaults differ from the "
            "first table's:",
            "",
            markdown_table(
                [
                    "set",
                    "defaults",
                    "softening='auto'",
                    "softening chosen",
                    "held-out per softening",
                    "published HCLT",
                ],
                soft_rows,
            ),
        ]
    engine_rows, conv_rows = [], []
    for name in sets:
        eng = _load(f"{name}-engine")
        if eng is None:
            continue
        for r in eng["estep"]:
            engine_rows.append(
                [
                    name,
                    r["k"],
                    r["dtype"],
                    f"{r['seconds']:.3f}",
                    f"{r['gflops']:.1f}",
                    f"{r['numpy_gflops']:.1f}",
                    f"{r['share']:.2f}",
                ]
            )
        for r in eng["converge"]:
            conv_rows.append(
                [
                    name,
                    r["k"],
                    r["minibatch_epochs"],
                    r["updates"],
                    r["full_iterations"],
                    f"{r['seconds']:.1f}",
                    f"{r['objective']:.4f}",
                ]
            )
    if engine_rows:
        text += [
            "",
            "## The EM engine",
            "",
            "One E-step on the hidden Chow-Liu tree of the set (distinct training rows), "
            "single-threaded; GFLOP/s counts the matrix products (3 per hidden edge, "
            "2 k'^2 per row each) and is set against NumPy's own (k' x k') @ (k' x block) "
            "product at the engine's block size (the E-step: the best of three runs; NumPy: "
            "the best of 20 batches of 50 products).",
            "",
            markdown_table(
                ["set", "k'", "dtype", "seconds", "GFLOP/s", "NumPy GFLOP/s", "share"],
                engine_rows,
            ),
            "",
            "Time to converge (tol 1e-4 nats/row) from a random start, float32, with and "
            "without mini-batch EM passes (batches of 1,024 rows) first:",
            "",
            markdown_table(
                [
                    "set",
                    "k'",
                    "mini-batch passes",
                    "mini-batch updates",
                    "full-batch iterations",
                    "seconds",
                    "objective",
                ],
                conv_rows,
            ),
        ]
    save("bench_debd", "\n".join(text))
    _plot(sets)


def _plot(sets):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    labels = [
        "ours auto (members chosen)",
        "ours auto, one fit",
        "HCLT (ours)",
        "Chow-Liu",
        "published HCLT",
        "published best",
    ]
    for i, name in enumerate(sets):
        pub = DEBD_PUBLISHED[name]
        ref = pub["HCLT"]
        auto = _load(f"{name}-auto")
        hclt = [r for k in HCLT_STATES if (r := _load(f"{name}-hclt{k}")) is not None]
        best_hclt = max(hclt, key=lambda r: r["valid"]) if hclt else None
        cl = _load(f"{name}-chow_liu")
        one = _load(f"{name}-auto-one")
        values = [
            auto["test"] if auto else np.nan,
            one["test"] if one else np.nan,
            best_hclt["test"] if best_hclt else np.nan,
            cl["test"] if cl else np.nan,
            ref,
            max(pub.values()),
        ]
        for j, v in enumerate(values):
            ax.bar(
                i + 0.13 * (j - 2.5),
                v - ref,
                width=0.13,
                color=f"C{j}",
                label=labels[j] if i == 0 else None,
            )
    ax.axhline(0, color="k", lw=0.5)
    ax.set_xticks(range(len(sets)), sets)
    ax.set_ylabel("test log-likelihood - published HCLT (nats/row)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(RESULTS / "bench_debd.png", dpi=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=list(DEBD_SETS))
    parser.add_argument(
        "--part", choices=("density", "ours", "peers", "engine", "report", "all"), default="all"
    )
    parser.add_argument(
        "--no-hill-climbing", action="store_true", help="skip pgmpy's hill climbing"
    )
    args = parser.parse_args()
    for name in args.sets:
        if args.part in ("density", "all", "ours", "peers"):
            run_density(
                name,
                peers=args.part != "ours",
                ours=args.part != "peers",
                hill_climbing=not args.no_hill_climbing,
            )
        if args.part in ("engine", "all"):
            run_engine(name)
    report(list(DEBD_SETS))


if __name__ == "__main__":
    main()
