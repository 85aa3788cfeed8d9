"""
The latent tree of a real table
===============================

The breast-cancer table (Ljubljana, UCI; bundled with the package) has nine categorical
columns. ``SpectralLatentTree`` with ``structure="auto"`` compares six candidate trees -
the minimum-evolution search, Chow-Liu neighbor joining, two hidden Chow-Liu trees, the
Chow-Liu tree and a latent class model - on held-out rows, keeps the best and fits it on
all rows. The drawing shows the columns
(grey) and the hidden variables (white) of the chosen tree.
"""

import matplotlib.pyplot as plt

from ltm_sklearn import SpectralLatentTree
from ltm_sklearn.datasets import load_table

X, y = load_table("breast", names=True)
est = SpectralLatentTree(n_hidden_states=2, random_state=0).fit(X)

print("held-out log-likelihood of the candidates (nats per row):")
for name, score in est.structure_scores_.items():
    print(f"  {name:9s} {score:.3f}")
print(f"chosen: {est.structure_}; {len(est.tree_.hidden_nodes)} hidden nodes")

fig, ax = plt.subplots(figsize=(8, 4))
est.tree_.draw(ax=ax)
ax.set_title(f"breast: structure={est.structure_!r}, k'=2")
plt.show()

# %%
# Each hidden node groups columns that depend on each other more than on the rest.
# Its posterior given a row is available for every hidden node:
post = est.predict_hidden_proba(X.iloc[:3])
print(post.shape)  # (rows, hidden nodes, hidden states)
