"""Time to a result of the automatic fit, with its held-out score, before and after.

Rows (each a default fit with ``n_hidden_states="auto"`` unless said otherwise):

* ``digits``: the digits demo's fit (``examples/demo_digits.py``),
  ``SpectralLatentTree(n_hidden_states="auto", random_state=0)`` on scikit-learn's digits
  cut into three grey levels (1,257 training rows x 64 columns), scored on the demo's 30%
  test rows; beside it the GMM BIC grid a user would run instead (``GaussianMixture``,
  1-10 components, full covariances, on the same rows as numbers);
* ``grid-digits``: the demo's grid search over ``k'`` on the same rows,
  ``GridSearchCV(SpectralLatentTree(structure="nj"), {"n_hidden_states": [1, 2, 3, 4]},
  cv=5, n_jobs=-1)`` (20 fits at a given ``k'``), scored with the best estimator;
* ``debd-<set>``: the density benchmark's sets (train split, scored on test);
* ``truth-k3``: an 8-leaf ground truth with k = 3 hidden states and 4 categories
  (20,000 rows): the chosen k' (the truth is 3) and the gap to the true model's
  test log-likelihood.

Rows set against what a user runs instead (``--vs``), each on one 70/30 split of a table
(``spectral-1e5``: rows sampled from its ground truth):

* ``spectral-1e5``: ``SpectralLatentTree(2, tree=...)`` on 100,000 rows of a 16-leaf
  ground truth (k = 2, 4 categories) against the raw spectral fit (Parikh, Song & Xing
  (ICML 2011)'s observable representation alone), with the gap to the truth's test
  log-likelihood; the median of five fits of each, alternating;
* ``gauss-<table>``: ``GaussianLatentTree()`` on a numeric table (standardised columns)
  against the ``GaussianMixture`` BIC grid (1-5 components, full covariances);
* ``clf-<table>``: ``LatentTreeClassifier(n_hidden_states="auto")`` on a bundled
  categorical table against ``CategoricalNB`` and a one-hot ``LogisticRegression``
  (test log-loss); the median of three fits of each.

Usage::

    python benchmarks/bench_speed.py --label after [--rows digits debd-nltcs ...]
    python benchmarks/bench_speed.py --report

Each run stores ``results/bench_speed_parts/<label>-<row>.json``; ``--report`` writes
``results/bench_speed.md`` with every label side by side. To measure an earlier version
run the script with ``PYTHONPATH`` pointing at a checkout of it and another ``--label``.
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

PARTS = RESULTS / "bench_speed_parts"
ROWS = ("digits", "gmm-digits", "grid-digits", "truth-k3") + tuple(
    f"debd-{s}" for s in ("nltcs", "plants", "baudio", "jester", "bnetflix")
)
NUMERIC = ("breast cancer", "wine", "wdbc", "magic", "segment", "pima")
CATEGORICAL = ("breast", "monk2", "car", "lymphography", "contraceptive", "german", "marketing")
#: the labels of the main table (the digits summary lists every label measured)
REPORTED = ("before", "float32", "now", "grid", "workers", "states", "rerun", "epyc", "lsq")
VS_ROWS = (
    ("spectral-1e5",)
    + tuple(f"gauss-{t}" for t in NUMERIC)
    + tuple(f"clf-{t}" for t in CATEGORICAL)
)


def _digits():
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    X = np.digitize(digits.data, [1, 9])
    return train_test_split(X, test_size=0.3, stratify=digits.target, random_state=0)


def _fit(est, X_train, X_test):
    warned = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        est.fit(X_train)
        seconds = time.perf_counter() - t0
        warned = sorted({type(w.message).__name__ for w in caught})
    return {
        "seconds": seconds,
        "test": float(est.score(X_test)),
        "k": int(getattr(est, "n_hidden_states_", 0)),
        "structure": str(getattr(est, "structure_", "")),
        "n_members": int(getattr(est, "n_members_", 1)),
        "n_iter": int(getattr(est, "n_iter_", 0)),
        "warnings": warned,
    }


def _timed(fit, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        out = fit(*args)
        return out, time.perf_counter() - t0


def run_vs(row):
    """``{"ours": {...}, <baseline>: {...}}``, each with ``seconds`` and ``test``."""
    from sklearn.model_selection import train_test_split

    if row == "spectral-1e5":
        from _common import raw_spectral_fit

        from ltm_sklearn import SpectralLatentTree
        from ltm_sklearn.datasets import LatentTreeModel, balanced_binary_tree

        tree = balanced_binary_tree(16)
        model = LatentTreeModel.random(tree, 2, 4, random_state=0)
        X, X_test = model.sample(100_000, random_state=100), model.sample(5_000, random_state=1)
        truth = float(model.log_likelihood(X_test).mean())
        # sub-second fits: the median of five, alternating (the machine's speed drifts)
        ours, raw = [], []
        for _ in range(5):
            est, seconds = _timed(SpectralLatentTree(2, tree=tree, random_state=0).fit, X)
            ours.append(seconds)
            (_, raw_s, score), _ = _timed(raw_spectral_fit, X, 2, tree)
            raw.append(raw_s)
        ours, raw_s = float(np.median(ours)), float(np.median(raw))
        sign, logabs = score(X_test)
        raw_ll = np.where(sign > 0, logabs, np.log(1e-300))
        return {
            "ours": {"seconds": ours, "test": truth - float(est.score(X_test))},
            "raw spectral fit": {"seconds": raw_s, "test": truth - float(raw_ll.mean())},
            "what": "gap to the truth (nats/row)",
        }
    if row.startswith("gauss-"):
        from bench_continuous import load, standardise
        from sklearn.mixture import GaussianMixture

        from ltm_sklearn import GaussianLatentTree

        X, y = load(row[6:])
        tr, te = train_test_split(np.arange(len(y)), test_size=0.3, stratify=y, random_state=0)
        A, B = standardise(X.iloc[tr].reset_index(drop=True), X.iloc[te].reset_index(drop=True))
        A, B = A.to_numpy(float), B.to_numpy(float)
        est, ours = _timed(GaussianLatentTree(random_state=0).fit, A)

        def grid(A):
            fits = [GaussianMixture(c, reg_covar=1e-4, random_state=0).fit(A) for c in range(1, 6)]
            return min(fits, key=lambda g: g.bic(A))

        gmm, gmm_s = _timed(grid, A)
        return {
            "ours": {"seconds": ours, "test": float(est.score(B))},
            "GaussianMixture BIC grid": {"seconds": gmm_s, "test": float(gmm.score(B))},
            "what": "test log-likelihood (nats/row)",
        }
    if row.startswith("clf-"):
        from bench_real import categorical_nb, load
        from sklearn.linear_model import LogisticRegression
        from sklearn.metrics import log_loss
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import OneHotEncoder

        from ltm_sklearn import LatentTreeClassifier
        from ltm_sklearn._engine.encoding import CategoricalEncoder

        X, y = load(row[4:])
        tr, te = train_test_split(np.arange(len(y)), test_size=0.3, stratify=y, random_state=0)
        categories = CategoricalEncoder().fit(X).categories_
        models = {
            "ours": LatentTreeClassifier(n_hidden_states="auto", random_state=0),
            "CategoricalNB": categorical_nb(categories),
            "LogisticRegression (one-hot)": make_pipeline(
                OneHotEncoder(handle_unknown="ignore"), LogisticRegression(max_iter=1000)
            ),
        }
        out = {"what": "test log-loss"}
        for name, model in models.items():
            # fits of a few seconds: the median of three (the machine's speed drifts)
            times = [_timed(model.fit, X.iloc[tr].astype(str), y[tr])[1] for _ in range(3)]
            seconds = float(np.median(times))
            proba = model.predict_proba(X.iloc[te].astype(str))
            loss = log_loss(y[te], proba, labels=list(model.classes_))
            out[name] = {"seconds": seconds, "test": float(loss)}
        return out
    raise ValueError(f"unknown row {row!r}; one of {VS_ROWS}")


def machine_probe():
    """Seconds of a fixed NumPy workload like an E-step's, on one thread (float32 products
    of a 32 x 32 table with 32 x 16,384 messages, and the elementwise products, sums and
    divisions around them), the median of five: the machine's speed when a row ran, to
    read times of different sessions by (the same fits ran 1.4-1.8x faster in one
    session than in the one before it)."""
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)
    table = rng.random((32, 32), dtype=np.float32)
    messages = rng.random((32, 16384), dtype=np.float32)
    out = np.empty_like(messages)
    times = []
    with threadpool_limits(limits=1):
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(100):
                np.matmul(table, messages, out=out)
                out *= messages
                out /= out.sum(axis=0)
            times.append(time.perf_counter() - t0)
    return float(np.median(times))


def run_row(row):
    from ltm_sklearn import SpectralLatentTree

    # <row>@<seed>: the same fit with another random_state
    row, _, seed = row.partition("@")
    seed = int(seed) if seed else 0
    if row == "digits":
        X_train, X_test = _digits()
        est = SpectralLatentTree(n_hidden_states="auto", random_state=seed)
        return _fit(est, X_train, X_test)
    if row == "grid-digits":
        from sklearn.model_selection import GridSearchCV

        X_train, X_test = _digits()
        grid = GridSearchCV(
            SpectralLatentTree(structure="nj", random_state=seed),
            {"n_hidden_states": [1, 2, 3, 4]},
            cv=5,
            n_jobs=-1,
        )
        out = _fit(grid, X_train, X_test)
        out["k"] = int(grid.best_params_["n_hidden_states"])
        out["structure"] = "nj"
        return out
    if row == "gmm-digits":
        from sklearn.mixture import GaussianMixture

        X_train, X_test = (X.astype(float) for X in _digits())
        t0 = time.perf_counter()
        fits = [
            GaussianMixture(c, covariance_type="full", reg_covar=1e-3, random_state=0).fit(X_train)
            for c in range(1, 11)
        ]
        best = min(fits, key=lambda g: g.bic(X_train))
        # a density of the grey levels as numbers: not comparable in nats with the
        # discrete models; only its time is reported
        return {"seconds": time.perf_counter() - t0, "k": int(best.n_components), "test": None}
    if row == "truth-k3":
        from ltm_sklearn.datasets import LatentTreeModel, balanced_binary_tree

        model = LatentTreeModel.random(balanced_binary_tree(8), 3, 4, random_state=0)
        X, X_test = model.sample(20_000, random_state=0), model.sample(5_000, random_state=1)
        out = _fit(SpectralLatentTree(n_hidden_states="auto", random_state=0), X, X_test)
        out["truth"] = float(model.log_likelihood(X_test).mean())
        return out
    if row.startswith("debd-"):
        from ltm_sklearn.datasets import load_debd

        train, _, test = load_debd(row[5:])
        return _fit(SpectralLatentTree(n_hidden_states="auto", random_state=seed), train, test)
    raise ValueError(f"unknown row {row!r}; one of {ROWS}")


def run_starts():
    """Seconds of the moment starts alone (``max_iter=0``: the estimator's own recovery,
    and ``LatentTreeEM``'s three-view tensor decompositions of the empirical moments) on
    the demo's digits, on 1,006 training rows and on one class's rows (the classifier's
    class models), on the neighbour-joining and hidden Chow-Liu trees of the 1,006 rows:
    the best of five fits, one thread."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    from ltm_sklearn import LatentTreeEM, SpectralLatentTree

    digits = load_digits()
    X = np.digitize(digits.data, [1, 9])
    # the split of _digits (the same shuffle: it depends on the rows and classes only)
    X_train, _, y_train, _ = train_test_split(
        X, digits.target, test_size=0.3, stratify=digits.target, random_state=0
    )
    one_class = X_train[y_train == 3]
    out = {}
    for structure in ("nj", "hclt"):
        tree = (
            SpectralLatentTree(2, structure=structure, random_state=0, max_iter=0, n_jobs=1)
            .fit(X_train[:1006])
            .tree_
        )
        for rows, A in (("1,006 rows", X_train[:1006]), (f"{len(one_class)} rows", one_class)):
            for k in (2, 3):
                for Est in (SpectralLatentTree, LatentTreeEM):
                    times = []
                    for _ in range(5):
                        est = Est(k, tree=tree, random_state=0, max_iter=0, n_jobs=1)
                        times.append(_timed(est.fit, A)[1])
                    out[f"{rows} | {structure} | {k} | {Est.__name__}"] = min(times)
    return out


def report():
    parts = {}
    for path in sorted(PARTS.glob("*.json")):
        if path.stem.startswith(("vs-", "starts")):
            continue
        label, row = path.stem.split("-", 1)
        parts[(label, row)] = json.loads(path.read_text())
    order = {
        "before": 0,
        "tasks": 1,
        "after": 2,
        "race": 3,
        "start": 4,
        "stacked": 5,
        "serule": 6,
        "segain": 7,
        "tensor": 8,
        "moments": 9,
        "blocks": 10,
        "float32": 11,
        "now": 12,
        "grid": 13,
        "grid2": 14,
        "workers": 15,
        "states": 16,
        "rerun": 17,
        "epyc": 18,
        "lsq": 19,
    }
    everything = sorted({label for label, _ in parts}, key=lambda s: (order.get(s, 9), s))
    labels = [label for label in everything if label in REPORTED]
    header = ["row"]
    for label in labels:
        header += [f"{label}: fit s", f"{label}: test nats/row", f"{label}: k', structure, members"]
    rows = []
    seeds = sorted({row for _, row in parts if row.startswith("digits@")}, key=lambda r: int(r[7:]))
    others = sorted({row for _, row in parts if "@" in row and not row.startswith("digits@")})
    for row in ROWS + tuple(seeds) + tuple(others):
        if not any((label, row) in parts for label in labels):
            continue
        line = [row]
        for label in labels:
            p = parts.get((label, row))
            if p is None:
                line += ["not run", "", ""]
                continue
            test = "" if p.get("test") is None else f"{p['test']:.3f}"
            if "truth" in p:
                test += f" (truth {p['truth']:.3f})"
            what = f"{p['k']}, {p.get('structure', '')}, {p.get('n_members', '')}"
            if p.get("warnings"):
                what += f"; warns {', '.join(p['warnings'])}"
            if p.get("source"):
                what += f"; from {p['source']}"
            line += [f"{p['seconds']:.1f}", test, what]
        rows.append(line)
    text = "\n".join(
        [
            "# Time to a result of the automatic fit",
            "",
            f"Machine: {machine()}. One fit per cell, run one at a time. Labels (the code "
            "measured): `before` commit a76d29f, before the selection engine (its cells of "
            "plants, baudio, jester and bnetflix are that code's `bench_debd.md` run); "
            "`segain` commit e576194, in which the ladder grows beyond k' = 16 only after a "
            "level that gained more than one paired standard error; `moments` commit "
            "bcca079, in which the moment starts decompose all hidden nodes together; "
            "`blocks` commit 31ad703, in which the message passes work on row blocks of "
            "2^14 message elements instead of 2^16 (an E-step at k' = 16-32 on the density "
            "sets takes 1.2-1.5x less time); `float32` commit 3aaee0d, in which EM's "
            "messages are float32 from k' = 2 (4 before); `now` commit bd2dc5a, run in a "
            "later session (its path for these fits differs from `float32` in the spanning "
            "trees of the structures, found by a dense Prim's algorithm: the same trees; in "
            "larger row blocks on small trees, nltcs's; in a moment-started finalist far "
            "behind the best that stops after its rung of equal effort; and in the second "
            "member's two kinds of start raced in rungs, one far behind dropped), all rows in "
            "one process, in the order digits, digits@1-7, jester, bnetflix, plants, "
            "baudio (their worker processes already started), nltcs alone; `grid` commit "
            "4ff0c00, in which the k' ladder of `n_hidden_states='auto'` doubles from 4 to "
            "16 (k' = 1, 2, 3, 4, 8, 16, 24, ...: no levels of 6 and 12 states), run in a "
            "later session in the same order and processes; `grid2` the same fits (commit "
            "11e0dac, whose changes since 4ff0c00 leave these fits as they were) and "
            "`workers` commit 7d79a79, run one after the other in a later session (a slower "
            "one: compare the two), in which a batch side by side runs in this process and "
            "a worker process, this process taking the tasks from the first on while the "
            "worker starts (the batch no longer waits for two workers to start), the "
            "same models; `states` commit c342b5f, run in a later session, in which "
            "`min_state_rows='auto'` removes the hidden states the model expects fewer "
            "training rows in than a threshold chosen on the held-out rows (the same fits "
            "before it; plants and the digits fits change; the choice took 0.14-0.19 s of a "
            "digits fit and 0.3 s of jester's, so the longer times are the session's); "
            "`rerun` commit ef6a150, whose path for these fits is that of `states` (the "
            "changes since touch the classifier's trial fits only), run in a later session "
            "in the same order and process: the same models and scores, the machine's "
            "drift between the two sessions in its times. "
            "`epyc` commit 9304440 on another machine (2-core AMD EPYC, OpenBLAS's Haswell "
            "kernels, scikit-learn 1.9.1), whose paths for these fits are those of `rerun` "
            "(checked there: commit ef6a150 chose the same models): the digits fit takes "
            "k' = 48 there and bnetflix another path (the last bits of the BLAS products "
            "differ, and the ladder's choices are discrete), and the same fits take 2-3x "
            "longer although `machine_probe` reads alike - it runs one thread, and the "
            "difference lies in memory and the two processes. "
            "`lsq` commit 986c8ba on the machine of `epyc`, in a later session, in which the "
            "structure check of `structure='me'` fits its edge lengths by non-negative "
            "least squares (a semismooth Newton method over scipy's `nnls`) instead of "
            "L-BFGS-B: the same residuals, the same models (run in that session against "
            "ac99d7b, fit by fit: the digits fit 24.4 / 26.3 s against 27.9 / 23.4 s, with "
            "`n_jobs=1` 35.9 s against 40.0 s; jester 75.8 s against 89.7 s: the check "
            "runs beside other work in the two processes; bnetflix 168.6 s, the same model, "
            "with `machine_probe` at 0.129 s against the `epyc` cell's 0.108 s). "
            "`moments` and `blocks` ran in "
            "one session, interleaved row by row, and `float32` right after them; the "
            "other cells come from earlier sessions (the "
            "machine's speed drifts by up to 2x between sessions: compare cells measured "
            "together). Other labels (`race`, `start`, `stacked`, `serule`, `tensor`: "
            "intermediate commits; `segain`, `moments`, `blocks` and `grid2`, above) are in "
            "`bench_speed_parts` and in the summary of the "
            "digits fit below. `gmm-digits` is the GaussianMixture BIC grid (1-10 "
            "components) on the same digits rows, for time only (a density of the levels "
            "as numbers is not comparable in nats). `<row>@<seed>`: the same fit with "
            "another `random_state`.",
            "",
            markdown_table(header, rows),
        ]
    )
    # the digits fit over random_state (digits is random_state=0, digits@<s> the others)
    summary = []
    for label in everything:
        runs = [parts[(label, r)] for r in ("digits", *seeds) if (label, r) in parts]
        if len(runs) > 1:
            test = np.array([p["test"] for p in runs])
            probes = [p["probe"] for p in runs if "probe" in p]
            summary.append(
                [
                    label,
                    str(len(runs)),
                    f"{np.mean([p['seconds'] for p in runs]):.1f}",
                    f"{test.mean():.3f}",
                    f"{test.std(ddof=1) / np.sqrt(len(runs)):.3f}",
                    f"{test.min():.3f} to {test.max():.3f}",
                    f"{np.mean(probes):.3f}" if probes else "",
                ]
            )
    if summary:
        text += "\n\n" + "\n".join(
            [
                "## The digits fit over random_state",
                "",
                "The same fit with `random_state` 0 (`digits`) and the `digits@<seed>` rows: "
                "the held-out score of the automatic fit moves with the random streams of "
                "its EM starts, so versions are compared by their mean. 'probe s': the "
                "machine's speed when the rows ran (`machine_probe`, a fixed NumPy workload "
                "like an E-step's, measured before each row; lower is faster), for labels "
                "measured since it was added.",
                "",
                markdown_table(
                    [
                        "label",
                        "fits",
                        "mean fit s",
                        "mean test nats/row",
                        "s.e.",
                        "range",
                        "probe s",
                    ],
                    summary,
                ),
            ]
        )
    starts = PARTS / "starts.json"
    if starts.exists():
        now = json.loads(starts.read_text())
        before_path = PARTS / "starts.before.json"
        before = json.loads(before_path.read_text()) if before_path.exists() else {}
        commit = before.pop("commit", "?")
        text += "\n\n" + "\n".join(
            [
                "## The moment starts",
                "",
                "Seconds of a fit with `max_iter=0` (the start alone: the estimator's own "
                "recovery, or `LatentTreeEM`'s tensor decompositions of the empirical "
                "moments) on the digits, best of five, one thread (`--starts`); 'before' is "
                f"commit {commit}, run in the same session (the lowest of three runs of each, "
                "interleaved: the machine's speed drifts by 30% within minutes).",
                "",
                markdown_table(
                    ["rows", "tree", "k'", "estimator", "before s", "now s"],
                    [
                        [
                            *key.split(" | "),
                            f"{before[key]:.3f}" if key in before else "",
                            f"{v:.3f}",
                        ]
                        for key, v in now.items()
                    ],
                ),
            ]
        )
    vs, before_commits = [], set()
    for row in VS_ROWS:
        path = PARTS / f"vs-{row}.json"
        if not path.exists():
            continue
        p = json.loads(path.read_text())
        before_path = PARTS / f"vs-{row}.before.json"
        before = None
        if before_path.exists():
            earlier = json.loads(before_path.read_text())
            before = earlier["ours"]
            before_commits.add(earlier.get("commit", "?"))
        for name, r in p.items():
            if name in ("ours", "what"):
                continue
            ours = p["ours"]
            vs.append(
                [
                    row,
                    p["what"],
                    "" if before is None else f"{before['seconds']:.2f}",
                    "" if before is None else f"{before['test']:.4f}",
                    f"{ours['seconds']:.2f}",
                    f"{ours['test']:.4f}",
                    name,
                    f"{r['seconds']:.2f}",
                    f"{r['test']:.4f}",
                    f"{ours['seconds'] / max(r['seconds'], 1e-9):.1f}x",
                ]
            )
    if vs:
        text += "\n\n" + "\n".join(
            [
                "## Against what a user runs instead",
                "",
                "The current code, one 70/30 split per table (`--vs`; spectral-1e5: 100,000 "
                "training and 5,000 test rows sampled from the truth); 'ratio' is our fit time "
                "over the baseline's. 'before' is the code before the last change to the "
                "row's path (commit "
                + ", ".join(sorted(before_commits))
                + "), run in the same session (`vs-<row>.before.json`: the script run from a "
                "checkout of that commit), where it was measured.",
                "",
                markdown_table(
                    [
                        "row",
                        "score",
                        "before s",
                        "before",
                        "ours s",
                        "ours",
                        "baseline",
                        "its s",
                        "its score",
                        "ratio",
                    ],
                    vs,
                ),
            ]
        )
    save("bench_speed", text)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--label", default="after")
    parser.add_argument("--rows", nargs="*", default=["digits", "gmm-digits", "truth-k3"])
    parser.add_argument("--report", action="store_true")
    parser.add_argument("--vs", nargs="*", help=f"rows against baselines, of {VS_ROWS}")
    parser.add_argument("--starts", action="store_true", help="the moment starts alone")
    args = parser.parse_args()
    if args.report:
        report()
        return
    PARTS.mkdir(parents=True, exist_ok=True)
    if args.starts:
        out = run_starts()
        (PARTS / "starts.json").write_text(json.dumps(out, indent=1))
        print(markdown_table(["start", "seconds"], [[k, f"{v:.3f}"] for k, v in out.items()]))
        return
    if args.vs is not None:
        for row in args.vs or VS_ROWS:
            out = run_vs(row)
            (PARTS / f"vs-{row}.json").write_text(json.dumps(out, indent=1))
            print(row, out, flush=True)
        return
    for row in args.rows:
        probe = machine_probe()
        out = dict(run_row(row), probe=probe)
        (PARTS / f"{args.label}-{row}.json").write_text(json.dumps(out, indent=1))
        print(args.label, row, out, flush=True)


if __name__ == "__main__":
    main()
