"""Valid, competitive likelihoods on real categorical tables.

For every table (the categorical tables bundled with the package, the categorical
columns of german and contraceptive, and scikit-learn's digits binarised at 8):

1. Density: 5-fold held-out log-likelihood per row of every estimator of the suite with
   its defaults and ``n_hidden_states`` chosen by an inner 3-fold ``GridSearchCV``,
   against an independence model and a Chow-Liu tree (both with add-one smoothing, written
   here from their 1968 definitions), a latent class model (``LatentTreeEM`` on a star,
   k' by the same inner grid search) and StepMix's latent class model (``bench`` extra;
   same grid). Fit time is that of the refitted best model. The total mass
   ``sum_x exp(score_samples(x))`` of each model of the first fold: exact enumeration
   where the table has at most 1e6 configurations, importance sampling from the
   training fold's independence model (20,000 draws, +- one standard error) otherwise.
2. Classification: stratified 5-fold log-loss and accuracy of ``LatentTreeClassifier``
   around each estimator, one model per class (``model="per_class"``; k' by inner grid
   search on the log-loss; Bayes' rule as it is, ``calibrate=False``, so that the density
   models are compared as they are, without the classifier's joint model), against
   CategoricalNB and a per-class Chow-Liu classifier (one Chow-Liu tree per class, add-one
   smoothing, the class prior).

    python benchmarks/bench_real.py [--quick] [--tables breast,car] [--part density|classify]
        [--models QuartetTreeLearner]   # re-run some estimators, keep the other rows

Writes benchmarks/results/bench_real.md (``--quick``: ``*_quick``).
"""

from __future__ import annotations

import argparse
import itertools
import time
import warnings

import numpy as np
import pandas as pd
from _common import RESULTS, machine, markdown_table, save
from joblib import Parallel, delayed
from scipy.sparse.csgraph import minimum_spanning_tree
from scipy.special import logsumexp
from sklearn.base import BaseEstimator, ClassifierMixin, DensityMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, KFold, StratifiedKFold
from sklearn.naive_bayes import CategoricalNB

from ltm_sklearn import (
    HierarchicalTensorLTM,
    LatentTreeClassifier,
    LatentTreeEM,
    QuartetTreeLearner,
    SpectralLatentTree,
)
from ltm_sklearn._engine.encoding import CategoricalEncoder
from ltm_sklearn.datasets import load_table

TABLES = [
    "breast",
    "monk2",
    "car",
    "lymphography",
    "contraceptive",
    "german",
    "marketing",
    "digits",
]
ESTIMATORS = {
    "SpectralLatentTree": SpectralLatentTree,
    "HierarchicalTensorLTM": HierarchicalTensorLTM,
    "QuartetTreeLearner": QuartetTreeLearner,
    "LatentTreeEM": LatentTreeEM,
}
MAX_ENUMERATION = 1_000_000


def load(name):
    """The categorical columns of a table as a DataFrame of categories, and its classes."""
    if name == "digits":
        from sklearn.datasets import load_digits

        digits = load_digits()
        X = pd.DataFrame((digits.data >= 8).astype(int)).astype("category")
        X.columns = [f"px{j}" for j in range(X.shape[1])]
        return X, digits.target.astype(str)
    return load_table(name, columns="categorical")


# ---------------------------------------------------------------------- baselines
def _codes(encoder, X):
    return encoder.transform(X).astype(np.int64)


class _Baseline(DensityMixin, BaseEstimator):
    """A density over given categories, scored by its mean log-likelihood per row."""

    def __init__(self, categories=None):
        self.categories = categories

    def score(self, X, y=None):
        return float(np.mean(self.score_samples(X)))


class Independence(_Baseline):
    """Product of the columns' add-one smoothed marginals."""

    def fit(self, X, y=None):
        self.encoder_ = CategoricalEncoder(self.categories or "auto").fit(X)
        codes = _codes(self.encoder_, X)
        n = self.encoder_.n_states_
        self.log_p_ = [
            np.log((np.bincount(c[c >= 0], minlength=k) + 1.0) / ((c >= 0).sum() + k))
            for c, k in zip(codes, n)
        ]
        return self

    def score_samples(self, X):
        codes = _codes(self.encoder_, X)
        out = np.zeros(codes.shape[1])
        for c, lp in zip(codes, self.log_p_):
            unseen = np.log(1.0 / (len(lp) + 2.0))
            out += np.where(c >= 0, lp[np.maximum(c, 0)], np.where(c == -1, 0.0, unseen))
        return out


