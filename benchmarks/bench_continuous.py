"""KernelLatentTree on real numeric and mixed tables against the models a user would pick.

Numeric tables (scikit-learn's breast cancer and wine, and the bundled wdbc, magic, segment
and pima): held-out log-density per row (every continuous column standardised on the
training fold, so all models are scored in the same units), against one full Gaussian, a
Gaussian mixture (full covariances, 1-5 components by BIC), a Gaussian Chow-Liu tree and a
kernel density estimate (bandwidth by 3-fold grid search).

Mixed tables (the bundled german, australian, crx and contraceptive: numeric and
categorical columns in one tree, the categorical ones read from their pandas dtype):
held-out log-likelihood (log of density x probability) against naive-Bayes-style
independence (a Gaussian per numeric column, add-one frequencies per categorical column)
and StepMix's mixed latent class model (diagonal Gaussians and categorical outcomes,
1, 2, 4 or 8 classes by BIC; ``bench`` extra).

On every table: conditional means of the hidden numeric entries with 20% of the columns
hidden at random in every test row (mean absolute error in standard deviations, vs the
full Gaussian's conditional mean on the numeric columns), and classification by
per-class likelihoods (accuracy and log-loss, vs GaussianNB / naive Bayes with per-type
marginals and a per-class full Gaussian).

KernelLatentTree runs in its discrete form (``hidden="discrete"``) with ``structure="me"``
and with ``structure="auto"`` (its defaults are ``structure="auto"``, ``hidden="auto"``),
``n_hidden_states`` by an inner 3-fold grid over 1, 2, 4, 8. Stratified 5-fold CV; magic
(19,020 rows) is subsampled to 5,000 rows.

Run: ``python benchmarks/bench_continuous.py [--quick] [--tables a,b]``.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np
import pandas as pd
from _common import RESULTS, machine, markdown_table, save
from scipy.special import logsumexp
from scipy.stats import multivariate_normal

from ltm_sklearn import GaussianLatentTree, KernelLatentTree, LatentTreeClassifier
from ltm_sklearn._algorithms.yeo_johnson import (
    fit_yeo_johnson,
    yeo_johnson,
    yeo_johnson_log_derivative,
)
from ltm_sklearn.datasets import load_table

NUMERIC = ("breast cancer", "wine", "wdbc", "magic", "segment", "pima")
MIXED = ("german", "australian", "crx", "contraceptive")
#: rows kept of a larger table (magic: 19,020 -> 5,000, stratified)
MAX_ROWS = 5000
#: the kernel form of KernelLatentTree with its latent structure search, and with the
#: automatic structure (``--forms`` adds the automatic form)
OURS = {
    "KernelLatentTree": {"structure": "me", "hidden": "discrete"},
    "KernelLatentTree (structure='auto')": {"structure": "auto", "hidden": "discrete"},
}
#: the settings of GaussianLatentTree compared on the numeric tables (``--gaussian``)
GAUSSIAN = {
    "GaussianLatentTree": {},
    "GaussianLatentTree (structure='me')": {"structure": "me"},
}
#: the one way in (``--forms``): KernelLatentTree choosing the form of its hidden
#: variables by held-out likelihood, at the k' that the grid of run_table chose per fold
#: for structure="auto"
FORMS = {
    "KernelLatentTree (structure='auto', hidden='auto')": {"structure": "auto", "hidden": "auto"}
}
#: the setting of run_table whose k' per fold the forms reuse
FORMS_K_FROM = "KernelLatentTree (structure='auto')"


# ---------------------------------------------------------------------- data
def load(name):
    """``(X, y)``: a DataFrame (float and category columns) and the labels."""
    if name in ("breast cancer", "wine"):
        from sklearn.datasets import load_breast_cancer, load_wine

        data = (load_breast_cancer if name == "breast cancer" else load_wine)()
        return pd.DataFrame(data.data, columns=data.feature_names), data.target
    X, y = load_table(name)
    if len(X) > MAX_ROWS:  # a stratified subsample keeps the grid searches affordable
        from sklearn.model_selection import train_test_split

        keep, _ = train_test_split(
            np.arange(len(X)), train_size=MAX_ROWS, stratify=y, random_state=0
        )
        X, y = X.iloc[np.sort(keep)].reset_index(drop=True), y[np.sort(keep)]
    return X, y


def numeric_columns(X):
    return [c for c in X.columns if not isinstance(X[c].dtype, pd.CategoricalDtype)]


def standardise(A, B):
    """Continuous columns of both frames standardised with the training fold's moments."""
    A, B = A.copy(), B.copy()
    for c in numeric_columns(A):
        mu, sd = A[c].mean(), A[c].std(ddof=0)
        sd = sd if sd > 0 else 1.0
        A[c], B[c] = (A[c] - mu) / sd, (B[c] - mu) / sd
    return A, B


