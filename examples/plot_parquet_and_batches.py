"""
Fitting from a folder of parquet files: Dask and partial_fit
=============================================================

A table that does not fit in memory usually lives as a folder of files. Two ways to fit a
latent tree on it, both reading the data through additive statistics (pair tables, a
uniform sample of rows, projected moments, EM's expected counts):

* ``fit(dask_dataframe)``: the statistics are computed partition by partition on the
  active Dask scheduler - here a ``distributed.LocalCluster`` of two workers in threads
  of this process, in practice the cluster of a ``distributed.Client`` - and reduced on
  the cluster; only
  small tables reach this process (``pip install "ltm-sklearn[dask]"``);
* ``partial_fit(batch)`` on batches read one at a time, with no cluster at all.

Both give the model that ``fit`` gives on the whole table held in memory.
"""

# %%
# A folder of parquet files
# -------------------------
# Rows of a known latent tree model (32 binary columns, a balanced tree with binary
# hidden nodes), written as 8 files.
import shutil
import tempfile
from pathlib import Path

import dask.dataframe as dd
import numpy as np
import pandas as pd
from distributed import Client, LocalCluster

from ltm_sklearn import SpectralLatentTree
from ltm_sklearn.datasets import LatentTreeModel, balanced_binary_tree

truth = LatentTreeModel.random(balanced_binary_tree(32), 2, 2, random_state=0)
folder = Path(tempfile.mkdtemp()) / "table"
folder.mkdir()
for i in range(8):
    X = truth.sample(5000, random_state=i)
    pd.DataFrame(X, columns=[f"c{j}" for j in range(32)]).to_parquet(folder / f"{i}.parquet")
test = pd.DataFrame(truth.sample(5000, random_state=99), columns=[f"c{j}" for j in range(32)])
print(sorted(p.name for p in folder.iterdir()))

# %%
# On a Dask cluster
# -----------------
# Workers in threads of this process here (``processes=False``); a cluster of worker
# processes or machines works the same way.
with (
    LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
    ) as cluster,
    Client(cluster),
):
    on_dask = SpectralLatentTree(2, random_state=0).fit(dd.read_parquet(folder))
print(f"Dask: structure {on_dask.structure_!r}, held-out {on_dask.score(test):.4f}")

# %%
# In batches, without a cluster
# -----------------------------
batched = SpectralLatentTree(2, random_state=0)
for path in sorted(folder.glob("*.parquet")):
    batched.partial_fit(pd.read_parquet(path))
print(f"partial_fit: held-out {batched.score(test):.4f}")

# %%
# The in-memory fit, for comparison, and the truth
# -------------------------------------------------
whole = pd.concat([pd.read_parquet(p) for p in sorted(folder.glob("*.parquet"))])
in_memory = SpectralLatentTree(2, random_state=0).fit(whole)
print(f"in memory: held-out {in_memory.score(test):.4f}")
print(f"truth:     held-out {truth.log_likelihood(test.to_numpy()).mean():.4f}")
gap = np.abs(on_dask.score_samples(test) - in_memory.score_samples(test)).max()
print(f"largest per-row difference, Dask vs in memory: {gap:.1e}")
shutil.rmtree(folder.parent)  # the example's files