class ChowLiu(_Baseline):
    """Chow-Liu tree (Chow & Liu 1968): maximum mutual-information spanning tree over the
    columns, conditional tables with add-one smoothing."""

    def fit(self, X, y=None):
        self.encoder_ = CategoricalEncoder(self.categories or "auto").fit(X)
        codes = _codes(self.encoder_, X)
        n = self.encoder_.n_states_
        d = len(n)
        mi = np.zeros((d, d))
        for i, j in itertools.combinations(range(d), 2):
            t = np.zeros((n[i], n[j]))
            ok = (codes[i] >= 0) & (codes[j] >= 0)
            np.add.at(t, (codes[i][ok], codes[j][ok]), 1.0)
            t /= max(t.sum(), 1.0)
            pi, pj = t.sum(1, keepdims=True), t.sum(0, keepdims=True)
            nz = t > 0
            mi[i, j] = mi[j, i] = np.sum(t[nz] * np.log(t[nz] / (pi @ pj)[nz]))
        w = mi.max() + 1.0 - mi
        np.fill_diagonal(w, 0.0)
        mst = minimum_spanning_tree(w).tocoo()
        adj = [[] for _ in range(d)]
        for u, v in zip(mst.row, mst.col):
            adj[u].append(v)
            adj[v].append(u)
        self.parent_ = [-1] * d
        order, seen = [0], {0}
        for u in order:
            for v in adj[u]:
                if v not in seen:
                    seen.add(v)
                    self.parent_[v] = u
                    order.append(v)
        self.tables_ = []
        for j in range(d):
            p = self.parent_[j]
            if p < 0:
                c = codes[j][codes[j] >= 0]
                self.tables_.append(
                    np.log((np.bincount(c, minlength=n[j]) + 1.0) / (c.size + n[j]))
                )
                continue
            t = np.ones((n[p], n[j]))
            ok = (codes[p] >= 0) & (codes[j] >= 0)
            np.add.at(t, (codes[p][ok], codes[j][ok]), 1.0)
            self.tables_.append(np.log(t / t.sum(axis=1, keepdims=True)))
        return self

    def score_samples(self, X):
        """Exact log-likelihood; a missing parent is summed out through its marginal-free
        approximation (the tables used here have no missing entries)."""
        codes = _codes(self.encoder_, X)
        out = np.zeros(codes.shape[1])
        for j, table in enumerate(self.tables_):
            c = codes[j]
            unseen = np.log(1.0 / (table.shape[-1] + 2.0))
            if table.ndim == 1:
                out += np.where(c >= 0, table[np.maximum(c, 0)], unseen)
                continue
            pc = codes[self.parent_[j]]
            row = np.where(pc >= 0, pc, 0)
            val = table[row, np.maximum(c, 0)]
            # an unseen parent category: the child's average table row
            val = np.where(
                pc >= 0, val, logsumexp(table, axis=0)[np.maximum(c, 0)] - np.log(table.shape[0])
            )
            out += np.where(c >= 0, val, unseen)
        return out


class StepMixLCM(_Baseline):
    """StepMix's categorical latent class model (bench extra), scored per row from its
    fitted parameters (unseen or unobserved categories clipped at 1e-15, as StepMix does)."""

    def __init__(self, n_hidden_states=2, categories=None):
        self.n_hidden_states = n_hidden_states
        self.categories = categories

    def fit(self, X, y=None):
        from stepmix.stepmix import StepMix

        self.encoder_ = CategoricalEncoder(self.categories or "auto").fit(X)
        codes = _codes(self.encoder_, X).T
        self.model_ = StepMix(
            n_components=self.n_hidden_states,
            measurement="categorical",
            verbose=0,
            progress_bar=0,
            random_state=0,
        )
        self.model_.fit(codes)
        params = self.model_.get_parameters()
        self.weights_ = np.asarray(params["weights"])
        pis = np.asarray(params["measurement"]["pis"])  # (k, d * n_outcomes)
        self.pis_ = pis.reshape(self.n_hidden_states, codes.shape[1], -1)
        return self

    def score_samples(self, X):
        codes = _codes(self.encoder_, X).T
        k, d, m = self.pis_.shape
        out = np.log(self.weights_)[None, :].repeat(codes.shape[0], axis=0)
        for j in range(d):
            c = codes[:, j]
            p = np.full((codes.shape[0], k), 1e-15)
            ok = (c >= 0) & (c < m)
            p[ok] = np.maximum(self.pis_[:, j, c[ok]].T, 1e-15)
            p[c == -1] = 1.0
            out += np.log(p)
        return logsumexp(out, axis=1)


