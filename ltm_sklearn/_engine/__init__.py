"""Layer 1, the engine: the tree topology (:mod:`.tree`), categorical encoding and moment
statistics (:mod:`.moments`), message passing and sampling (:mod:`.inference`).

Imports nothing else of the package.
"""
