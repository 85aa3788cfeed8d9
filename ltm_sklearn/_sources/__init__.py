"""Layer 3, data sources: each produces a :class:`~ltm_sklearn._engine.moments.MomentEstimator`
(the statistics object the algorithms read). In memory the estimators build it directly
from the encoded rows; :mod:`.streaming` accumulates it from batches (``partial_fit``) and
:mod:`.distributed` reduces it over the partitions of a Dask collection.

Imports the engine and the algorithms, never an estimator.
"""
