"""Layer 4, the estimators: :mod:`.base` owns the scikit-learn API (validation, fit,
partial_fit, score, queries) and the loop over the algorithms; the subclasses pick the
algorithm that gives the starting point (:mod:`.spectral`, :mod:`.hierarchical`,
:mod:`.quartet`, :mod:`.em`, :mod:`.kernel`); :mod:`.classifier` wraps any of them.
"""