class ChowLiuClassifier(ClassifierMixin, BaseEstimator):
    """One Chow-Liu tree per class (shared categories) and the class prior."""

    def fit(self, X, y):
        self.classes_, idx = np.unique(y, return_inverse=True)
        cats = CategoricalEncoder().fit(X).categories_
        self.models_ = [ChowLiu(cats).fit(X[idx == c]) for c in range(len(self.classes_))]
        self.prior_ = np.bincount(idx) / len(idx)
        return self

    def predict_log_proba(self, X):
        j = np.column_stack([m.score_samples(X) for m in self.models_]) + np.log(self.prior_)
        return j - logsumexp(j, axis=1, keepdims=True)

    def predict_proba(self, X):
        return np.exp(self.predict_log_proba(X))

    def predict(self, X):
        return self.classes_[np.argmax(self.predict_log_proba(X), axis=1)]


def categorical_nb(categories):
    """CategoricalNB on ordinal codes of the shared categories (add-one smoothing)."""
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OrdinalEncoder

    enc = OrdinalEncoder(
        categories=[list(map(str, c)) for c in categories],
        handle_unknown="use_encoded_value",
        unknown_value=-1,
    )

    class _Codes(BaseEstimator):
        def fit(self, X, y=None):
            enc.fit(X.astype(str))
            return self

        def transform(self, X):
            codes = enc.transform(X.astype(str))
            return np.where(codes < 0, 0, codes).astype(int)

    return make_pipeline(
        _Codes(), CategoricalNB(alpha=1.0, min_categories=[len(c) for c in categories])
    )


# ---------------------------------------------------------------------- mass
def total_mass(model, X_train, categories, rng):
    """``(mass, standard error or 0, method)`` of ``exp(score_samples)``."""
    sizes = [len(c) for c in categories]
    if np.prod(sizes, dtype=float) <= MAX_ENUMERATION:
        grid = np.array(list(itertools.product(*[range(s) for s in sizes])))
        rows = pd.DataFrame(
            {
                col: pd.Categorical.from_codes(grid[:, j], categories=cats)
                for j, (col, cats) in enumerate(zip(X_train.columns, categories))
            }
        )
        total = 0.0
        for start in range(0, len(rows), 200_000):
            total += np.exp(model.score_samples(rows.iloc[start : start + 200_000])).sum()
        return total, 0.0, "exact"
    # importance sampling from the smoothed independence model of the training rows
    n_draws = 20_000
    log_q = np.zeros(n_draws)
    cols = {}
    for col, cats in zip(X_train.columns, categories):
        counts = X_train[col].value_counts().reindex(cats, fill_value=0).to_numpy() + 1.0
        p = counts / counts.sum()
        draw = rng.choice(len(cats), size=n_draws, p=p)
        log_q += np.log(p[draw])
        cols[col] = pd.Categorical.from_codes(draw, categories=cats)
    w = np.exp(model.score_samples(pd.DataFrame(cols)) - log_q)
    return float(w.mean()), float(w.std() / np.sqrt(n_draws)), "IS"


# ---------------------------------------------------------------------- runs
def density_fold(name, fold, train, test, k_grid, quick, only=None):
    X, _ = load(name)
    cats = [list(X[c].cat.categories) for c in X.columns]
    X_train, X_test = X.iloc[train], X.iloc[test]
    rng = np.random.default_rng(fold)
    models = {
        "independence": Independence(cats),
        "Chow-Liu": ChowLiu(cats),
    }
    grids = {
        "latent class (LatentTreeEM star)": LatentTreeEM(structure="star", random_state=0),
    }
    try:
        import stepmix  # noqa: F401

        grids["latent class (StepMix)"] = StepMixLCM(categories=cats)
    except ImportError:
        pass
    if only is not None:  # a re-run of some of the suite's estimators
        models, grids = {}, {}
    for est_name, cls in ESTIMATORS.items():
        if only is None or est_name in only:
            grids[est_name] = cls(random_state=0)
    out = []
    for label, model in models.items():
        t0 = time.perf_counter()
        model.fit(X_train)
        out.append((label, model.score(X_test), time.perf_counter() - t0, None, model))
    inner = KFold(3, shuffle=True, random_state=fold)
    for label, est in grids.items():
        search = GridSearchCV(est, {"n_hidden_states": k_grid}, cv=inner)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            search.fit(X_train)
            t0 = time.perf_counter()
            best = search.best_estimator_
            best.fit(X_train)
            fit_s = time.perf_counter() - t0
        out.append((label, best.score(X_test), fit_s, search.best_params_["n_hidden_states"], best))
    rows = []
    for label, score, fit_s, k, model in out:
        extra = {}
        if fold == 0:
            mass, err, how = total_mass(model, X_train, cats, rng)
            extra = {"mass": mass, "mass_err": err, "mass_how": how}
        chosen = getattr(model, "structure_", None)
        rows.append(
            dict(
                table=name,
                fold=fold,
                model=label,
                test=score,
                fit_s=fit_s,
                k=k,
                structure=chosen,
                **extra,
            )
        )
    print(
        f"density {name} fold {fold}: " + ", ".join(f"{r['model']} {r['test']:.3f}" for r in rows),
        flush=True,
    )
    return rows


