"""
A density of continuous columns
===============================

``KernelLatentTree`` learns the tree of continuous columns from kernel features
(Song, Parikh & Xing (NIPS 2011)) and fits an explicit density: each column a mixture of Gaussian
bumps given
its parent, bandwidths chosen by held-out likelihood. The data come from a latent tree
with two-state hidden nodes and Gaussian-mixture leaves, so every column is bimodal. The
contours are the fitted density of two columns with the other two summed out (their
entries set to NaN), over a scatter of the data; the held-out gap to the true density is
printed.
"""

import matplotlib.pyplot as plt
import numpy as np

from ltm_sklearn import KernelLatentTree
from ltm_sklearn.datasets import GaussianLeafTreeModel, balanced_binary_tree

truth = GaussianLeafTreeModel.random(balanced_binary_tree(4), 2, sigma=0.4, random_state=1)
X = truth.sample(3000, random_state=0)
est = KernelLatentTree(n_hidden_states=2, hidden="discrete", random_state=0).fit(X)
X_test = truth.sample(1000, random_state=1)
print(f"held-out log-density: {est.score(X_test):.3f}")
print(f"gap to the true density: {truth.log_likelihood(X_test).mean() - est.score(X_test):.3f}")

g0 = np.linspace(X[:, 0].min() - 1, X[:, 0].max() + 1, 80)
g1 = np.linspace(X[:, 1].min() - 1, X[:, 1].max() + 1, 80)
G0, G1 = np.meshgrid(g0, g1)
grid = np.full((G0.size, 4), np.nan)
grid[:, 0], grid[:, 1] = G0.ravel(), G1.ravel()
density = np.exp(est.score_samples(grid)).reshape(G0.shape)

fig, ax = plt.subplots(figsize=(5, 4))
ax.scatter(X[:500, 0], X[:500, 1], s=3, color="0.6")
cs = ax.contour(G0, G1, density, levels=8, cmap="viridis")
ax.set_xlabel("column 0")
ax.set_ylabel("column 1")
ax.set_title("fitted density of two columns (others summed out)")
fig.colorbar(cs)
fig.tight_layout()
plt.show()
