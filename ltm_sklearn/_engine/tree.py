"""Latent tree topologies: construction, validation, rooting, traversal orders and I/O.

One concept, :class:`LatentTree` and the few functions on its topology (attaching
columns, choosing the root's state order); most of the length is its I/O (edge lists,
Newick, networkx) and drawing.

Node numbering follows the convention of the whole package: the observed variables are
nodes ``0 .. n_observed - 1`` (the columns of ``X``, in order) and hidden nodes are numbered
after them, ``n_observed .. n_nodes - 1``.
"""

from __future__ import annotations

import numbers
import re
from collections import Counter, deque
from collections.abc import Iterable, Sequence

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import shortest_path

__all__ = ["LatentTree", "attach_columns"]


def _whole(value):
    """``value`` as an int when it is an integer or a whole number (no truncation), else
    ``None`` (bools are not numbers here)."""
    if not isinstance(value, (bool, np.bool_)):
        if isinstance(value, (numbers.Integral, np.integer)):
            return int(value)
        if isinstance(value, (numbers.Real, np.floating)) and float(value).is_integer():
            return int(value)
    return None


def _node_id(value, edge):
    """A node of an edge list as an int: an integer, or a whole number (no truncation)."""
    node = _whole(value)
    if node is None:
        raise ValueError(
            f"The edge {edge!r} names node {value!r}: an edge list takes integer node ids "
            "(the columns 0..n_features-1, then the hidden nodes); to name nodes use a "
            "Newick string or a networkx graph."
        )
    return node


