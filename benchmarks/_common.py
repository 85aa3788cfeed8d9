"""Helpers shared by the benchmark scripts: timing, markdown tables, result files."""

from __future__ import annotations

import platform
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def timed(func, *args, **kwargs):
    t0 = time.perf_counter()
    out = func(*args, **kwargs)
    return out, time.perf_counter() - t0


def markdown_table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def machine():
    import os

    cpu = platform.processor() or platform.machine()
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"


def save(name, text):
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.md").write_text(text + "\n")
    print(text)


def plot_error_and_time(curves, panels, methods, path):
    """Log-log error (top row) and fit time (bottom row) vs N, one column per panel.

    ``curves[(panel, method)]`` is a list of ``(N, error, seconds)``. Needs matplotlib
    (bench extra); does nothing without it.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    import numpy as np

    fig, axes = plt.subplots(2, len(panels), figsize=(4 * len(panels), 7))
    for col, name in enumerate(panels):
        for m in methods:
            pts = np.array(curves[(name, m)])
            axes[0, col].loglog(pts[:, 0], pts[:, 1], "o-", label=m)
            axes[1, col].loglog(pts[:, 0], pts[:, 2], "o-", label=m)
        axes[0, col].set_title(name)
        axes[1, col].set_xlabel("training size N")
    axes[0, 0].set_ylabel("median relative joint error")
    axes[1, 0].set_ylabel("fit time (s)")
    axes[0, 0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def raw_spectral_fit(X, k, tree=None, method="nj", fit_raw=None):
    """The spectral algorithm's raw observable representation (Parikh, Song & Xing (ICML 2011))
    alone: one
    pass of moments, the structure learned with ``method`` when ``tree`` is None.
    ``fit_raw`` replaces ``fit_spectral`` (e.g. ``fit_hierarchical``, Song, Ishteva, Parikh, Xing &
    Park (ICML 2013)).

    Returns ``(params, seconds, score)`` where ``score(X)`` gives ``(sign, log |P_hat|)``.
    """
    import numpy as np

    from ltm_sklearn import LatentTree
    from ltm_sklearn._algorithms.spectral import fit_spectral, spectral_log_abs
    from ltm_sklearn._algorithms.structure import learn_tree, spectral_distance
    from ltm_sklearn._engine.encoding import CategoricalEncoder
    from ltm_sklearn._engine.moments import MomentEstimator

    t0 = time.perf_counter()
    enc = CategoricalEncoder()
    codes = enc.fit_transform(X)
    mom = MomentEstimator(codes, enc.n_states_)
    if tree is None:
        tree = learn_tree(spectral_distance(mom, k), method)
    tree = LatentTree(tree.edges, tree.n_observed)
    fit_raw = fit_spectral if fit_raw is None else fit_raw
    params = fit_raw(tree.with_observed_leaves(), mom, k, np.full(X.shape[1], 1e-6))
    seconds = time.perf_counter() - t0
    return params, seconds, lambda Z: spectral_log_abs(params, enc.transform(Z))
