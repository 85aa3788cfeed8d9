import numpy as np
import pandas as pd
import pytest

from ltm_sklearn import (
    LatentTree,
    SpectralLatentTree,
)
from ltm_sklearn.datasets import balanced_binary_tree, hmm_chain, random_binary_tree
from ltm_sklearn.structure import chow_liu


def splits(tree):
    """The bipartitions of the observed nodes induced by the edges (hidden ids ignored)."""
    out = set()
    d = tree.n_observed
    for u, v in tree.edges:
        rooted = tree.rooted_at(u)
        side = frozenset(rooted.subtree_leaves(v))
        if 0 in side:
            side = frozenset(range(d)) - side
        out.add(side)
    return out


def test_edge_list_basics():
    t = LatentTree([(0, 4), (1, 4), (2, 5), (3, 5), (4, 5)], n_observed=4)
    assert t.hidden_nodes == [4, 5]
    assert t.observed_nodes == [0, 1, 2, 3]
    assert t.leaves == [0, 1, 2, 3]
    assert t.is_hidden(t.root)
    # parents before children in preorder, children before parents in postorder
    pos = {u: i for i, u in enumerate(t.preorder)}
    for u in range(t.n_nodes):
        if u != t.root:
            assert pos[t.parent[u]] < pos[u]
            assert u in t.children[t.parent[u]]
    assert list(t.postorder) == list(t.preorder[::-1])


def test_rooting_at_any_node():
    t = balanced_binary_tree(8)
    for r in range(t.n_nodes):
        rt = t.rooted_at(r)
        assert rt.root == r and rt.parent[r] == -1
        assert sum(len(c) for c in rt.children) == rt.n_nodes - 1
        assert rt.subtree_leaves(r) == list(range(8))


@pytest.mark.parametrize(
    "tree", [balanced_binary_tree(16), hmm_chain(7), random_binary_tree(20, 3)]
)
def test_newick_round_trip(tree):
    back = LatentTree.from_newick(tree.to_newick())
    assert splits(back) == splits(tree)
    names = [f"x{i}" for i in range(tree.n_observed)]
    nw = tree.to_newick(feature_names=names)
    assert "x0" in nw
    assert splits(LatentTree.from_newick(nw, feature_names=names)) == splits(tree)


def test_newick_with_branch_lengths_and_quotes():
    t = LatentTree.from_newick("(('a b':0.1,c:2)h:1,d,e);", feature_names=["a b", "c", "d", "e"])
    assert t.n_observed == 4 and t.n_nodes == 6
    assert "'a b'" in t.to_newick()
    # brackets open a comment: quoted, and the names come back
    names = ["a[1]", "a b", "it's", "d"]
    t = LatentTree([(0, 4), (1, 4), (2, 5), (3, 5), (4, 5)], 4, feature_names=names)
    assert t.to_newick() == "('a[1]','a b',('it''s',d));"
    assert LatentTree.from_newick(t.to_newick(), feature_names=names).to_newick() == t.to_newick()
    with pytest.raises(ValueError, match="feature_names has 2 names; the tree has 4"):
        t.to_newick(feature_names=["a", "b"])


def test_networkx_round_trip():
    nx = pytest.importorskip("networkx")
    t = random_binary_tree(12, random_state=0)
    g = t.to_networkx()
    assert isinstance(g, nx.Graph)
    assert g.nodes[12]["hidden"] and not g.nodes[0]["hidden"]
    assert splits(LatentTree.from_networkx(g)) == splits(t)
    named = nx.relabel_nodes(g, {i: f"v{i}" for i in range(12)})
    back = LatentTree.from_networkx(named, feature_names=[f"v{i}" for i in range(12)])
    assert splits(back) == splits(t)
    # the names of a named tree travel in the labels
    names = [f"col {i}" for i in range(12)]
    g = LatentTree(t.edges, 12, feature_names=names).to_networkx()
    assert LatentTree.from_networkx(g).feature_names == names
    # and name the columns when other feature names (here reversed) are given
    back = LatentTree.from_networkx(g, feature_names=names[::-1])
    assert back.feature_names == names[::-1]
    assert splits(back.relabelled(names)) == splits(LatentTree(t.edges, 12, feature_names=names))


def test_coerce_accepts_every_form():
    t = balanced_binary_tree(4)
    for spec in (t, t.edges, np.array(t.edges), t.to_newick()):
        assert splits(LatentTree.coerce(spec, 4)) == splits(t)