class LatentTree:
    """An undirected tree whose leaves are observed columns and whose other nodes are hidden.

    Parameters
    ----------
    edges : iterable of (int, int)
        Undirected edges over node ids. Observed variables are ``0 .. n_observed - 1``,
        hidden nodes are numbered after them.
    n_observed : int
        Number of observed variables (columns of the data).
    root : int, default=None
        Node at which the tree is rooted. ``None`` picks a hidden node of minimal
        eccentricity (the tree centre), which keeps chains of hidden nodes between a node
        and its representative leaves short (Parikh, Song & Xing (ICML 2011), Theorem 1: sample
        complexity grows
        exponentially in the length of hidden chains).
    feature_names : sequence of str, default=None
        Names of the observed variables, used by :meth:`to_newick` and drawing.

    Attributes
    ----------
    edges : list of tuple of int
        The undirected edges ``(u, v)``, ``u < v``, sorted.
    n_nodes : int
    n_observed : int
    feature_names : list of str or None
        Names of the observed nodes, as given (as strings).
    hidden_nodes, observed_nodes, leaves : list of int
        Ids of the hidden nodes, of the observed nodes and of the nodes of degree one
        (the single node of a one-node tree).
    root : int
    parent : ndarray of shape (n_nodes,)
        Parent of each node in the rooted tree, ``-1`` for the root.
    children : list of tuple of int
    preorder : ndarray
        Topological order, root first.
    postorder : ndarray
        Reverse topological order (children before parents).

    Examples
    --------
    >>> from ltm_sklearn import LatentTree
    >>> t = LatentTree([(0, 4), (1, 4), (2, 5), (3, 5), (4, 5)], n_observed=4)
    >>> t.hidden_nodes
    [4, 5]
    >>> t.to_newick()
    '(0,1,(2,3));'
    """

    def __init__(self, edges, n_observed, root=None, feature_names=None):
        edges = [(_node_id(u, (u, v)), _node_id(v, (u, v))) for u, v in edges]
        for what, value in (("n_observed", n_observed), ("root", root)):
            if value is not None and _whole(value) is None:
                raise ValueError(
                    f"{what} must be a whole number (a count or a node id), got {value!r}."
                )
        n_observed = _whole(n_observed)
        if n_observed < 1:
            raise ValueError(f"A latent tree needs at least one observed node, got {n_observed}.")
        nodes = {u for e in edges for u in e} | set(range(n_observed))
        n_nodes = max(nodes) + 1
        missing = sorted(set(range(n_nodes)) - nodes)
        if missing:
            raise ValueError(
                f"Node ids must be contiguous 0..{n_nodes - 1}; ids {missing[:10]} are unused."
            )
        if min(nodes) < 0:
            raise ValueError("Node ids must be non-negative integers.")
        for u, v in edges:
            if u == v:
                raise ValueError(f"Self-loop on node {u}: a tree has no cycles.")
        if len({tuple(sorted(e)) for e in edges}) != len(edges):
            raise ValueError("The edge list holds a duplicate edge: a tree has no cycles.")
        if len(edges) != n_nodes - 1:
            if len(edges) > n_nodes - 1:
                raise ValueError(
                    f"{len(edges)} edges over {n_nodes} nodes: the graph has a cycle, "
                    "a tree has exactly n_nodes - 1 edges."
                )
            raise ValueError(
                f"{len(edges)} edges over {n_nodes} nodes: the graph is disconnected, "
                "a tree has exactly n_nodes - 1 edges."
            )
        adjacency = [[] for _ in range(n_nodes)]
        for u, v in edges:
            adjacency[u].append(v)
            adjacency[v].append(u)
        self.n_nodes = n_nodes
        self.n_observed = n_observed
        self.edges = sorted(tuple(sorted(e)) for e in edges)
        self.neighbors = [tuple(sorted(a)) for a in adjacency]
        # connectivity (with n-1 edges this also excludes cycles)
        seen = self._bfs_order(0)
        if len(seen) != n_nodes:
            raise ValueError(
                f"The graph is disconnected: {n_nodes - len(seen)} node(s) are not reachable "
                "from node 0."
            )
        for h in self.hidden_nodes:
            # a single observed variable under one hidden node is the one exception
            if len(self.neighbors[h]) < 2 and n_nodes > 2:
                raise ValueError(
                    f"Hidden node {h} is a leaf (degree {len(self.neighbors[h])}): every leaf "
                    "of a latent tree must be an observed variable."
                )
        if feature_names is not None:
            feature_names = [str(f) for f in feature_names]
            if len(feature_names) != n_observed:
                raise ValueError(
                    f"{len(feature_names)} feature names for {n_observed} observed nodes."
                )
            repeated = sorted(f for f, c in Counter(feature_names).items() if c > 1)
            if repeated:
                raise ValueError(
                    f"Repeated feature names {repeated}: every column needs its own name."
                )
        self.feature_names = feature_names
        self._set_root(self._default_root() if root is None else _whole(root))

    # ------------------------------------------------------------------ structure
    @property
    def hidden_nodes(self):
        """Ids of the hidden nodes."""
        return list(range(self.n_observed, self.n_nodes))

    @property
    def observed_nodes(self):
        """Ids of the observed nodes (the columns of the data)."""
        return list(range(self.n_observed))

    @property
    def leaves(self):
        """Ids of the nodes of degree one (or the single node of a one-node tree)."""
        if self.n_nodes == 1:
            return [0]
        return [u for u in range(self.n_nodes) if len(self.neighbors[u]) == 1]

    def degree(self, node):
        return len(self.neighbors[node])

    def is_hidden(self, node):
        return node >= self.n_observed

    def _bfs_order(self, start):
        order, seen, queue = [], {start}, deque([start])
        while queue:
            u = queue.popleft()
            order.append(u)
            for v in self.neighbors[u]:
                if v not in seen:
                    seen.add(v)
                    queue.append(v)
        return order

    def _bfs_distances(self, start):
        dist = np.full(self.n_nodes, -1, dtype=np.int64)
        dist[start] = 0
        queue = deque([start])
        while queue:
            u = queue.popleft()
            for v in self.neighbors[u]:
                if dist[v] < 0:
                    dist[v] = dist[u] + 1
                    queue.append(v)
        return dist

    def _eccentricities(self):
        # the farthest node from any node is an end of a longest path (a diameter), so
        # three breadth-first searches give every eccentricity in O(n_nodes)
        a = int(np.argmax(self._bfs_distances(0)))
        from_a = self._bfs_distances(a)
        b = int(np.argmax(from_a))
        return np.maximum(from_a, self._bfs_distances(b))

    def hop_distances(self):
        """All-pairs hop distances, an ``(n_nodes, n_nodes)`` integer array."""
        if getattr(self, "_hops", None) is None:
            e = np.asarray(self.edges, dtype=np.int64).reshape(-1, 2)
            g = coo_matrix((np.ones(len(e)), (e[:, 0], e[:, 1])), shape=(self.n_nodes,) * 2)
            hops = shortest_path(g.tocsr(), method="D", directed=False, unweighted=True)
            self._hops = hops.astype(np.int64)
        return self._hops

    def depth_levels(self):
        """``(nodes, parents)`` at each depth below the root, from the top down (integer
        arrays; the preorder is breadth-first, so each depth is a run of it)."""
        if getattr(self, "_levels", None) is None:
            order, parent = self.preorder, self.parent
            depth = np.zeros(self.n_nodes, dtype=np.int64)
            for v in order[1:].tolist():
                depth[v] = depth[parent[v]] + 1
            bounds = np.searchsorted(depth[order], np.arange(1, depth.max() + 2))
            self._levels = [
                (order[a:b], parent[order[a:b]]) for a, b in zip(bounds[:-1], bounds[1:])
            ]
        return self._levels

    def _default_root(self):
        candidates = self.hidden_nodes or list(range(self.n_nodes))
        ecc = self._eccentricities()
        return min(candidates, key=lambda u: (ecc[u], u))

    def _set_root(self, root):
        if not 0 <= root < self.n_nodes:
            raise ValueError(f"Root {root} is not a node of the tree (0..{self.n_nodes - 1}).")
        self.root = root
        parent = np.full(self.n_nodes, -1, dtype=np.int64)
        order = []
        seen = {root}
        queue = deque([root])
        while queue:
            u = queue.popleft()
            order.append(u)
            for v in self.neighbors[u]:
                if v not in seen:
                    seen.add(v)
                    parent[v] = u
                    queue.append(v)
        children = [[] for _ in range(self.n_nodes)]
        for v in order[1:]:
            children[parent[v]].append(v)
        self.parent = parent
        self.children = [tuple(c) for c in children]
        self.preorder = np.asarray(order, dtype=np.int64)
        self.postorder = self.preorder[::-1].copy()

    def depth_first_order(self):
        """Nodes in depth-first preorder from the root (children in the order of
        :attr:`children`); iterative, so any depth works."""
        out, stack = [], [self.root]
        while stack:
            u = stack.pop()
            out.append(u)
            stack.extend(reversed(self.children[u]))
        return out

    def rooted_at(self, root):
        """Return a copy of the tree rooted at ``root``."""
        return LatentTree(self.edges, self.n_observed, root=root, feature_names=self.feature_names)

    def subtree_leaves(self, node):
        """Observed nodes in the subtree below ``node`` (for the current rooting)."""
        out, stack = [], [node]
        while stack:
            u = stack.pop()
            if u < self.n_observed:
                out.append(u)
            stack.extend(self.children[u])
        return sorted(out)

    def validate_for(self, n_features, *, observed_leaves_only=True, feature_names=None):
        """Check that this tree fits data with ``n_features`` columns.

        Raises ``ValueError`` naming the problem: observed ids that do not match the columns,
        observed variables placed at internal nodes when the estimator needs leaves.
        """
        if self.n_observed != n_features:
            raise ValueError(
                f"The tree has {self.n_observed} observed nodes but X has {n_features} "
                "columns: the leaves of the tree must match the columns one to one."
            )
        if observed_leaves_only and self.n_nodes > 1:
            internal = [u for u in range(self.n_observed) if self.degree(u) != 1]
            if internal:
                raise ValueError(
                    f"Observed variables {internal[:10]} are internal nodes of the tree; this "
                    "estimator needs every observed variable at a leaf."
                )
        return self

    def relabelled(self, feature_names):
        """The same tree with its observed nodes renumbered to follow ``feature_names``.

        A tree built with its own ``feature_names`` (e.g. from a Newick string) is mapped
        onto the columns of a DataFrame by name, whatever their order.
        """
        names = [str(f) for f in feature_names]
        if self.feature_names is None or list(self.feature_names) == names:
            return self
        if sorted(self.feature_names) != sorted(names):
            missing = sorted(set(names) - set(self.feature_names))
            extra = sorted(set(self.feature_names) - set(names))
            raise ValueError(
                f"The tree's observed nodes are named {extra[:5]} where the columns are "
                f"{missing[:5]}: the leaves of the tree must match the columns one to one."
            )
        where = {name: i for i, name in enumerate(names)}
        relabel = {u: where[self.feature_names[u]] for u in range(self.n_observed)}
        edges = [(relabel.get(u, u), relabel.get(v, v)) for u, v in self.edges]
        return LatentTree(edges, self.n_observed, feature_names=names)

    def with_observed_leaves(self):
        """Equivalent tree in which every observed variable is a leaf.

        Each observed internal node ``o`` hands its edges to a new hidden node ``h_o`` (ids
        appended) and hangs below it as a leaf. With ``h_o`` a copy of ``o`` the two trees
        define the same distributions; estimators that give ``h_o`` fewer states than ``o``
        fit a rank-limited approximation. Returns ``self`` when nothing changes.
        """
        internal = [u for u in range(self.n_observed) if self.degree(u) > 1]
        if not internal or self.n_nodes == 1:
            return self
        copy = {o: self.n_nodes + t for t, o in enumerate(internal)}
        edges = [(copy.get(u, u), copy.get(v, v)) for u, v in self.edges]
        edges += [(o, h) for o, h in copy.items()]
        return LatentTree(edges, self.n_observed, feature_names=self.feature_names)

    # ------------------------------------------------------------------ I/O
    @classmethod
    def star(cls, n_observed, feature_names=None):
        """One hidden node (id ``n_observed``) joined to every observed variable."""
        return cls(
            [(i, n_observed) for i in range(n_observed)], n_observed, feature_names=feature_names
        )

    @classmethod
    def from_edges(cls, edges, n_observed, **kwargs):
        """Build from an edge list over node ids (observed ``0..n_observed-1`` first)."""
        return cls(edges, n_observed, **kwargs)

    @classmethod
    def from_newick(cls, newick, feature_names=None, n_observed=None):
        """Parse a Newick string.

        Leaves (and labelled internal nodes) whose label is one of ``feature_names`` (or,
        without ``feature_names``, a column index) become observed nodes; unlabelled internal
        nodes become hidden nodes. Branch lengths are accepted and ignored. Without
        ``feature_names`` the columns are ``0..d-1`` up to the largest leaf label, or up to
        ``n_observed - 1`` when it is given: an internal node labelled with a larger column
        (``"(0,1)2;"``, a Chow-Liu tree of three columns) is then observed, not hidden.

        Examples
        --------
        >>> LatentTree.from_newick("((a,b),c,d);", feature_names=["a", "b", "c", "d"]).edges
        [(0, 5), (1, 5), (2, 4), (3, 4), (4, 5)]
        """
        root = _parse_newick(newick)
        labels = []
        _collect_labels(root, labels, leaves_only=True)
        if feature_names is not None:
            names = [str(f) for f in feature_names]
            index = {name: i for i, name in enumerate(names)}
        else:
            numeric = [lab for lab in labels if lab is not None]
            if not all(re.fullmatch(r"\d+", lab) for lab in numeric):
                names_used = [lab for lab in numeric if not re.fullmatch(r"\d+", lab)]
                raise ValueError(
                    f"Newick labels {names_used[:5]} are not column indices and no column "
                    "names are given: pass feature_names (an estimator takes them from the "
                    "columns of a DataFrame), or label the leaves 0..d-1."
                )
            n_obs = max((int(lab) for lab in numeric), default=-1) + 1
            if n_observed is not None:
                n_obs = max(n_obs, int(n_observed))
            index = {str(i): i for i in range(n_obs)}
            names = None
        n_observed = len(index)
        _drop_internal_labels(root, index)  # hidden-node names, support values
        labels = []
        _collect_labels(root, labels)
        used = [lab for lab in labels if lab is not None]
        unknown = sorted({lab for lab in used if lab not in index})
        if unknown:
            if names is None:
                raise ValueError(
                    f"Newick labels {unknown[:10]} do not match any column index "
                    f"0..{n_observed - 1}."
                )
            shown = names if len(names) <= 20 else names[:20] + ["..."]
            raise ValueError(
                f"Newick labels {unknown[:10]} do not match any column; the columns are {shown}."
            )
        dup = sorted({lab for lab in used if used.count(lab) > 1})
        if dup:
            raise ValueError(f"Newick labels {dup[:10]} appear more than once.")
        absent = sorted(set(index) - set(used), key=lambda s: index[s])
        if absent:
            raise ValueError(f"Columns {absent[:10]} do not appear in the Newick tree.")
        counter = n_observed
        ids = {}
        for node in _postorder(root)[::-1]:  # parents first: hidden ids in preorder
            if node["label"] is not None:
                ids[id(node)] = index[node["label"]]
            elif not node["children"]:
                raise ValueError("The Newick tree has an unlabelled leaf.")
            else:
                ids[id(node)] = counter
                counter += 1
        edges = [
            (ids[id(node)], ids[id(child)])
            for node in _postorder(root)
            for child in node["children"]
        ]
        return cls(edges, n_observed, feature_names=names)

    def _names_for(self, feature_names):
        """``feature_names``, else the tree's own (``None`` without), one per column."""
        names = feature_names if feature_names is not None else self.feature_names
        if names is not None and len(names) != self.n_observed:
            raise ValueError(
                f"feature_names has {len(names)} names; the tree has {self.n_observed} "
                "observed nodes."
            )
        return names

    def to_newick(self, feature_names=None):
        """Newick string of the tree rooted at :attr:`root`; observed nodes carry their names."""
        names = self._names_for(feature_names)

        def label(u):
            if u >= self.n_observed:
                return ""
            return _quote(str(names[u])) if names is not None else str(u)

        text = {}
        for u in self.postorder:  # children first: no recursion, any depth
            kids = self.children[u]
            text[u] = label(u)
            if kids:
                text[u] = "(" + ",".join(text.pop(c) for c in kids) + ")" + text[u]
        return text[self.root] + ";"

    @classmethod
    def from_networkx(cls, graph, feature_names=None):
        """Build from a networkx graph (or anything with ``.nodes`` and ``.edges``).

        Integer nodes ``0..d-1`` are observed columns, by position (as in an edge list);
        with ``feature_names``, nodes named like a feature (text), or whose ``label``
        attribute is one (the graphs of :meth:`to_networkx`), are observed and every
        other node is hidden - integer nodes too, when some node is named. Without
        them, the ``label`` attributes of the observed nodes (``hidden`` false) of such a
        graph are its feature names.
        """
        nodes = list(graph.nodes)
        data = dict(graph.nodes(data=True)) if hasattr(graph.nodes, "data") else {}
        if feature_names is not None:
            index = {str(f): i for i, f in enumerate(feature_names)}
            n_observed = len(index)

            # labels that repeat their integer nodes' ids (to_networkx of a tree without
            # names) are positions, not names
            labelled = [
                u
                for u in nodes
                if data.get(u, {}).get("label") is not None and not data[u].get("hidden")
            ]
            labels_name = not all(_is_int(u) and str(data[u]["label"]) == str(u) for u in labelled)

            def name_of(u):
                attrs = data.get(u, {})
                if attrs.get("hidden"):
                    return None
                # the label first: to_networkx's node 0 labelled "1" is the column "1"
                label = attrs.get("label")
                if labels_name and label is not None and str(label) in index:
                    return str(label)
                if not _is_int(u) and str(u) in index:
                    return str(u)
                return None

            named = {u: name_of(u) for u in nodes}
            by_position = not any(named.values())
            mapping = {}
            nxt = n_observed
            for u in nodes:
                if named[u]:
                    mapping[u] = index[named[u]]
                elif (
                    by_position
                    and _is_int(u)
                    and 0 <= u < n_observed
                    and not data.get(u, {}).get("hidden")
                ):
                    mapping[u] = int(u)
                else:
                    mapping[u] = nxt
                    nxt += 1
            names = [str(f) for f in feature_names]
        else:
            if not all(isinstance(u, (int, np.integer)) for u in nodes):
                raise ValueError(
                    "Graph nodes must be integers (observed columns 0..d-1 first) or "
                    "feature_names must be given."
                )
            n_observed = None
            mapping = {u: int(u) for u in nodes}
            names = None
            hidden_attr = {u for u, d in data.items() if d.get("hidden")}
            flagged = all("hidden" in data.get(u, {}) for u in nodes)
            if hidden_attr or (flagged and nodes):
                # a graph of to_networkx: its observed nodes are 0..d-1, wherever they
                # sit (a Chow-Liu tree's columns are inner nodes too)
                n_observed = min(hidden_attr) if hidden_attr else len(nodes)
                labels = [data.get(u, {}).get("label") for u in range(n_observed)]
                # the names of to_networkx's graph (positions as labels are no names)
                if all(label is not None for label in labels) and any(
                    str(label) != str(u) for u, label in enumerate(labels)
                ):
                    names = [str(label) for label in labels]
        if n_observed is None:
            # observed nodes are the leaves unless told otherwise
            deg = {u: 0 for u in nodes}
            for u, v in graph.edges:
                deg[u] += 1
                deg[v] += 1
            leaves = [mapping[u] for u in nodes if deg[u] <= 1]
            n_observed = max(leaves) + 1 if leaves else 1
        edges = [(mapping[u], mapping[v]) for u, v in graph.edges]
        return cls(edges, n_observed, feature_names=names)

    def to_networkx(self):
        """Return a ``networkx.Graph`` with node attributes ``hidden`` and ``label``."""
        import networkx as nx

        g = nx.Graph()
        for u in range(self.n_nodes):
            hidden = self.is_hidden(u)
            name = (
                f"h{u}"
                if hidden
                else (self.feature_names[u] if self.feature_names is not None else str(u))
            )
            g.add_node(u, hidden=hidden, label=name)
        g.add_edges_from(self.edges)
        return g

    @classmethod
    def coerce(cls, tree, n_features, feature_names=None, observed_leaves_only=True):
        """Turn any accepted tree specification into a validated ``LatentTree``.

        Accepts a ``LatentTree``, an edge list, a Newick string or a networkx graph.
        """
        if isinstance(tree, LatentTree):
            out = tree
            if feature_names is not None and tree.feature_names is not None:
                out = tree.relabelled(feature_names)
        elif isinstance(tree, str):
            names = feature_names
            if names is not None and _newick_labels_are_indices(tree, names):
                names = None  # leaves labelled 0..d-1 address the columns by position
            out = cls.from_newick(
                tree, feature_names=names, n_observed=n_features if names is None else None
            )
        elif hasattr(tree, "edges") and hasattr(tree, "nodes"):
            names = feature_names
            if names is not None and not any(str(u) in set(map(str, names)) for u in tree.nodes):
                names = None
            out = cls.from_networkx(tree, feature_names=names)
        elif isinstance(tree, (Sequence, np.ndarray, Iterable)):
            edges = [tuple(e) for e in tree]
            if any(len(e) != 2 for e in edges):
                raise ValueError("An edge list must hold pairs of node ids.")
            out = cls(edges, n_features, feature_names=feature_names)
        else:
            raise TypeError(
                "tree must be a LatentTree, an edge list, a Newick string or a networkx graph; "
                f"got {type(tree).__name__}."
            )
        return out.validate_for(n_features, observed_leaves_only=observed_leaves_only)

    # ------------------------------------------------------------------ drawing
    def draw(self, ax=None, feature_names=None, contract=True):
        """Draw the rooted tree with matplotlib: observed nodes shaded, hidden ones white.

        Leaves sit left to right in depth-first order (no two edges cross), every inner
        node above the middle of its children. Labels are written below their nodes,
        upright when any is longer than four characters (so that neighbouring labels do
        not overlap; the rows of the tree are then spaced by the longest label), an
        observed node inside the tree's a little to its right, clear of its edges. With
        ``contract=True`` a hidden node with a single child is drawn as the
        edge from its parent to that child (the model keeps the node: it passes its
        parent's state on through its own table)."""
        import matplotlib.pyplot as plt

        names = self._names_for(feature_names)
        shown = [
            not (contract and self.is_hidden(u) and len(self.children[u]) == 1)
            for u in range(self.n_nodes)
        ]
        # the drawn tree: every node's parent is its nearest shown ancestor
        parent = np.full(self.n_nodes, -1, dtype=np.int64)
        children = [[] for _ in range(self.n_nodes)]
        order = []
        for u in self.depth_first_order():
            if not shown[u]:
                continue
            p = self.parent[u]
            while p >= 0 and not shown[p]:
                p = self.parent[p]
            parent[u] = p
            if p >= 0:
                children[p].append(u)
            order.append(u)
        depth = np.zeros(self.n_nodes)
        for u in order:
            if parent[u] >= 0:
                depth[u] = depth[parent[u]] + 1
        x = np.zeros(self.n_nodes)
        leaves = [u for u in order if not children[u]]
        x[leaves] = np.arange(len(leaves))
        for u in reversed(order):
            if children[u]:
                x[u] = np.mean([x[c] for c in children[u]])
        labels = {
            u: str(names[u]) if names is not None else str(u)
            for u in order
            if not self.is_hidden(u)
        }
        longest = max((len(t) for t in labels.values()), default=0)
        # labels wider than the space between two leaves are written upright; a row of
        # the tree is then taller than the longest label (inches, fontsize 8)
        upright = longest > 4
        row = 0.9
        if upright and any(children[u] for u in labels):
            row = max(row, 0.65 * 8 * longest / 72 + 0.4)
        own_figure = ax is None
        if own_figure:
            height = max(3.0, row * depth.max() + 1.5)
            _, ax = plt.subplots(figsize=(max(4, 0.4 * len(leaves)), height))
        for u in order:
            if parent[u] >= 0:
                p = parent[u]
                ax.plot([x[p], x[u]], [-depth[p], -depth[u]], color="0.4", lw=1, zorder=1)
        for u in sorted(order):  # in node order
            hidden = self.is_hidden(u)
            ax.scatter(
                x[u],
                -depth[u],
                s=120,
                zorder=2,
                edgecolors="k",
                color="white" if hidden else "0.6",
            )
            if hidden:
                continue
            # inside the tree: to the right, clear of the edges to the children
            offset = (8, -8) if children[u] else (0, -10)
            ha = "left" if children[u] else "center"
            ax.annotate(
                labels[u],
                (x[u], -depth[u]),
                xytext=offset,
                textcoords="offset points",
                ha=ha,
                va="top",
                rotation=90 if upright else 0,
                fontsize=8,
            )
        ax.set_axis_off()
        if own_figure:
            ax.figure.tight_layout()  # room for the labels below the leaves
        return ax

    def __repr__(self):
        return (
            f"LatentTree(n_observed={self.n_observed}, n_hidden={self.n_nodes - self.n_observed}"
            f", root={self.root})"
        )

    def __eq__(self, other):
        """Equal edge lists (the same numbering of the hidden nodes) over the same
        columns, with the same feature names (or none on both): node ``j`` is the same
        column in both. Two numberings of one topology (a tree and its Newick round
        trip) differ here: compare topologies with
        :func:`ltm_sklearn.metrics.robinson_foulds` (0 for the same one)."""
        return (
            isinstance(other, LatentTree)
            and self.n_observed == other.n_observed
            and self.edges == other.edges
            and _names(self) == _names(other)
        )

    def __hash__(self):
        return hash((self.n_observed, tuple(self.edges)))

    def __getstate__(self):
        state = self.__dict__.copy()
        state.pop("_hops", None)
        state.pop("_levels", None)
        return state


