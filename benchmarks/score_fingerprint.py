"""Scores of every estimator on fixed data, printed to 12 significant digits.

A refactoring that moves code must not move numbers: run this before and after and
compare the two outputs (``diff``). Data: a ground-truth sample (8 leaves, k = 3), a
categorical table (``breast``), a numeric table (``wine``, scikit-learn's) and a mixed
table (``australian``); every estimator at fixed settings (and ``"auto"`` where it is
quick), scored on the same rows. Takes about a minute.

    python benchmarks/score_fingerprint.py > before.txt
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.datasets import load_wine

from ltm_sklearn import (
    GaussianLatentTree,
    HierarchicalTensorLTM,
    KernelLatentTree,
    LatentTreeClassifier,
    LatentTreeEM,
    QuartetTreeLearner,
    SpectralLatentTree,
)
from ltm_sklearn.datasets import LatentTreeModel, balanced_binary_tree, load_table


def kernel_model(hidden):
    """The kernel estimator at the settings the fingerprint has always read."""
    return KernelLatentTree(2, structure="me", hidden=hidden, random_state=0)


def _data():
    truth = LatentTreeModel.random(balanced_binary_tree(8), 3, 3, random_state=0)
    X_truth = truth.sample(3000, random_state=1)
    breast, y_breast = load_table("breast")
    wine = load_wine().data[:, :6]
    mixed, y_mixed = load_table("australian")
    return X_truth, breast, y_breast, wine, mixed, y_mixed


def main():
    warnings.simplefilter("ignore")
    X_truth, breast, y_breast, wine, mixed, y_mixed = _data()
    rows = []

    def record(name, est, X, y=None):
        if y is None:
            value = est.fit(X).score(X)
        else:  # the mean log-probability of the true class
            proba = est.fit(X, y).predict_proba(X)
            value = np.mean(np.log(proba[np.arange(len(y)), np.searchsorted(est.classes_, y)]))
        rows.append((name, value))
        print(f"{name:48s} {value:.12g}", flush=True)

    record("spectral truth k3", SpectralLatentTree(3, random_state=0), X_truth)
    record("spectral truth auto", SpectralLatentTree("auto", random_state=0), X_truth)
    record("spectral breast", SpectralLatentTree(2, random_state=0), breast)
    record("spectral breast auto-structure", SpectralLatentTree(random_state=0), breast)
    record("hierarchical truth", HierarchicalTensorLTM(3, random_state=0), X_truth)
    record("em truth", LatentTreeEM(3, random_state=0), X_truth)
    record("em breast", LatentTreeEM(2, random_state=0), breast)
    record("gaussian wine", GaussianLatentTree(random_state=0), wine)
    record("kernel wine", kernel_model("discrete"), wine)
    record("kernel wine gaussian", kernel_model("gaussian"), wine)
    record("kernel wine auto-form", kernel_model("auto"), wine)
    record("kernel mixed", kernel_model("discrete"), mixed)
    record(
        "classifier breast",
        LatentTreeClassifier(random_state=0, calibrate=False),
        breast,
        y_breast,
    )
    record("classifier breast calibrated", LatentTreeClassifier(random_state=0), breast, y_breast)
    record(
        "classifier mixed kernel",
        LatentTreeClassifier(kernel_model("discrete"), model="per_class", calibrate=False),
        mixed,
        y_mixed,
    )
    record(
        "classifier mixed kernel pooled",
        LatentTreeClassifier(kernel_model("discrete")),
        mixed,
        y_mixed,
    )
    kernel = kernel_model("discrete").fit(mixed)
    numeric = int(np.flatnonzero(~kernel.is_categorical_)[0])
    mean = kernel.conditional_mean(mixed.iloc[:50], numeric)
    print(f"{'kernel mixed conditional_mean sum':48s} {np.sum(mean):.12g}")
    quartet = QuartetTreeLearner(random_state=0).fit(X_truth)
    print(f"{'quartet truth edges':48s} {sorted(quartet.tree_.edges)}")
    return rows


if __name__ == "__main__":
    main()