@pytest.mark.parametrize(
    "edges, n_obs, match",
    [
        ([(0, 3), (1, 3), (2, 3), (0, 1)], 3, "cycle"),
        ([(0, 4), (1, 4), (2, 5), (3, 5)], 4, "disconnected"),
        ([(0, 3), (1, 3), (2, 3), (3, 4)], 3, "Hidden node 4 is a leaf"),
        ([(0, 0), (1, 2)], 3, "Self-loop"),
        ([(0, 3), (1, 3), (2, 5), (3, 5)], 3, "contiguous"),
    ],
)
def test_invalid_trees(edges, n_obs, match):
    with pytest.raises(ValueError, match=match):
        LatentTree(edges, n_obs)


def test_validate_for_columns():
    t = balanced_binary_tree(4)
    with pytest.raises(ValueError, match="4 observed nodes but X has 5 columns"):
        t.validate_for(5)
    internal = LatentTree([(0, 1), (1, 2), (1, 3)], 4)  # observed node 1 is internal
    with pytest.raises(ValueError, match="internal nodes"):
        internal.validate_for(4)


def test_newick_errors():
    with pytest.raises(ValueError, match="end with ';'"):
        LatentTree.from_newick("(0,1,2)")
    with pytest.raises(ValueError, match="do not match any column"):
        LatentTree.from_newick("(a,b,z);", feature_names=["a", "b", "c"])
    with pytest.raises(ValueError, match="do not appear"):
        LatentTree.from_newick("(a,b);", feature_names=["a", "b", "c"])
    with pytest.raises(ValueError, match="feature_names"):
        LatentTree.from_newick("(a,b,c);")


def test_draw_smoke():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    ax = balanced_binary_tree(8).draw()
    assert ax is not None


def test_draw_labels_of_neighbouring_leaves_do_not_overlap():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [f"column_{j}_long_name" for j in range(14)]
    tree = LatentTree(balanced_binary_tree(14).edges, 14, feature_names=names)
    ax = tree.draw()
    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in ax.texts]
    assert len(boxes) == 14
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert not a.overlaps(b)
    plt.close(fig)


def _label_boxes(ax):
    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    return [t.get_window_extent(renderer) for t in ax.texts]


@pytest.mark.parametrize("shape", ["binary", "chow_liu"])
def test_draw_is_legible_at_30_columns(shape):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [f"column_{j}_long_name" for j in range(30)]
    if shape == "binary":
        edges = balanced_binary_tree(30).edges
    else:  # observed columns inside the tree, as a Chow-Liu tree has them
        rng = np.random.default_rng(0)
        info = rng.random((30, 30))
        edges = chow_liu(info + info.T).edges
    ax = LatentTree(edges, 30, feature_names=names).draw()
    boxes = _label_boxes(ax)
    assert len(boxes) == 30
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert not a.overlaps(b)
    plt.close(ax.figure)


def test_draw_contracts_hidden_nodes_with_a_single_child():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # hidden 4 over hidden 5 (whose only child is column 3) and columns 0-2
    tree = LatentTree([(4, 0), (4, 1), (4, 2), (4, 5), (5, 3)], 4, root=4)
    contracted, full = tree.draw(), tree.draw(contract=False)
    assert len(contracted.collections) == 5 and len(full.collections) == 6
    assert len(contracted.lines) == 4 and len(full.lines) == 5
    plt.close(contracted.figure)
    plt.close(full.figure)


# ---------------------------------------------------------------- Newick labels
@pytest.mark.parametrize("newick", ["((a,b),(c,zz));", "((w,x),(y,zz));"])
def test_newick_labels_not_columns_named(newick):
    X = pd.DataFrame(np.random.default_rng(0).integers(0, 2, (200, 4)), columns=list("abcd"))
    with pytest.raises(ValueError) as info:
        SpectralLatentTree(tree=newick).fit(X)
    message = str(info.value)
    assert "'zz'" in message and "'a'" not in message.split(";")[0]
    assert "the columns are ['a', 'b', 'c', 'd']" in message
    assert "no column names are given" not in message


def test_newick_column_indices_still_accepted_with_names():
    X = pd.DataFrame(np.random.default_rng(0).integers(0, 2, (200, 4)), columns=list("abcd"))
    est = SpectralLatentTree(tree="((0,1),(2,3));").fit(X)
    assert est.tree_.n_observed == 4