def _is_int(u):
    return isinstance(u, (int, np.integer)) and not isinstance(u, bool)


def _names(tree):
    return None if tree.feature_names is None else tuple(tree.feature_names)


# ---------------------------------------------------------------------- Newick helpers
#: brackets, quoted labels, branch lengths, [comments] (dropped) and plain labels
_TOKEN = re.compile(r"\s*(\(|\)|,|;|:[^,();\[]*|'(?:[^']|'')*'|\[[^\]]*\]|[^,();:\s\[]+)")


def attach_columns(tree, columns, d):
    """``tree``, learned over the data's ``columns`` (observed nodes ``0..len(columns)-1``),
    relabelled to all ``d`` columns; the other columns hang off its root as leaves.

    >>> tree = LatentTree([(0, 2), (1, 2)], 2)
    >>> attach_columns(tree, np.array([1, 3]), 4).edges
    [(0, 4), (1, 4), (2, 4), (3, 4)]
    """
    m = len(columns)
    others = [j for j in range(d) if j not in set(np.asarray(columns).tolist())]
    relabel = {i: int(c) for i, c in enumerate(columns)}
    relabel.update({u: d + (u - m) for u in range(m, tree.n_nodes)})
    edges = [(relabel[u], relabel[v]) for u, v in tree.edges]
    anchor = relabel[tree.root]
    edges += [(anchor, j) for j in others]
    return LatentTree(edges, d)