# ---------------------------------------------------------------------- baselines
class ChowLiuGaussianTree:
    """Gaussian tree: maximum-|correlation| spanning tree with Gaussian conditionals."""

    def fit(self, X):
        from scipy.sparse.csgraph import breadth_first_order, minimum_spanning_tree

        self.mean_ = X.mean(axis=0)
        self.cov_ = np.cov(X, rowvar=False) + 1e-6 * np.eye(X.shape[1])
        sd = np.sqrt(np.diag(self.cov_))
        corr = self.cov_ / np.outer(sd, sd)
        weight = -np.log(np.clip(np.abs(corr), 1e-12, 1 - 1e-12))  # small = strong
        np.fill_diagonal(weight, 0)
        mst = minimum_spanning_tree(weight + 1e-12).toarray()
        self.order_, self.parent_ = breadth_first_order(mst + mst.T, 0, directed=False)
        return self

    def score_samples(self, X):
        mu, C = self.mean_, self.cov_
        r = self.order_[0]
        out = -0.5 * ((X[:, r] - mu[r]) ** 2 / C[r, r] + np.log(2 * np.pi * C[r, r]))
        for u in self.order_[1:]:
            p = self.parent_[u]
            beta = C[u, p] / C[p, p]
            var = C[u, u] - beta * C[u, p]
            resid = X[:, u] - mu[u] - beta * (X[:, p] - mu[p])
            out += -0.5 * (resid**2 / var + np.log(2 * np.pi * var))
        return out


def gaussian_conditional_mean(mean, cov, Q, target):
    """``E[x_target | observed entries]`` of a Gaussian for every row of ``Q`` (NaN
    unobserved)."""
    out = np.empty(Q.shape[0])
    for i, row in enumerate(Q):
        ev = np.flatnonzero(~np.isnan(row))
        ev = ev[ev != target]
        if ev.size == 0:
            out[i] = mean[target]
            continue
        w = np.linalg.solve(cov[np.ix_(ev, ev)], cov[ev, target])
        out[i] = mean[target] + w @ (row[ev] - mean[ev])
    return out


def mixture_conditional_mean(gmm, Q, target):
    """``E[x_target | observed entries]`` of a fitted ``GaussianMixture`` (full
    covariances) for every row of ``Q``: each component's Gaussian conditional mean,
    weighted by the component's posterior given the observed entries of the row."""
    K = gmm.n_components
    means = np.empty((Q.shape[0], K))
    log_post = np.empty((Q.shape[0], K))
    for k in range(K):
        mu, cov = gmm.means_[k], gmm.covariances_[k]
        means[:, k] = gaussian_conditional_mean(mu, cov, Q, target)
        for i, row in enumerate(Q):
            ev = np.flatnonzero(~np.isnan(row))
            ev = ev[ev != target]
            log_post[i, k] = np.log(gmm.weights_[k]) + (
                multivariate_normal(mu[ev], cov[np.ix_(ev, ev)]).logpdf(row[ev]) if ev.size else 0.0
            )
    post = np.exp(log_post - log_post.max(axis=1, keepdims=True))
    return (post * means).sum(axis=1) / post.sum(axis=1)


class MixedIndependence:
    """Independent columns: a Gaussian per numeric column, add-one frequencies per
    categorical column (the marginals of naive Bayes with per-type likelihoods)."""

    def fit(self, X):
        self.numeric_ = numeric_columns(X)
        self.categorical_ = [c for c in X.columns if c not in self.numeric_]
        self.mean_ = X[self.numeric_].mean().to_numpy()
        self.sd_ = np.maximum(X[self.numeric_].std(ddof=0).to_numpy(), 1e-3)
        self.logp_ = {}
        for c in self.categorical_:
            counts = X[c].value_counts()
            cats = list(X[c].cat.categories)
            total = counts.sum() + len(cats) + 1.0  # one slot for an unseen category
            self.logp_[c] = (
                {v: np.log((counts.get(v, 0) + 1.0) / total) for v in cats},
                np.log(1.0 / total),
            )
        return self

    def score_samples(self, X):
        Z = (X[self.numeric_].to_numpy(float) - self.mean_) / self.sd_
        out = (-0.5 * Z**2 - np.log(self.sd_) - 0.5 * np.log(2 * np.pi)).sum(axis=1)
        for c in self.categorical_:
            table, unseen = self.logp_[c]
            out += np.array([table.get(v, unseen) for v in X[c].astype(object)])
        return out