def classify_fold(name, fold, train, test, k_grid, only=None):
    from sklearn.metrics import accuracy_score, log_loss

    X, y = load(name)
    cats = [list(X[c].cat.categories) for c in X.columns]
    X_train, X_test, y_train, y_test = X.iloc[train], X.iloc[test], y[train], y[test]
    labels = np.unique(y)
    models = {
        "CategoricalNB": categorical_nb(cats),
        "per-class Chow-Liu": ChowLiuClassifier(),
    }
    if only is not None:  # a re-run of some of the suite's estimators
        models = {}
    inner = StratifiedKFold(3, shuffle=True, random_state=fold)
    for est_name, cls in ESTIMATORS.items():
        if only is not None and est_name not in only:
            continue
        clf = LatentTreeClassifier(cls(random_state=0), model="per_class", calibrate=False)
        models[est_name] = GridSearchCV(
            clf, {"estimator__n_hidden_states": k_grid}, cv=inner, scoring="neg_log_loss"
        )
    rows = []
    for label, model in models.items():
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(X_train, y_train)
        fit_s = time.perf_counter() - t0
        proba = model.predict_proba(X_test)
        full = np.zeros((len(y_test), len(labels)))  # columns of every class of the table
        full[:, [list(labels).index(c) for c in model.classes_]] = proba
        rows.append(
            dict(
                table=name,
                fold=fold,
                model=label,
                log_loss=log_loss(y_test, np.clip(full, 1e-15, 1), labels=labels),
                accuracy=accuracy_score(y_test, labels[np.argmax(full, axis=1)]),
                fit_s=fit_s,
            )
        )
    print(
        f"classify {name} fold {fold}: "
        + ", ".join(f"{r['model']} {r['log_loss']:.3f}" for r in rows),
        flush=True,
    )
    return rows


def report(density, classification, quick):
    suffix = "_quick" if quick else ""
    n_folds = 2 if quick else 5
    text = [f"# bench_real{suffix}", "", f"Machine: {machine()}.", ""]
    if density is not None and len(density):
        d = pd.DataFrame(density)
        text += [f"## Held-out log-likelihood (nats per row, mean of {n_folds} folds)", ""]
        piv = d.pivot_table(index="model", columns="table", values="test", aggfunc="mean")
        piv = piv[[t for t in TABLES if t in piv.columns]]
        text.append(
            markdown_table(
                ["model"] + list(piv.columns),
                [[m] + [f"{v:.3f}" for v in piv.loc[m]] for m in piv.index],
            )
        )
        base = ["independence", "Chow-Liu", "latent class (LatentTreeEM star)"]
        if "latent class (StepMix)" in piv.index:
            base.append("latent class (StepMix)")
        best_base = piv.loc[[b for b in base if b in piv.index]].max()
        text += [
            "",
            "Margin over the Chow-Liu tree / over the best of independence, Chow-Liu "
            "and latent class models (nats per row):",
            "",
        ]
        rows = []
        for m in ESTIMATORS:
            if m in piv.index:
                rows.append(
                    [m]
                    + [
                        f"{piv.loc[m, t] - piv.loc['Chow-Liu', t]:+.3f} / "
                        f"{piv.loc[m, t] - best_base[t]:+.3f}"
                        for t in piv.columns
                    ]
                )
        text.append(markdown_table(["model"] + list(piv.columns), rows))
        kk = d.pivot_table(
            index="model",
            columns="table",
            values="k",
            aggfunc=lambda v: "/".join(str(int(x)) for x in v if x == x),
        )
        text += ["", "k' chosen by the inner grid search (per fold):", ""]
        kk = kk[[t for t in TABLES if t in kk.columns]]
        text.append(
            markdown_table(["model"] + list(kk.columns), [[m] + list(kk.loc[m]) for m in kk.index])
        )
        st = d.dropna(subset=["structure"]).pivot_table(
            index="model",
            columns="table",
            values="structure",
            aggfunc=lambda v: "/".join(str(x) for x in v),
        )
        if len(st):
            st = st[[t for t in TABLES if t in st.columns]]
            text += ["", 'Structure chosen by `structure="auto"` (per fold):', ""]
            text.append(
                markdown_table(
                    ["model"] + list(st.columns), [[m] + list(st.loc[m]) for m in st.index]
                )
            )
        tm = d.pivot_table(index="model", columns="table", values="fit_s", aggfunc="mean")
        tm = tm[[t for t in TABLES if t in tm.columns]]
        text += ["", f"Fit time of the refitted model (seconds, mean of {n_folds} folds):", ""]
        text.append(
            markdown_table(
                ["model"] + list(tm.columns),
                [[m] + [f"{v:.2f}" for v in tm.loc[m]] for m in tm.index],
            )
        )
        ms = d[d.fold == 0]
        text += [
            "",
            "Total mass sum_x exp(score_samples(x)) of the fold-0 models (exact "
            "enumeration, or importance sampling +- one standard error):",
            "",
        ]
        rows = []
        for m in piv.index:
            cells = []
            for t in piv.columns:
                r = ms[(ms.model == m) & (ms.table == t)]
                if not len(r):
                    cells.append("-")
                    continue
                r = r.iloc[0]
                cells.append(
                    f"{r.mass:.12f}"
                    if r.mass_how == "exact"
                    else f"{r.mass:.3f} +- {r.mass_err:.3f} (IS)"
                )
            rows.append([m] + cells)
        text.append(markdown_table(["model"] + list(piv.columns), rows))
    if classification is not None and len(classification):
        c = pd.DataFrame(classification)
        for value, title in (("log_loss", "log-loss"), ("accuracy", "accuracy")):
            piv = c.pivot_table(index="model", columns="table", values=value, aggfunc="mean")
            piv = piv[[t for t in TABLES if t in piv.columns]]
            text += ["", f"## Classification {title} (stratified {n_folds}-fold)", ""]
            text.append(
                markdown_table(
                    ["model"] + list(piv.columns),
                    [[m] + [f"{v:.3f}" for v in piv.loc[m]] for m in piv.index],
                )
            )
    save(f"bench_real{suffix}", "\n".join(text))


