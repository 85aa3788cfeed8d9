"""LatentTreeClassifier's models against what a user runs instead, on the bundled
categorical tables: stratified 3-fold log-loss and fit seconds.

Ours: ``model="per_class"`` (one latent tree per class), ``model="joint"`` (one tree over
the columns and the class, its exact conditional), ``model="pooled"`` (the mean of the
two posteriors; the default) and ``model="select"`` (the one of the three with the lowest
inner out-of-fold log-loss), each with the default estimator
``SpectralLatentTree()``. Against: ``CategoricalNB`` (add-one smoothing), a one-hot
``LogisticRegression`` (default C) and a ``HistGradientBoostingClassifier`` on the
columns as categorical features.

    python benchmarks/bench_classify.py [--tables breast monk2 ...]

Writes ``results/bench_classify.md``.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss
from sklearn.model_selection import StratifiedKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, markdown_table, save  # noqa: E402
from bench_real import TABLES, categorical_nb, load  # noqa: E402

from ltm_sklearn import LatentTreeClassifier  # noqa: E402
from ltm_sklearn._engine.encoding import CategoricalEncoder  # noqa: E402

MODELS = (
    "pooled",
    "per_class",
    "joint",
    "select",
    "CategoricalNB",
    "LogisticRegression",
    "HistGB",
)


def _models(categories):
    return {
        "pooled": lambda: LatentTreeClassifier(random_state=0),
        "per_class": lambda: LatentTreeClassifier(model="per_class", random_state=0),
        "joint": lambda: LatentTreeClassifier(model="joint", random_state=0),
        "select": lambda: LatentTreeClassifier(model="select", random_state=0),
        "CategoricalNB": lambda: categorical_nb(categories),
        "LogisticRegression": lambda: make_pipeline(
            OneHotEncoder(handle_unknown="ignore"), LogisticRegression(max_iter=1000)
        ),
        "HistGB": lambda: make_pipeline(
            OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=np.nan),
            HistGradientBoostingClassifier(
                categorical_features=[True] * len(categories), random_state=0
            ),
        ),
    }


def run(name):
    X, y = load(name)
    X = X.astype(str)
    categories = CategoricalEncoder().fit(X).categories_
    losses = {m: [] for m in MODELS}
    seconds = {m: 0.0 for m in MODELS}
    folds = list(StratifiedKFold(3, shuffle=True, random_state=0).split(np.zeros(len(y)), y))
    for train, test in folds:
        for m, make in _models(categories).items():
            model = make()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t0 = time.perf_counter()
                model.fit(X.iloc[train], y[train])
                seconds[m] += time.perf_counter() - t0
                proba = model.predict_proba(X.iloc[test])
            losses[m].append(log_loss(y[test], proba, labels=list(model.classes_)))
    return (
        {m: float(np.mean(v)) for m, v in losses.items()},
        {m: s / len(folds) for m, s in seconds.items()},
        X.shape,
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", nargs="+", default=[t for t in TABLES if t != "digits"])
    args = parser.parse_args()
    rows = []
    wins = wins_select = 0
    for name in args.tables:
        loss, secs, shape = run(name)
        best = min(loss, key=loss.get)
        cells = [f"**{loss[m]:.4f}**" if m == best else f"{loss[m]:.4f}" for m in MODELS]
        wins += loss["pooled"] < loss["LogisticRegression"]
        wins_select += loss["select"] < loss["LogisticRegression"]
        rows.append(
            [
                name,
                f"{shape[0]} x {shape[1]}",
                *cells,
                f"{secs['pooled']:.2f}",
                f"{secs['select']:.2f}",
                f"{secs['LogisticRegression']:.2f}",
            ]
        )
        print(name, loss, secs, flush=True)
    text = "\n".join(
        [
            "# Classification: log-loss against what a user runs instead",
            "",
            f"Machine: {machine()}. Stratified 3-fold log-loss (lower is better; the best of "
            "a row in bold) of `LatentTreeClassifier` with the default estimator - `pooled` "
            "(the default), `per_class`, `joint` - against CategoricalNB, a one-hot "
            "LogisticRegression and HistGradientBoosting on the columns as categories; "
            "fit seconds are the mean over the folds. `select` chooses among the three "
            "by an inner 3-fold log-loss on the training rows. The pool is below "
            f"LogisticRegression on {wins} of {len(rows)} tables, `select` on "
            f"{wins_select}.",
            "",
            markdown_table(
                [
                    "table",
                    "rows x columns",
                    *MODELS,
                    "pooled fit s",
                    "select fit s",
                    "LogisticRegression fit s",
                ],
                rows,
            ),
        ]
    )
    save("bench_classify", text)


if __name__ == "__main__":
    main()