class StepMixMixed:
    """StepMix's latent class model with diagonal Gaussians for the numeric columns and
    categorical outcomes for the others (``bench`` extra), classes by BIC, scored per row
    from its parameters (unseen categories at 1e-15, StepMix's clipping)."""

    def __init__(self, n_classes=(1, 2, 4, 8)):
        self.n_classes = n_classes

    def _arrays(self, X):
        codes = np.column_stack(
            [
                X[c].cat.set_categories(self.categories_[c]).cat.codes.to_numpy()
                for c in self.categorical_
            ]
        )
        return codes, X[self.numeric_].to_numpy(float)

    def fit(self, X):
        from stepmix.stepmix import StepMix

        self.numeric_ = numeric_columns(X)
        self.categorical_ = [c for c in X.columns if c not in self.numeric_]
        self.categories_ = {c: list(X[c].cat.categories) for c in self.categorical_}
        codes, num = self._arrays(X)
        desc = {
            "categorical": {"model": "categorical", "n_columns": codes.shape[1]},
            "gaussian_diag": {"model": "gaussian_diag", "n_columns": num.shape[1]},
        }
        A = np.column_stack([codes, num])
        best = None
        for k in self.n_classes:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                m = StepMix(
                    n_components=k, measurement=desc, verbose=0, progress_bar=0, random_state=0
                ).fit(A)
            if best is None or m.bic(A) < best.bic(A):
                best = m
        p = best.get_parameters()
        self.weights_ = np.asarray(p["weights"])
        k = self.weights_.size
        self.pis_ = np.asarray(p["measurement"]["categorical"]["pis"]).reshape(
            k, codes.shape[1], -1
        )
        self.means_ = np.asarray(p["measurement"]["gaussian_diag"]["means"])
        self.vars_ = np.asarray(p["measurement"]["gaussian_diag"]["covariances"])
        self.n_classes_ = k
        return self

    def score_samples(self, X):
        codes, num = self._arrays(X)
        out = np.log(self.weights_)[None, :].repeat(len(X), axis=0)
        for j in range(codes.shape[1]):
            c = codes[:, j]
            p = np.full((len(X), self.n_classes_), 1e-15)
            ok = (c >= 0) & (c < self.pis_.shape[2])
            p[ok] = np.maximum(self.pis_[:, j, c[ok]].T, 1e-15)
            out += np.log(p)
        z = (num[:, None, :] - self.means_[None]) ** 2 / self.vars_[None]
        out += (-0.5 * z - 0.5 * np.log(2 * np.pi * self.vars_[None])).sum(axis=2)
        return logsumexp(out, axis=1)


class MixedNaiveBayes:
    """Naive Bayes with per-type likelihoods: :class:`MixedIndependence` per class."""

    def fit(self, X, y):
        self.classes_, idx = np.unique(y, return_inverse=True)
        self.models_ = [MixedIndependence().fit(X[idx == c]) for c in range(len(self.classes_))]
        self.prior_ = np.bincount(idx) / len(idx)
        return self

    def predict_log_proba(self, X):
        j = np.column_stack([m.score_samples(X) for m in self.models_]) + np.log(self.prior_)
        return j - logsumexp(j, axis=1, keepdims=True)


class GaussianPerClass:
    """One full Gaussian per class (quadratic discriminant analysis with a small ridge)."""

    def fit(self, X, y):
        self.classes_, idx = np.unique(y, return_inverse=True)
        self.models_ = []
        for c in range(len(self.classes_)):
            A = X[idx == c]
            cov = np.cov(A, rowvar=False) + 1e-3 * np.eye(X.shape[1])
            self.models_.append(multivariate_normal(A.mean(axis=0), cov, allow_singular=True))
        self.prior_ = np.bincount(idx) / len(idx)
        return self

    def predict_log_proba(self, X):
        j = np.column_stack([m.logpdf(X) for m in self.models_]) + np.log(self.prior_)
        return j - logsumexp(j, axis=1, keepdims=True)


def log_loss(log_proba, y_idx):
    return float(-np.mean(log_proba[np.arange(len(y_idx)), y_idx]))


# ---------------------------------------------------------------------- one table
def hide(B, share, rng):
    """``B`` with ``share`` of the columns of every row set missing (at least one)."""
    Q = B.copy()
    d = B.shape[1]
    n_hide = max(1, int(round(share * d)))
    mask = np.zeros(B.shape, dtype=bool)
    for i in range(len(B)):
        mask[i, rng.choice(d, n_hide, replace=False)] = True
    for t, c in enumerate(B.columns):
        Q.loc[mask[:, t], c] = np.nan
    return Q, mask