def _parse_newick(text):
    """Parse a Newick string into nested ``{"label", "children"}`` dicts (iteratively, so
    any nesting depth works)."""
    tokens = [t for t in _TOKEN.findall(text.strip()) if t.strip() and not t.startswith("[")]
    if not tokens or tokens[-1] != ";":
        raise ValueError("A Newick string must end with ';'.")
    root = {"label": None, "children": []}
    stack = [root]  # open nodes; the last is the one being read
    current = root
    pos = 0
    for pos, tok in enumerate(tokens[:-1]):
        if tok in "(,":
            if tok == ",":  # close the sibling just read, open the next one
                if len(stack) < 2:
                    raise ValueError(f"Unexpected ',' outside parentheses near token {pos}.")
                stack.pop()
            current = {"label": None, "children": []}
            stack[-1]["children"].append(current)
            stack.append(current)
        elif tok == ")":
            if len(stack) < 2:
                raise ValueError(f"Unbalanced parentheses in Newick string near token {pos}.")
            stack.pop()
            current = stack[-1]
        elif tok.startswith(":"):
            continue  # branch lengths are ignored
        else:
            if current["label"] is not None:
                raise ValueError(f"Unexpected text {tok!r} in the Newick string near token {pos}.")
            current["label"] = tok[1:-1].replace("''", "'") if tok.startswith("'") else tok
    if len(stack) != 1:
        raise ValueError("Unbalanced parentheses in the Newick string.")
    _check_parsed(root)
    return root


