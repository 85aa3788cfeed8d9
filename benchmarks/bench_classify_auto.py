"""LatentTreeClassifier(model="per_class", n_hidden_states="auto") - the choice of k' for
classification alone - against CategoricalNB and the classifier's own k' = 1 model on the
bundled categorical tables (stratified 5-fold log-loss).

    python benchmarks/bench_classify_auto.py [--tables breast monk2 ...]

Writes ``results/bench_classify_auto.md``.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.metrics import log_loss
from sklearn.model_selection import StratifiedKFold

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, markdown_table, save  # noqa: E402
from bench_real import TABLES, categorical_nb, load  # noqa: E402

from ltm_sklearn import LatentTreeClassifier  # noqa: E402
from ltm_sklearn._engine.encoding import CategoricalEncoder  # noqa: E402


def run(name):
    X, y = load(name)
    categories = CategoricalEncoder().fit(X).categories_
    models = {
        "auto": lambda: LatentTreeClassifier(
            model="per_class", n_hidden_states="auto", random_state=0, calibrate=False
        ),
        "one": lambda: LatentTreeClassifier(model="per_class", n_hidden_states=1, calibrate=False),
        "CategoricalNB": lambda: categorical_nb(categories),
    }
    losses = {m: [] for m in models}
    chosen, seconds = [], 0.0
    folds = StratifiedKFold(5, shuffle=True, random_state=0)
    for train, test in folds.split(np.zeros(len(y)), y):
        for m, make in models.items():
            model = make()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t0 = time.perf_counter()
                model.fit(X.iloc[train], y[train])
                if m == "auto":
                    seconds += time.perf_counter() - t0
                    star = model.class_params_.get("structure") == "star"
                    chosen.append("NB" if star else model.n_hidden_states_)
                proba = model.predict_proba(X.iloc[test])
            classes = list(model.classes_)
            losses[m].append(log_loss(y[test], proba, labels=classes))
    return {m: float(np.mean(v)) for m, v in losses.items()}, chosen, seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", nargs="+", default=TABLES)
    args = parser.parse_args()
    rows = []
    for name in args.tables:
        loss, chosen, seconds = run(name)
        rows.append(
            [
                name,
                f"{loss['auto']:.3f}",
                f"{loss['one']:.3f}",
                f"{loss['CategoricalNB']:.3f}",
                "yes" if loss["auto"] <= loss["CategoricalNB"] else "no",
                " ".join(map(str, chosen)),
                f"{seconds / 5:.1f}",
            ]
        )
        print(rows[-1], flush=True)
    save(
        "bench_classify_auto",
        "\n".join(
            [
                "# bench_classify_auto: k' chosen for classification inside fit",
                "",
                f"Machine: {machine()}. Stratified 5-fold log-loss (mean over folds); "
                "LatentTreeClassifier with the default estimator (a hidden Chow-Liu tree, "
                "SpectralLatentTree(structure='hclt')), model='per_class' (one model per "
                "class: the choice of k' alone, Bayes' rule as it is), calibrate=False and "
                "n_hidden_states='auto' (candidates: naive Bayes - the independence model of "
                "each class, add-one smoothing, also k'=1 - and the default structure at "
                "growing k' from 2, "
                "compared by out-of-fold log-loss over 5 folds of the training rows keyed "
                "on the rows' values and classes up to 2,000 rows, a 20% band above). "
                "'k' chosen': NB = naive Bayes.",
                "",
                markdown_table(
                    [
                        "table",
                        "auto",
                        "k'=1",
                        "CategoricalNB",
                        "auto <= NB",
                        "k' chosen per fold",
                        "fit s (mean)",
                    ],
                    rows,
                ),
            ]
        ),
    )


if __name__ == "__main__":
    main()