def run_table(name, quick=False):
    from sklearn.mixture import GaussianMixture
    from sklearn.model_selection import GridSearchCV, StratifiedKFold
    from sklearn.naive_bayes import GaussianNB
    from sklearn.neighbors import KernelDensity

    X, y = load(name)
    mixed = len(numeric_columns(X)) < X.shape[1]
    n_folds = 3 if quick else 5
    folds = StratifiedKFold(n_folds, shuffle=True, random_state=0)
    grid = {"n_hidden_states": [1, 2, 4] if quick else [1, 2, 4, 8]}
    rng = np.random.default_rng(0)
    res = {"ll": {}, "mae": {}, "acc": {}, "logloss": {}, "k": {}, "time": {}, "structure": {}}

    def add(kind, model, value):
        res[kind].setdefault(model, []).append(float(value))

    for tr, te in folds.split(X, y):
        A, B = standardise(X.iloc[tr].reset_index(drop=True), X.iloc[te].reset_index(drop=True))
        num = numeric_columns(A)
        An, Bn = A[num].to_numpy(float), B[num].to_numpy(float)
        fitted = {}
        for label, params in OURS.items():
            t0 = time.perf_counter()
            base = KernelLatentTree(random_state=0, **params)
            search = GridSearchCV(base, grid, cv=3).fit(A)
            fitted[label] = search.best_estimator_
            res["time"].setdefault(label, []).append(time.perf_counter() - t0)
            res["k"].setdefault(label, []).append(search.best_params_["n_hidden_states"])
            res["structure"].setdefault(label, []).append(search.best_estimator_.structure_)
            add("ll", label, search.best_estimator_.score(B))
        mean = An.mean(axis=0)
        cov = np.cov(An, rowvar=False) + 1e-6 * np.eye(len(num))
        if mixed:
            add(
                "ll",
                "independence (Gaussian + categorical)",
                MixedIndependence().fit(A).score_samples(B).mean(),
            )
            add(
                "ll",
                "StepMix mixed latent classes (BIC)",
                StepMixMixed().fit(A).score_samples(B).mean(),
            )
        else:
            add("ll", "full Gaussian", multivariate_normal(mean, cov).logpdf(Bn).mean())
            gmms = [GaussianMixture(c, reg_covar=1e-4, random_state=0).fit(An) for c in range(1, 6)]
            add("ll", "Gaussian mixture (BIC)", min(gmms, key=lambda m: m.bic(An)).score(Bn))
            add(
                "ll",
                "Chow-Liu Gaussian tree",
                ChowLiuGaussianTree().fit(An).score_samples(Bn).mean(),
            )
            kde = GridSearchCV(KernelDensity(), {"bandwidth": np.geomspace(0.05, 2.0, 12)}, cv=3)
            kde.fit(An)
            add("ll", "KDE (bandwidth by CV)", kde.best_estimator_.score(Bn) / len(Bn))
        # conditional means of the hidden numeric entries, 20% of the columns hidden
        Q, mask = hide(B, 0.2, rng)
        Qn = Q[num].to_numpy(float)
        errors = {label: [] for label in [*OURS, "Gaussian conditional mean"]}
        err_m = []
        for t, c in enumerate(num):
            rows = np.flatnonzero(mask[:, list(B.columns).index(c)])
            if rows.size == 0:
                continue
            truth = Bn[rows, t]
            for label, est in fitted.items():
                errors[label].append(np.abs(est.conditional_mean(Q.iloc[rows], c) - truth))
            errors["Gaussian conditional mean"].append(
                np.abs(gaussian_conditional_mean(mean, cov, Qn[rows], t) - truth)
            )
            err_m.append(np.abs(mean[t] - truth))
        for label, errs in errors.items():
            add("mae", label, np.concatenate(errs).mean())
        add("mae", "marginal mean", np.concatenate(err_m).mean())
        # classification by per-class likelihoods
        classes, y_tr = np.unique(y[tr], return_inverse=True)
        y_te = np.searchsorted(classes, y[te])
        for label, params in OURS.items():
            est = KernelLatentTree(res["k"][label][-1], random_state=0, **params)
            clf = LatentTreeClassifier(
                est, model="per_class", shared_tree=True, calibrate=False
            ).fit(A, y[tr])
            lp = np.log(np.clip(clf.predict_proba(B), 1e-300, None))
            add("acc", label, np.mean(lp.argmax(axis=1) == y_te))
            add("logloss", label, log_loss(lp, y_te))
        if mixed:
            lp = MixedNaiveBayes().fit(A, y_tr).predict_log_proba(B)
            add("acc", "naive Bayes (per-type)", np.mean(lp.argmax(axis=1) == y_te))
            add("logloss", "naive Bayes (per-type)", log_loss(lp, y_te))
        else:
            gnb = GaussianNB().fit(An, y_tr)
            lp = gnb.predict_log_proba(Bn)
            add("acc", "GaussianNB", np.mean(lp.argmax(axis=1) == y_te))
            add("logloss", "GaussianNB", log_loss(lp, y_te))
            lp = GaussianPerClass().fit(An, y_tr).predict_log_proba(Bn)
            add("acc", "full Gaussian per class", np.mean(lp.argmax(axis=1) == y_te))
            add("logloss", "full Gaussian per class", log_loss(lp, y_te))
        print(
            name,
            {m: v[-1] for m, v in res["structure"].items()},
            {m: round(v[-1], 3) for m, v in res["ll"].items()},
            flush=True,
        )
    return res


