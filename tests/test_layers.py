"""The package's imports run one way: estimators -> sources -> algorithms -> engine.

The import graph is read from the source with ``ast`` (every ``import`` of a package
module, at the top of a module or inside a function), so a cycle hidden by an import
inside a function fails here as well as one that fails at import time.
"""

import ast
import pathlib

import pytest

import ltm_sklearn

PACKAGE = pathlib.Path(ltm_sklearn.__file__).parent

#: layer of each subpackage; a module may import only from its own layer or below
LAYERS = {"_engine": 1, "_algorithms": 2, "_sources": 3, "_estimators": 4}
#: the public namespace on top: re-exports and the ground-truth / metric utilities
PUBLIC = 5
#: dependencies that a module may import lazily (optional extras)
OPTIONAL = {"dask", "distributed", "matplotlib", "networkx", "pyarrow"}


def _module_name(path):
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _layer(module):
    parts = module.split(".")
    return LAYERS.get(parts[1], PUBLIC) if len(parts) > 1 else PUBLIC


def _resolve(module, is_package, node):
    """Absolute names of the package modules an import statement reads."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "ltm_sklearn"]
    if node.level == 0:
        base = node.module or ""
        if base.split(".")[0] != "ltm_sklearn":
            return []
    else:
        parts = module.split(".")
        keep = len(parts) - node.level + (1 if is_package else 0)
        base = ".".join(parts[:keep] + ([node.module] if node.module else []))
    out = []
    for alias in node.names:  # `from . import streaming` names a module
        candidate = f"{base}.{alias.name}"
        out.append(candidate if candidate in _modules() else base)
    return out


_MODULES = {}


def _modules():
    if not _MODULES:
        for path in sorted(PACKAGE.rglob("*.py")):
            _MODULES[_module_name(path)] = path
    return _MODULES


def _graph():
    """``{module: {(imported module, line, inside a function)}}``."""
    graph = {}
    for module, path in _modules().items():
        tree = ast.parse(path.read_text())
        top = {id(n) for n in tree.body}
        edges = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _resolve(module, path.name == "__init__.py", node):
                    edges.add((target, node.lineno, id(node) not in top))
        graph[module] = edges
    return graph


def test_every_module_has_a_layer():
    for module in _modules():
        parts = module.split(".")
        if len(parts) > 1 and parts[1].startswith("_") and parts[1] not in LAYERS:
            pytest.fail(f"{module} is a private module outside the four layers")


def test_no_import_runs_upward():
    upward = [
        f"{m}:{line} imports {t} (layer {_layer(t)} above {_layer(m)})"
        for m, edges in _graph().items()
        for t, line, _ in edges
        if _layer(t) > _layer(m)
    ]
    assert not upward, "\n".join(upward)


def test_no_package_import_inside_a_function():
    inner = [
        f"{m}:{line} imports {t} inside a function"
        for m, edges in _graph().items()
        for t, line, nested in edges
        if nested
    ]
    assert not inner, "\n".join(inner)


def test_optional_dependencies_are_imported_lazily():
    """The core imports must not need an optional extra."""
    for module, path in _modules().items():
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            for name in names:
                assert name.split(".")[0] not in OPTIONAL, f"{module} imports {name} at the top"


def test_import_graph_has_no_cycle():
    graph = {m: {t for t, _, _ in edges if t in _modules()} for m, edges in _graph().items()}
    # a package's __init__ re-exporting its own modules is not a cycle of theirs
    for m in graph:
        graph[m] = {t for t in graph[m] if not (t.startswith(m + ".") and m != t)}
    state = {}

    def visit(m, path):
        state[m] = "open"
        for t in sorted(graph[m]):
            if state.get(t) == "open":
                cycle = path[path.index(t) :] + [t]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if t not in state:
                visit(t, path + [t])
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])


def test_the_checks_see_a_cycle_and_an_upward_import(tmp_path, monkeypatch):
    """The graph reader itself: a made-up upward import inside a function is found."""
    source = "def f():\n    from .._estimators.base import BaseLatentTree\n"
    node = ast.parse(source).body[0].body[0]
    targets = _resolve("ltm_sklearn._engine.moments", False, node)
    assert targets == ["ltm_sklearn._estimators.base"]
    assert _layer(targets[0]) > _layer("ltm_sklearn._engine.moments")