def test_edge_lists_take_whole_number_node_ids_and_name_the_others():
    assert LatentTree([(0.0, 4.0), (1, 4), (2, 4), (3, np.int64(4))], 4).edges == [
        (0, 4),
        (1, 4),
        (2, 4),
        (3, 4),
    ]
    for edges in ([("a", "h"), ("b", "h")], [(0, 4.5), (1, 4.5)], [(True, 2), (1, 2)]):
        with pytest.raises(ValueError, match="an edge list takes integer node ids"):
            LatentTree(edges, 2)


def test_a_tree_with_inner_columns_reads_back_from_newick_and_networkx():
    pytest.importorskip("networkx")
    chow_liu = LatentTree([(0, 2), (1, 2)], 3)  # the last column inside the tree
    assert chow_liu.to_newick() == "(0,1)2;"
    for spec in (chow_liu.to_newick(), chow_liu.to_networkx()):
        back = LatentTree.coerce(spec, 3, observed_leaves_only=False)
        assert back.n_observed == 3 and not back.hidden_nodes
        assert sorted(map(sorted, back.edges)) == sorted(map(sorted, chow_liu.edges))
    assert isinstance(LatentTree.from_networkx(chow_liu.to_networkx()), LatentTree)
    assert LatentTree.from_networkx(chow_liu.to_networkx()).n_observed == 3


def test_networkx_labels_name_the_columns_before_the_node_ids():
    pytest.importorskip("networkx")
    names = ["1", "2", "0", "3"]  # digit names, not in the order of their positions
    t = LatentTree([(0, 4), (1, 4), (2, 5), (3, 5), (4, 5)], 4, feature_names=names)
    back = LatentTree.from_networkx(t.to_networkx(), feature_names=names)
    assert splits(back) == splits(t)
    assert splits(LatentTree.from_networkx(t.to_networkx())) == splits(t)


def test_counts_and_roots_that_are_not_whole_numbers_are_refused():
    edges = [(0, 2), (1, 2)]
    with pytest.raises(ValueError, match="n_observed must be a whole number"):
        LatentTree(edges, 2.5)
    with pytest.raises(ValueError, match="root must be a whole number"):
        LatentTree(edges, 2, root=1.5)
    assert LatentTree(edges, 2.0, root=np.int64(2)).root == 2


def test_equality_compares_the_feature_names():
    edges = [(3, 0), (3, 1), (3, 2)]
    named = LatentTree(edges, 3, feature_names=["a", "b", "c"])
    assert named == LatentTree(edges, 3, feature_names=("a", "b", "c"))
    # the same numbering over other columns is another model of the table
    assert named != LatentTree(edges, 3, feature_names=["b", "a", "c"])
    assert named != LatentTree(edges, 3)
    assert LatentTree(edges, 3) == LatentTree(edges, 3)
    assert hash(named) == hash(LatentTree(edges, 3, feature_names=["a", "b", "c"]))


def test_integer_graph_nodes_are_positions_as_in_an_edge_list():
    nx = pytest.importorskip("networkx")
    names = ["2", "0", "1", "3"]  # digit names, not in the order of their positions
    edges = [(0, 4), (1, 4), (2, 5), (3, 5), (4, 5)]
    as_list = LatentTree.coerce(edges, 4, feature_names=names)
    as_graph = LatentTree.coerce(nx.Graph(edges), 4, feature_names=names)
    assert splits(as_graph) == splits(as_list)
    assert frozenset({2, 3}) in splits(as_list)  # positions {0, 1} | {2, 3}
    # so are those of to_networkx's graph of a tree without names (hidden nodes "h4"...)
    plain = LatentTree.coerce(LatentTree(edges, 4).to_networkx(), 4, feature_names=names)
    assert splits(plain) == splits(as_list)
    # text nodes name the columns; the integer nodes beside them are hidden
    g = nx.Graph([("2", 0), ("0", 0), ("1", 1), ("3", 1), (0, 1)])
    named = LatentTree.from_networkx(g, feature_names=names)
    assert named.n_observed == 4 and named.hidden_nodes == [4, 5]
    assert frozenset({2, 3}) in splits(named)  # columns "2", "0" | "1", "3"


def test_newick_comments_are_skipped_and_repeated_names_refused():
    for text in ("(0[a note],1,2);", "(0,1,2)[a,b];", "(0:0.1[&&NHX:S=x],1,2);"):
        assert LatentTree.from_newick(text) == LatentTree.from_newick("(0,1,2);")
    with pytest.raises(ValueError, match=r"Repeated feature names \['a'\]"):
        LatentTree([(3, 0), (3, 1), (3, 2)], 3, feature_names=["a", "a", "b"])
