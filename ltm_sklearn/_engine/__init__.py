"""Layer 1, the engine: the tree topology (:mod:`.tree`), categorical encoding and moment
statistics (:mod:`.moments`), message passing and sampling (:mod:`.inference`), the BLAS
threads of the passes (:mod:`.threads`) and the worker processes of batches of fits
(:mod:`.workers`).

Imports nothing else of the package.
"""
