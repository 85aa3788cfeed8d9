"""LatentTreeClassifier against what a user runs instead: stratified 5-fold log-loss,
accuracy, ROC AUC and fit seconds on the bundled categorical and mixed tables.

Categorical tables (their categorical columns): ours with the default estimator
``SpectralLatentTree(structure="hclt")`` - ``model="pooled"`` (the default: the per-class
and the joint posteriors pooled and calibrated), ``"per_class"`` (one latent tree per
class), ``"joint"`` (one tree over the columns and the class, its exact conditional) - the
pool with ``k'`` chosen inside ``fit`` (``n_hidden_states="auto"``: the class models' by
out-of-fold log-loss, the joint model's by its held-out likelihood), the pool with
``SpectralLatentTree()`` (its structures raced on held-out rows), and a Chow-Liu tree per
class
(``SpectralLatentTree(structure="chow_liu")``, ``model="per_class"``: a tree-augmented
naive Bayes with a tree of its own per class). Against: ``CategoricalNB`` (add-one
smoothing), a one-hot ``LogisticRegression`` with the default ``C`` and with ``C`` tuned
by an inner 3-fold log-loss (``LogisticRegressionCV``), and a
``HistGradientBoostingClassifier`` on the columns as categorical features.

Mixed tables (every column): ours with ``KernelLatentTree()`` - the default pool, one
model per class, and one model over the columns and the class (declared categorical);
the discrete form, as every mixed table has a categorical column - against
``LogisticRegression`` (default and tuned ``C``) on one-hot categories and standardised
numbers, and ``HistGradientBoostingClassifier`` with native categorical columns.

ROC AUC is one-vs-rest, macro-averaged, for more than two classes.

    python benchmarks/bench_classify.py [--tables breast monk2 ...] [--mixed german ...]

Writes ``results/bench_classify.md``.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.compose import make_column_transformer
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression, LogisticRegressionCV
from sklearn.metrics import accuracy_score, log_loss, roc_auc_score
from sklearn.model_selection import StratifiedKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder, StandardScaler

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, markdown_table, save  # noqa: E402
from bench_real import TABLES, categorical_nb, load  # noqa: E402

from ltm_sklearn import KernelLatentTree, LatentTreeClassifier, SpectralLatentTree  # noqa: E402
from ltm_sklearn._engine.encoding import CategoricalEncoder  # noqa: E402
from ltm_sklearn.datasets import load_table  # noqa: E402

MIXED = ("german", "australian", "crx", "contraceptive")
FOLDS = 5
METRICS = ("log-loss", "accuracy", "ROC AUC", "fit s")


def _logistic(tuned, encoder):
    model = (
        LogisticRegressionCV(Cs=10, cv=3, scoring="neg_log_loss", max_iter=2000)
        if tuned
        else LogisticRegression(max_iter=1000)
    )
    return make_pipeline(encoder, model)


def _categorical_models(categories):
    def one_hot():
        return OneHotEncoder(handle_unknown="ignore")

    return {
        "pooled (default)": lambda: LatentTreeClassifier(random_state=0),
        "per_class": lambda: LatentTreeClassifier(model="per_class", random_state=0),
        "joint": lambda: LatentTreeClassifier(model="joint", random_state=0),
        "pooled, k' chosen (n_hidden_states='auto')": lambda: LatentTreeClassifier(
            n_hidden_states="auto", random_state=0
        ),
        "pooled, structures raced": lambda: LatentTreeClassifier(
            SpectralLatentTree(), random_state=0
        ),
        "Chow-Liu per class": lambda: LatentTreeClassifier(
            SpectralLatentTree(structure="chow_liu"), model="per_class", random_state=0
        ),
        "CategoricalNB": lambda: categorical_nb(categories),
        "LogisticRegression": lambda: _logistic(False, one_hot()),
        "LogisticRegression (tuned C)": lambda: _logistic(True, one_hot()),
        "HistGB": lambda: make_pipeline(
            OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=np.nan),
            HistGradientBoostingClassifier(
                categorical_features=[True] * len(categories), random_state=0
            ),
        ),
    }


def _mixed_models(X):
    categorical = [c for c in X.columns if isinstance(X[c].dtype, pd.CategoricalDtype)]
    numeric = [c for c in X.columns if c not in categorical]

    def encoder():
        return make_column_transformer(
            (OneHotEncoder(handle_unknown="ignore"), categorical),
            (make_pipeline(SimpleImputer(strategy="median"), StandardScaler()), numeric),
        )

    def hist_gb():
        return HistGradientBoostingClassifier(categorical_features="from_dtype", random_state=0)

    return {
        "KernelLatentTree pooled (default)": lambda: LatentTreeClassifier(
            KernelLatentTree(random_state=0), random_state=0
        ),
        "KernelLatentTree per class": lambda: LatentTreeClassifier(
            KernelLatentTree(random_state=0), model="per_class", random_state=0
        ),
        "KernelLatentTree joint": lambda: LatentTreeClassifier(
            KernelLatentTree(random_state=0), model="joint", random_state=0
        ),
        "LogisticRegression": lambda: _logistic(False, encoder()),
        "LogisticRegression (tuned C)": lambda: _logistic(True, encoder()),
        "HistGB": hist_gb,
    }


def _auc(y, proba, classes):
    if len(classes) == 2:
        return roc_auc_score(y == classes[1], proba[:, 1])
    return roc_auc_score(y, proba, multi_class="ovr", average="macro", labels=classes)


def evaluate(X, y, models):
    """``{model: {metric: mean over the folds}}``."""
    out = {m: {k: [] for k in METRICS} for m in models}
    folds = StratifiedKFold(FOLDS, shuffle=True, random_state=0).split(np.zeros(len(y)), y)
    classes = np.unique(y)
    for train, test in folds:
        for m, make in models.items():
            model = make()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t0 = time.perf_counter()
                model.fit(X.iloc[train], y[train])
                seconds = time.perf_counter() - t0
                proba = model.predict_proba(X.iloc[test])
            # columns in the order of every class (a class absent from the training rows
            # gets probability 0)
            full = np.zeros((len(test), len(classes)))
            full[:, np.searchsorted(classes, model.classes_)] = proba
            out[m]["log-loss"].append(log_loss(y[test], full, labels=classes))
            out[m]["accuracy"].append(accuracy_score(y[test], classes[np.argmax(full, axis=1)]))
            out[m]["ROC AUC"].append(_auc(y[test], full, classes))
            out[m]["fit s"].append(seconds)
    return {m: {k: float(np.mean(v)) for k, v in d.items()} for m, d in out.items()}


def _table(results, shapes):
    """One row per (table, model), the best log-loss, accuracy and AUC of a table in bold."""
    rows = []
    for name, res in results.items():
        best = {
            "log-loss": min(r["log-loss"] for r in res.values()),
            "accuracy": max(r["accuracy"] for r in res.values()),
            "ROC AUC": max(r["ROC AUC"] for r in res.values()),
        }
        for i, (m, r) in enumerate(res.items()):
            cells = []
            for k in ("log-loss", "accuracy", "ROC AUC"):
                text = f"{r[k]:.4f}"
                cells.append(f"**{text}**" if r[k] == best[k] else text)
            label = f"{name} ({shapes[name][0]} x {shapes[name][1]})" if i == 0 else ""
            rows.append([label, m, *cells, f"{r['fit s']:.2f}"])
    return markdown_table(["table", "model", *METRICS], rows)


def _summary(results, ours):
    """Counts against the targets of the classifier's default."""
    lines = []
    at_or_below = sum(
        r[ours]["log-loss"]
        <= min(r["CategoricalNB"]["log-loss"], r["LogisticRegression"]["log-loss"])
        for r in results.values()
    )
    below_hgb = sum(r[ours]["log-loss"] <= r["HistGB"]["log-loss"] for r in results.values())
    worst_acc = max(
        r["LogisticRegression"]["accuracy"] - r[ours]["accuracy"] for r in results.values()
    )
    ratios = [r[ours]["fit s"] / r["LogisticRegression"]["fit s"] for r in results.values()]
    lines.append(
        f"The default's log-loss is at or below the better of CategoricalNB and "
        f"LogisticRegression (default C) on {at_or_below} of {len(results)} tables and at or "
        f"below HistGB on {below_hgb}; its accuracy is at most "
        f"{100 * worst_acc:.1f} points below LogisticRegression's on any table; its fit "
        f"takes {np.median(ratios):.0f}x a LogisticRegression fit (median over the tables, "
        f"{min(ratios):.0f}-{max(ratios):.0f}x)."
    )
    return " ".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", nargs="+", default=[t for t in TABLES if t != "digits"])
    parser.add_argument("--mixed", nargs="*", default=list(MIXED))
    args = parser.parse_args()
    results, shapes = {}, {}
    for name in args.tables:
        X, y = load(name)
        X = X.astype(str)
        categories = CategoricalEncoder().fit(X).categories_
        results[name] = evaluate(X, y, _categorical_models(categories))
        shapes[name] = X.shape
        print(name, results[name], flush=True)
    mixed, mixed_shapes = {}, {}
    for name in args.mixed:
        X, y = load_table(name)
        mixed[name] = evaluate(X, np.asarray(y), _mixed_models(X))
        mixed_shapes[name] = X.shape
        print(name, mixed[name], flush=True)
    text = [
        "# Classification against what a user runs instead",
        "",
        f"Machine: {machine()}. `python benchmarks/bench_classify.py`. Stratified "
        f"{FOLDS}-fold means of the test log-loss (lower is better), accuracy and ROC AUC "
        "(one-vs-rest, macro, for more than two classes), and of the fit seconds; the best "
        "of a table in bold. The models are described in the script's docstring.",
        "",
        "## Categorical tables",
        "",
    ]
    if results:
        text += [_summary(results, "pooled (default)"), "", _table(results, shapes), ""]
    if mixed:
        text += ["## Mixed tables (numeric and categorical columns)", ""]
        text += [_table(mixed, mixed_shapes), ""]
    save("bench_classify", "\n".join(text))


if __name__ == "__main__":
    main()