def run_gaussian(name, quick=False):
    """GaussianLatentTree on a numeric table, on the folds and hidden entries of
    :func:`run_table` (same seeds), with the Gaussian mixture's BIC grid timed beside."""
    from sklearn.mixture import GaussianMixture
    from sklearn.model_selection import StratifiedKFold

    X, y = load(name)
    folds = StratifiedKFold(3 if quick else 5, shuffle=True, random_state=0)
    rng = np.random.default_rng(0)  # the same hidden entries as run_table
    res = {"ll": {}, "mae": {}, "acc": {}, "logloss": {}, "k": {}, "time": {}, "structure": {}}

    def add(kind, model, value):
        res[kind].setdefault(model, []).append(value if kind == "structure" else float(value))

    for tr, te in folds.split(X, y):
        A, B = standardise(X.iloc[tr].reset_index(drop=True), X.iloc[te].reset_index(drop=True))
        An, Bn = A.to_numpy(float), B.to_numpy(float)
        t0 = time.perf_counter()
        gmms = [  # the grid of run_table, timed
            GaussianMixture(c, reg_covar=1e-4, random_state=0).fit(An) for c in range(1, 6)
        ]
        add("time", "Gaussian mixture (BIC)", time.perf_counter() - t0)
        gmm = min(gmms, key=lambda m: m.bic(An))
        # the same mixture on Yeo-Johnson columns (exponents in [0, 2], as ours), scored
        # with the Jacobian in the units of the table: what our transformation gives a GMM
        At, Bt, log_jacobian = An.copy(), Bn.copy(), np.zeros(len(Bn))
        for j in range(An.shape[1]):
            lam = fit_yeo_johnson(An[:, j])[0]
            At[:, j], Bt[:, j] = yeo_johnson(An[:, j], lam), yeo_johnson(Bn[:, j], lam)
            log_jacobian += yeo_johnson_log_derivative(Bn[:, j], lam)
        gmms = [GaussianMixture(c, reg_covar=1e-4, random_state=0).fit(At) for c in range(1, 6)]
        best = min(gmms, key=lambda m: m.bic(At))
        add(
            "ll",
            "Gaussian mixture (BIC) on Yeo-Johnson columns",
            best.score(Bt) + log_jacobian.mean(),
        )
        Q, mask = hide(B, 0.2, rng)
        # the conditional mean of the Gaussian mixture chosen by BIC (full covariances)
        Qn, errs = Q.to_numpy(float), []
        for t in range(An.shape[1]):
            rows = np.flatnonzero(mask[:, t])
            if rows.size:
                errs.append(np.abs(mixture_conditional_mean(gmm, Qn[rows], t) - Bn[rows, t]))
        add("mae", "Gaussian mixture (BIC) conditional mean", np.concatenate(errs).mean())
        classes, y_tr = np.unique(y[tr], return_inverse=True)
        y_te = np.searchsorted(classes, y[te])
        for label, params in GAUSSIAN.items():
            t0 = time.perf_counter()
            est = GaussianLatentTree(random_state=0, **params).fit(An)
            add("time", label, time.perf_counter() - t0)
            add("k", label, est.n_components_)
            add("structure", label, est.structure_)
            add("ll", label, est.score(Bn))
            errs = []
            for t in range(An.shape[1]):
                rows = np.flatnonzero(mask[:, t])
                if rows.size:
                    pred = est.conditional_mean(Q.iloc[rows].to_numpy(float), t)
                    errs.append(np.abs(pred - Bn[rows, t]))
            add("mae", label, np.concatenate(errs).mean())
            clf = LatentTreeClassifier(
                GaussianLatentTree(random_state=0, **params), calibrate=False
            ).fit(An, y_tr)
            lp = np.log(np.clip(clf.predict_proba(Bn), 1e-300, None))
            add("acc", label, np.mean(lp.argmax(axis=1) == y_te))
            add("logloss", label, log_loss(lp, y_te))
        print(name, {m: round(v[-1], 3) for m, v in res["ll"].items()}, flush=True)
    return res