def _check_parsed(root):
    # "(a,b)" opens one child per element: a node is a group of its children, so every
    # "(" node must have at least one child and the root must be the outer group
    for node in _postorder(root):
        for child in node["children"]:
            if child["label"] is None and not child["children"]:
                raise ValueError("The Newick tree has an empty element (e.g. '(,a)').")
    if len(root["children"]) == 1 and root["label"] is None:
        only = root["children"][0]
        root["children"], root["label"] = only["children"], only["label"]


def _postorder(root):
    """Nodes of a parsed Newick tree, children before parents (iterative)."""
    out, stack = [], [root]
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(node["children"])
    return out[::-1]


def _collect_labels(node, out, leaves_only=False):
    for n in _postorder(node)[::-1]:
        if not (leaves_only and n["children"]):
            out.append(n["label"])


def _drop_internal_labels(node, index):
    for n in _postorder(node):
        if n["children"] and n["label"] not in index:
            n["label"] = None


def _quote(name):
    """``name`` as a Newick label: quoted when it holds a character the format reads
    otherwise (separators, blanks, quotes, and brackets, which open a comment)."""
    if re.fullmatch(r"[^,();:\s'\[\]]+", name):
        return name
    return "'" + name.replace("'", "''") + "'"


def _newick_labels_are_indices(text, names):
    """Whether a Newick string labels its leaves by column index rather than by the
    column ``names``: it uses none of the names and every leaf label is a number."""
    labels = []
    _collect_labels(_parse_newick(text), labels, leaves_only=True)
    labels = [lab for lab in labels if lab is not None]
    names = set(map(str, names))
    return not any(lab in names for lab in labels) and all(
        re.fullmatch(r"\d+", lab) for lab in labels
    )


def canonical_root(tree, root_marginal, cpts):
    """The root's hidden states ordered by decreasing probability (children's tables
    permuted alike): the same distribution, with state labels that do not depend on the
    start, so that ``predict_proba`` is comparable between fits."""
    if tree.root < tree.n_observed or len(root_marginal) < 2:
        return root_marginal, cpts
    perm = np.argsort(-np.asarray(root_marginal), kind="stable")
    cpts = dict(cpts)
    for c in tree.children[tree.root]:
        cpts[c] = cpts[c][perm]
    return np.asarray(root_marginal)[perm], cpts