def _merged(rows, part, quick, only):
    """Save the rows of one part; with ``only``, the saved rows of the other models (and of
    these models on tables not re-run) are kept. Returns all rows."""
    path = RESULTS / f"bench_real_{part}{'_quick' if quick else ''}.csv"
    new = pd.DataFrame(rows)
    if only is not None and path.exists():
        old = pd.read_csv(path)
        redone = old["model"].isin(only) & old["table"].isin(set(new["table"]))
        new = pd.concat([old[~redone], new], ignore_index=True)
    new.to_csv(path, index=False)
    return new.to_dict("records")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--tables", default=",".join(TABLES))
    ap.add_argument("--part", default="density,classify")
    ap.add_argument("--n-jobs", type=int, default=2)
    ap.add_argument(
        "--models",
        default=None,
        help="re-run only these estimators of the suite (comma-separated) and replace their "
        "rows in the saved results; the other rows are kept",
    )
    args = ap.parse_args()
    tables = args.tables.split(",")
    only = None if args.models is None else set(args.models.split(","))
    if only is not None and not only <= set(ESTIMATORS):
        ap.error(f"--models must be among {sorted(ESTIMATORS)}")
    k_grid = [1, 2, 4] if args.quick else [1, 2, 4, 8]
    n_folds = 2 if args.quick else 5
    density = classification = None
    jobs = []
    for name in tables:
        X, y = load(name)
        if "density" in args.part:
            for f, (tr, te) in enumerate(KFold(5, shuffle=True, random_state=0).split(X)):
                if f < n_folds:
                    jobs.append(delayed(density_fold)(name, f, tr, te, k_grid, args.quick, only))
    if jobs:
        parts = Parallel(n_jobs=args.n_jobs, verbose=5)(jobs)
        density = _merged([r for p in parts for r in p], "density", args.quick, only)
    jobs = []
    for name in tables:
        X, y = load(name)
        if "classify" in args.part:
            skf = StratifiedKFold(5, shuffle=True, random_state=0)
            for f, (tr, te) in enumerate(skf.split(X, y)):
                if f < n_folds:
                    jobs.append(delayed(classify_fold)(name, f, tr, te, k_grid[:3], only))
    if jobs:
        parts = Parallel(n_jobs=args.n_jobs, verbose=5)(jobs)
        classification = _merged([r for p in parts for r in p], "classify", args.quick, only)
    report(density, classification, args.quick)


if __name__ == "__main__":
    main()