def run_forms(name, k_per_fold, quick=False):
    """KernelLatentTree with ``hidden="auto"`` on a table, on the folds and hidden entries
    of :func:`run_table` (same seeds), with ``n_hidden_states`` the ``k_per_fold`` that its
    grid chose for ``structure="auto"``; the chosen form per fold under "structure"."""
    from sklearn.model_selection import StratifiedKFold

    X, y = load(name)
    folds = StratifiedKFold(3 if quick else 5, shuffle=True, random_state=0)
    rng = np.random.default_rng(0)  # the same hidden entries as run_table
    res = {"ll": {}, "mae": {}, "acc": {}, "logloss": {}, "k": {}, "time": {}, "structure": {}}
    res["classifier_form"] = {}

    def add(kind, model, value):
        res[kind].setdefault(model, []).append(value if kind == "structure" else float(value))

    for fold, (tr, te) in enumerate(folds.split(X, y)):
        A, B = standardise(X.iloc[tr].reset_index(drop=True), X.iloc[te].reset_index(drop=True))
        num = numeric_columns(A)
        Q, mask = hide(B, 0.2, rng)
        for label, params in FORMS.items():
            k = int(k_per_fold[fold])
            t0 = time.perf_counter()
            est = KernelLatentTree(k, random_state=0, **params).fit(A)
            add("time", label, time.perf_counter() - t0)
            add("k", label, k)
            add("structure", label, f"{est.hidden_}: {est.structure_}")
            add("ll", label, est.score(B))
            errs = []
            for c in num:
                rows = np.flatnonzero(mask[:, list(B.columns).index(c)])
                if rows.size:
                    errs.append(
                        np.abs(est.conditional_mean(Q.iloc[rows], c) - B[c].to_numpy()[rows])
                    )
            add("mae", label, np.concatenate(errs).mean())
            # the classifier decides the form once for all classes, by out-of-fold log-loss
            classes, y_tr = np.unique(y[tr], return_inverse=True)
            y_te = np.searchsorted(classes, y[te])
            clf = LatentTreeClassifier(
                KernelLatentTree(k, random_state=0, **params),
                model="per_class",
                shared_tree=True,
                calibrate=False,
            ).fit(A, y_tr)
            lp = np.log(np.clip(clf.predict_proba(B), 1e-300, None))
            add("acc", label, np.mean(lp.argmax(axis=1) == y_te))
            add("logloss", label, log_loss(lp, y_te))
            form = getattr(clf, "hidden_", "discrete (categorical columns)")
            res["classifier_form"].setdefault(label, []).append(form)
        print(
            name,
            {m: (v[-1], round(res["ll"][m][-1], 3)) for m, v in res["structure"].items()},
            {
                m: (v[-1], round(res["logloss"][m][-1], 3))
                for m, v in res["classifier_form"].items()
            },
            flush=True,
        )
    return res


def run_classification(name, quick=False):
    """Classification with ``n_hidden_states`` chosen for classification: an inner 3-fold
    grid on log-loss over 1, 2, 4 (the classifier a user would grid-search), default
    structure, one tree shared by the classes; naive Bayes / GaussianNB alongside."""
    from sklearn.model_selection import GridSearchCV, StratifiedKFold
    from sklearn.naive_bayes import GaussianNB

    X, y = load(name)
    mixed = len(numeric_columns(X)) < X.shape[1]
    folds = StratifiedKFold(3 if quick else 5, shuffle=True, random_state=0)
    res = {"acc": {}, "logloss": {}, "k": []}
    for tr, te in folds.split(X, y):
        A, B = standardise(X.iloc[tr].reset_index(drop=True), X.iloc[te].reset_index(drop=True))
        num = numeric_columns(A)
        classes, y_tr = np.unique(y[tr], return_inverse=True)
        y_te = np.searchsorted(classes, y[te])
        kernel = KernelLatentTree(structure="me", hidden="discrete", random_state=0)
        clf = LatentTreeClassifier(kernel, model="per_class", shared_tree=True, calibrate=False)
        search = GridSearchCV(
            clf, {"estimator__n_hidden_states": [1, 2, 4]}, cv=3, scoring="neg_log_loss"
        ).fit(A, y[tr])
        res["k"].append(search.best_params_["estimator__n_hidden_states"])
        lp = np.log(np.clip(search.best_estimator_.predict_proba(B), 1e-300, None))
        base = "naive Bayes (per-type)" if mixed else "GaussianNB"
        if mixed:
            lp_b = MixedNaiveBayes().fit(A, y_tr).predict_log_proba(B)
        else:
            lp_b = (
                GaussianNB()
                .fit(A[num].to_numpy(float), y_tr)
                .predict_log_proba(B[num].to_numpy(float))
            )
        for label, logp in (("KernelLatentTree (k' by log-loss)", lp), (base, lp_b)):
            res["acc"].setdefault(label, []).append(float(np.mean(logp.argmax(axis=1) == y_te)))
            res["logloss"].setdefault(label, []).append(log_loss(logp, y_te))
        print(
            name,
            "classification",
            res["k"][-1],
            {m: round(v[-1], 3) for m, v in res["logloss"].items()},
            flush=True,
        )
    return res


