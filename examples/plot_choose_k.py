"""
Choosing the number of hidden states by held-out likelihood
===========================================================

``score`` is the mean log-likelihood per row of a normalised model, so scikit-learn's
``GridSearchCV`` picks the number of hidden states ``k'`` by held-out likelihood. The
curves compare a latent tree (``SpectralLatentTree``, structure chosen automatically)
with a latent class model (``LatentTreeEM`` on a star) and a Chow-Liu tree (no hidden
node) on the categorical columns of the German credit table.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.model_selection import GridSearchCV, KFold

from ltm_sklearn import LatentTreeEM, SpectralLatentTree
from ltm_sklearn.datasets import load_table

X, _ = load_table("german", columns="categorical", names=True)
grid = {"n_hidden_states": [1, 2, 3, 4, 6]}
cv = KFold(3, shuffle=True, random_state=0)
curves = {
    "latent tree (SpectralLatentTree)": SpectralLatentTree(random_state=0),
    "latent class (LatentTreeEM, star)": LatentTreeEM(structure="star", random_state=0),
}
fig, ax = plt.subplots(figsize=(6, 4))
for label, est in curves.items():
    search = GridSearchCV(est, grid, cv=cv).fit(X)
    mean = search.cv_results_["mean_test_score"]
    std = search.cv_results_["std_test_score"]
    ax.errorbar(grid["n_hidden_states"], mean, yerr=std, marker="o", capsize=3, label=label)
    print(f"{label}: best k' = {search.best_params_['n_hidden_states']}, {mean.max():.3f}")
chow_liu = [
    SpectralLatentTree(structure="chow_liu").fit(X.iloc[tr]).score(X.iloc[te])
    for tr, te in cv.split(X)
]
ax.axhline(np.mean(chow_liu), color="k", ls="--", label="Chow-Liu tree")
ax.set_xlabel("number of hidden states k'")
ax.set_ylabel("held-out log-likelihood (nats per row)")
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()
