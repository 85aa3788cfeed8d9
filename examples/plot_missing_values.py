"""
Conditional queries with missing values: filling in hidden pixels
=================================================================

Every digit of scikit-learn's digits data is an 8 x 8 image; binarised at 8 its pixels are
64 categorical columns. A latent tree model of the training digits answers
``P(pixel | the visible pixels)`` with the missing pixels summed out exactly: the right
half of each test digit is hidden (NaN) and drawn back as the probability that each
hidden pixel is dark.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits

from ltm_sklearn import SpectralLatentTree

digits = load_digits()
X = (digits.data >= 8).astype(float)
X_train, X_test = X[:1500], X[1500:1506]

est = SpectralLatentTree(n_hidden_states=8, structure="star", random_state=0).fit(X_train)
print(f"held-out log-likelihood: {est.score(X[1500:]):.2f} nats per digit")

masked = X_test.copy()
hidden = np.zeros((8, 8), dtype=bool)
hidden[:, 4:] = True
masked[:, hidden.ravel()] = np.nan
filled = masked.copy()
for j in np.flatnonzero(hidden.ravel()):
    proba = est.conditional_proba(masked, target=j)  # columns follow categories_[j]
    dark = est.categories_[j].index(1) if 1 in est.categories_[j] else None
    filled[:, j] = proba[:, dark] if dark is not None else 0.0

fig, axes = plt.subplots(3, len(X_test), figsize=(1.5 * len(X_test), 4.5))
for c in range(len(X_test)):
    for r, (img, title) in enumerate(
        (
            (X_test[c], "digit"),
            (np.nan_to_num(masked[c], nan=0.5), "right half hidden"),
            (filled[c], "P(dark | left half)"),
        )
    ):
        axes[r, c].imshow(img.reshape(8, 8), cmap="gray_r", vmin=0, vmax=1)
        axes[r, c].set_axis_off()
        if c == 0:
            axes[r, c].set_title(title, fontsize=8, loc="left")
fig.tight_layout()
plt.show()
