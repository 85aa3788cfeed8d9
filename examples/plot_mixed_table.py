"""
One tree over numeric and categorical columns
=============================================

The German credit table (bundled, from the UCI repository) mixes 3 numeric columns
(duration, amount, age) with 17 categorical ones (account status, credit history,
purpose, ...); the class (1 good, 2 bad credit risk) is kept apart. Four of the
categorical columns are stored as numbers of 2-4 codes (installment rate, years at the
residence, existing credits, people liable): declared categories here, they would be
modelled as densities spread between the codes (with a warning that says so).
``KernelLatentTree`` reads the column types from the pandas dtypes (or
``categorical_features=``): numeric columns get bump-mixture leaves, categorical ones
indicator leaves (Song, Parikh & Xing (NIPS 2011) section 4: with indicator features the kernel
algorithm is
the discrete one), all in one tree. ``score_samples`` is the log of density x
probability, and one model answers questions about either kind of column, with the
others missing.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.model_selection import train_test_split

from ltm_sklearn import KernelLatentTree, LatentTreeClassifier
from ltm_sklearn.datasets import load_table

X, y = load_table("german", names=True)
codes = ["installment_rate", "residence_since", "existing_credits", "people_liable"]
X = X.astype(dict.fromkeys(codes, "category"))
print(X.dtypes.map(lambda t: t.name).value_counts().to_string())
A, B, y_a, y_b = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)

est = KernelLatentTree(n_hidden_states=2, random_state=0).fit(A)
print(f"\ncategorical columns: {list(X.columns[est.is_categorical_])}")
print(f"held-out log-likelihood: {est.score(B):.2f} nats per row")

# %%
# The learned tree, leaves named after the columns.
fig, ax = plt.subplots(figsize=(9, 5))
est.tree_.draw(ax=ax)
ax.set_title("latent tree of the German credit table")

# %%
# Conditional questions
# ---------------------
# The purpose of a credit (categorical) given only the amount and the duration, and the
# amount (numeric) given only the purpose: every other column is missing (NaN).
query = B.iloc[:3].copy()
known = ["amount", "duration"]
for c in X.columns:
    if c not in known:
        query[c] = np.nan
proba = est.conditional_proba(query, target="purpose")
top = np.argsort(proba, axis=1)[:, ::-1][:, :2]
for row, t in zip(proba, top):
    cats = est.categories_[list(X.columns).index("purpose")]
    print(", ".join(f"P(purpose={cats[i]}) = {row[i]:.2f}" for i in t))

query = B.iloc[:3].copy()
for c in X.columns:
    if c != "purpose":
        query[c] = np.nan
print("E[credit amount | purpose]:", np.round(est.conditional_mean(query, "amount")))
print("actual purposes:", list(B["purpose"].iloc[:3]))

# %%
# Classification by per-class likelihoods
# ---------------------------------------
clf = LatentTreeClassifier(KernelLatentTree(2, random_state=0), shared_tree=True).fit(A, y_a)
majority = max(np.mean(y_b == c) for c in set(y_a))
print(f"accuracy {clf.score(B, y_b):.3f} (always the majority class: {majority:.3f})")
