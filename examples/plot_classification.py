"""
Classifying by per-class likelihoods
====================================

``LatentTreeClassifier`` fits one latent tree density per class and classifies by Bayes'
rule. On the MONK-2 problem the class depends on how many of six attributes take their
first value - an interaction that naive Bayes cannot represent and a latent tree per
class can. Bars show the 5-fold accuracy and log-loss of the latent tree classifier,
``CategoricalNB`` and a per-class Chow-Liu tree.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.model_selection import StratifiedKFold, cross_validate
from sklearn.naive_bayes import CategoricalNB
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OrdinalEncoder

from ltm_sklearn import LatentTreeClassifier, SpectralLatentTree
from ltm_sklearn.datasets import load_table

X, y = load_table("monk2", names=True)
cv = StratifiedKFold(5, shuffle=True, random_state=0)
models = {
    "latent tree per class": LatentTreeClassifier(
        SpectralLatentTree(n_hidden_states=4, random_state=0)
    ),
    "Chow-Liu tree per class": LatentTreeClassifier(SpectralLatentTree(structure="chow_liu")),
    "CategoricalNB": make_pipeline(OrdinalEncoder(), CategoricalNB()),
}
scores = {}
for name, model in models.items():
    res = cross_validate(model, X, y, cv=cv, scoring=("accuracy", "neg_log_loss"))
    scores[name] = (res["test_accuracy"].mean(), -res["test_neg_log_loss"].mean())
    print(f"{name:24s} accuracy {scores[name][0]:.3f}  log-loss {scores[name][1]:.3f}")

fig, axes = plt.subplots(1, 2, figsize=(8, 3))
names = list(scores)
for ax, (i, title) in zip(axes, enumerate(("accuracy", "log-loss"))):
    ax.barh(np.arange(len(names)), [scores[n][i] for n in names], color=["C0", "C1", "C2"])
    ax.set_yticks(np.arange(len(names)), names, fontsize=8)
    ax.set_title(title)
fig.tight_layout()
plt.show()
