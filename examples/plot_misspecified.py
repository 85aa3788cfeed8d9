"""
Fewer hidden states than the truth: hierarchical vs spectral
============================================================

The data come from a latent tree whose hidden nodes have four states; the models have
two (``k' < k``). The hierarchical decomposition of Song, Ishteva, Parikh, Xing & Park (ICML 2013)
fits every edge with the
best rank-``k'`` linker, the spectral algorithm of Parikh, Song & Xing (ICML 2011) truncates an SVD.
The left
panel compares their raw estimates (median relative error of the joint probability of
test rows), the right panel the held-out log-likelihood gap to the truth of the
normalised models that both estimators return (EM-polished).
"""

import matplotlib.pyplot as plt
import numpy as np

from ltm_sklearn import HierarchicalTensorLTM, SpectralLatentTree
from ltm_sklearn.datasets import LatentTreeModel, random_binary_tree

tree = random_binary_tree(9, random_state=0)
truth = LatentTreeModel.random(tree, 4, 4, noise=1.0, random_state=0)
X_test = truth.sample(2000, random_state=99)
log_p = truth.log_likelihood(X_test)
sizes = [1000, 3000, 10_000, 30_000]
curves = {"hierarchical": ([], []), "spectral": ([], [])}
for n in sizes:
    X = truth.sample(n, random_state=n)
    for name, cls in (("hierarchical", HierarchicalTensorLTM), ("spectral", SpectralLatentTree)):
        est = cls(n_hidden_states=2, tree=tree, random_state=0).fit(X)
        sign, log_abs = est.raw_log_abs(X_test)
        curves[name][0].append(np.median(np.abs(sign * np.exp(log_abs - log_p) - 1)))
        curves[name][1].append(log_p.mean() - est.score(X_test))

fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
for name, (err, gap) in curves.items():
    axes[0].loglog(sizes, err, "o-", label=name)
    axes[1].semilogx(sizes, gap, "o-", label=name)
axes[0].set_title("raw estimate: relative joint error")
axes[1].set_title("normalised model: held-out gap (nats/row)")
for ax in axes:
    ax.set_xlabel("training rows")
    ax.legend()
fig.tight_layout()
plt.show()