# ---------------------------------------------------------------------- report
def _ours_first(models):
    """Model names, KernelLatentTree's settings first."""
    return sorted(models, key=lambda m: (not m.startswith(("Kernel", "Gaussian")), m))


def _fmt(values):
    return f"{np.mean(values):.2f} +- {np.std(values):.2f}"


def report(results, quick=False):
    numeric = [t for t in results if t in NUMERIC]
    mixed = [t for t in results if t in MIXED]
    parts = [
        f"# bench_continuous: numeric and mixed real tables\n\nMachine: {machine()}. "
        "Stratified 5-fold CV; magic is a stratified subsample of 5,000 of its 19,020 rows; "
        "continuous columns standardised on each training fold. KernelLatentTree: discrete "
        "form (hidden='discrete') with structure='me' and with structure='auto' (best of "
        "Chow-Liu / 'me' / star on a held-out "
        "split), n_hidden_states by inner 3-fold grid over 1, 2, 4, 8 (chosen per fold "
        "below); its classifier shares one tree across classes. Mean +- sd over folds."
    ]
    for label, tables in (("Numeric tables", numeric), ("Mixed tables", mixed)):
        if not tables:
            continue
        models = _ours_first({m for t in tables for m in results[t]["ll"]})
        parts.append(
            f"## {label}: held-out log-likelihood per row\n\n"
            + markdown_table(
                ["model", *tables],
                [
                    [m]
                    + [_fmt(results[t]["ll"][m]) if m in results[t]["ll"] else "-" for t in tables]
                    for m in models
                ],
            )
        )
        parts.append(
            f"## {label}: conditional-mean MAE (sd units, 20% of columns hidden per row)\n\n"
            + markdown_table(
                ["model", *tables],
                [
                    [m]
                    + [
                        f"{np.mean(results[t]['mae'][m]):.3f}" if m in results[t]["mae"] else "-"
                        for t in tables
                    ]
                    for m in _ours_first({m for t in tables for m in results[t]["mae"]})
                ],
            )
        )
        clfs = _ours_first({m for t in tables for m in results[t]["acc"]})
        parts.append(
            f"## {label}: classification by per-class likelihoods (accuracy / log-loss)\n\n"
            + markdown_table(
                ["classifier", *tables],
                [
                    [m]
                    + [
                        f"{np.mean(results[t]['acc'][m]):.3f} / "
                        f"{np.mean(results[t]['logloss'][m]):.3f}"
                        if m in results[t]["acc"]
                        else "-"
                        for t in tables
                    ]
                    for m in clfs
                ],
            )
        )
    cv = [t for t in results if "classification" in results[t]]
    if cv:
        clfs = _ours_first({m for t in cv for m in results[t]["classification"]["acc"]})
        parts.append(
            "## Classification with k' chosen for classification (accuracy / log-loss)\n\n"
            "KernelLatentTree in LatentTreeClassifier (one tree shared by the classes), "
            "n_hidden_states by an inner 3-fold grid on log-loss over 1, 2, 4 (chosen per "
            "fold: "
            + "; ".join(f"{t}: {results[t]['classification']['k']}" for t in cv)
            + ").\n\n"
            + markdown_table(
                ["classifier", *cv],
                [
                    [m]
                    + [
                        f"{np.mean(results[t]['classification']['acc'][m]):.3f} / "
                        f"{np.mean(results[t]['classification']['logloss'][m]):.3f}"
                        if m in results[t]["classification"]["acc"]
                        else "-"
                        for t in cv
                    ]
                    for m in clfs
                ],
            )
        )
    parts.append(
        "## KernelLatentTree fits\n\n"
        + markdown_table(
            [
                "table",
                "rows x columns",
                "setting",
                "k' per fold",
                "structure per fold",
                "grid search + refit (s, mean per fold)",
            ],
            [
                [
                    t,
                    results[t]["shape"],
                    m,
                    results[t]["k"][m],
                    results[t]["structure"][m],
                    f"{np.mean(results[t]['time'][m]):.0f}",
                ]
                for t in results
                for m in [*OURS, *FORMS]
                if m in results[t]["k"]
            ],
        )
    )
    chosen = [t for t in results if results[t].get("classifier_form")]
    if chosen:
        parts.append(
            "## The classifier's form (hidden='auto')\n\n"
            "LatentTreeClassifier over KernelLatentTree(structure='auto', hidden='auto') "
            "(one shared tree) decides the form once for all classes by inner 5-fold "
            "log-loss (one 80/20 split above 2,000 training rows: magic); the form per "
            "outer fold:\n\n"
            + markdown_table(
                ["table", "setting", "form per fold"],
                [
                    [t, m, ", ".join(forms)]
                    for t in chosen
                    for m, forms in results[t]["classifier_form"].items()
                ],
            )
        )
    timed = [t for t in numeric if "Gaussian mixture (BIC)" in results[t]["time"]]
    if timed:
        parts.append(
            "## GaussianLatentTree fits\n\n"
            "n_components by BIC inside fit (1, 2, ... while it improves); the Gaussian "
            "mixture's time is its BIC grid over 1-5 components, fitted on the same fold.\n\n"
            + markdown_table(
                [
                    "table",
                    "setting",
                    "components (k' given to KernelLatentTree) per fold",
                    "structure per fold",
                    "fit (s, mean per fold)",
                    "GMM BIC grid (s)",
                    "ratio",
                ],
                [
                    [
                        t,
                        m,
                        [int(k) for k in results[t]["k"][m]],
                        results[t]["structure"][m],
                        f"{np.mean(results[t]['time'][m]):.2f}",
                        f"{np.mean(results[t]['time']['Gaussian mixture (BIC)']):.2f}",
                        f"{_time_ratio(results[t]['time'], m):.1f}x",
                    ]
                    for t in timed
                    for m in [*GAUSSIAN, *FORMS]
                    if m in results[t]["time"]
                ],
            )
        )
    save("bench_continuous" + ("_quick" if quick else ""), "\n\n".join(parts))
    _plot(results, quick)


