"""Layer 2, learning algorithms as functions over the engine: EM (:mod:`.em`), the
spectral observable representation and its explicit recovery (:mod:`.spectral`), the
hierarchical decomposition (:mod:`.hierarchical`), tensor methods (:mod:`.tensor`), kernel
leaves (:mod:`.kernel_leaves`) and structure learning (:mod:`.structure`).

Imports the engine only.
"""