def _time_ratio(times, model):
    """Mean fit time of ``model`` over the Gaussian mixture's BIC grid."""
    return np.mean(times[model]) / np.mean(times["Gaussian mixture (BIC)"])


def _plot(results, quick):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    tables = list(results)
    fig, ax = plt.subplots(figsize=(10, 4))
    models = sorted({m for t in tables for m in results[t]["ll"]})
    width = 0.8 / len(models)
    for i, m in enumerate(models):
        gains = [
            np.mean(results[t]["ll"][m]) - np.mean(results[t]["ll"]["KernelLatentTree"])
            if m in results[t]["ll"]
            else np.nan
            for t in tables
        ]
        ax.bar(np.arange(len(tables)) + i * width, gains, width, label=m)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks(np.arange(len(tables)) + 0.4 - width / 2, tables, rotation=20)
    ax.set_ylabel("held-out log-lik. minus KernelLatentTree")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(RESULTS / f"bench_continuous{'_quick' if quick else ''}.png", dpi=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--tables", default=",".join(NUMERIC + MIXED))
    parser.add_argument(
        "--classification",
        action="store_true",
        help="run only the classification with k' chosen by log-loss (saved beside)",
    )
    parser.add_argument(
        "--gaussian",
        action="store_true",
        help="run only GaussianLatentTree on the numeric tables (merged into the report)",
    )
    parser.add_argument(
        "--forms",
        action="store_true",
        help="run only KernelLatentTree(hidden='auto') on every table, at the k' per fold "
        "of a saved run (merged into the report)",
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="write the report from the saved per-table results (tables run in parallel "
        "processes save theirs under results/bench_continuous_parts/)",
    )
    args = parser.parse_args()
    warnings.filterwarnings("ignore", category=UserWarning)
    parts = RESULTS / ("bench_continuous_parts" + ("_quick" if args.quick else ""))
    parts.mkdir(parents=True, exist_ok=True)
    names = args.tables.split(",")
    if args.gaussian:
        for name in [n for n in names if n in NUMERIC]:
            res = run_gaussian(name, args.quick)
            (parts / f"{name}_gaussian.json").write_text(json.dumps(res))
        return
    if args.forms:
        for name in names:
            saved = json.loads((parts / f"{name}.json").read_text())
            res = run_forms(name, saved["k"][FORMS_K_FROM], args.quick)
            (parts / f"{name}_forms.json").write_text(json.dumps(res))
        return
    if args.classification:
        for name in names:
            res = run_classification(name, args.quick)
            (parts / f"{name}_classification.json").write_text(json.dumps(res))
        return
    elif not args.report_only:
        for name in names:
            res = run_table(name, args.quick)
            X, _ = load(name)
            res["shape"] = f"{X.shape[0]} x {X.shape[1]}"
            (parts / f"{name}.json").write_text(json.dumps(res))
    results = {}
    for name in (*NUMERIC, *MIXED):  # every table with saved results, in a fixed order
        if (parts / f"{name}.json").exists() and (args.report_only or name in names):
            results[name] = json.loads((parts / f"{name}.json").read_text())
            extra = parts / f"{name}_classification.json"
            if extra.exists():
                results[name]["classification"] = json.loads(extra.read_text())
            for part in ("gaussian", "forms"):
                path = parts / f"{name}_{part}.json"
                if path.exists():
                    for kind, values in json.loads(path.read_text()).items():
                        results[name].setdefault(kind, {}).update(values)
    report(results, args.quick)


if __name__ == "__main__":
    main()
