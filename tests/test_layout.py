"""layout.layered: edges point forward, crossings get sorted out, cycles and empty graphs survive."""
import networkx as nx
import pytest

from tapeviz.draw import graph, layout
from tapeviz.draw.options import View
from builders import chain, keras_like


def crossings(G, pos):
    """Pairs of edges between the same two layers whose ends swap order (LR: layer = x)."""
    edges = [(pos[u], pos[v]) for u, v in G.edges]
    count = 0
    for i, (a0, a1) in enumerate(edges):
        for b0, b1 in edges[i + 1:]:
            if a0[0] == b0[0] and a1[0] == b1[0] and (a0[1] - b0[1]) * (a1[1] - b1[1]) < 0:
                count += 1
    return count


def test_every_edge_points_to_a_later_layer():
    rec, _ = keras_like()
    G = graph.build(rec, View(group=False))
    pos = layout.layered(G)
    assert set(pos) == set(G)
    assert all(pos[u][0] < pos[v][0] for u, v in G.edges)


def test_top_to_bottom_points_down():
    G = nx.DiGraph([("a", "b"), ("b", "c"), ("a", "c")])
    pos = layout.layered(G, direction="TB")
    assert pos["a"][1] > pos["b"][1] > pos["c"][1]


def test_longest_path_layers():
    G = nx.DiGraph([("a", "b"), ("b", "c"), ("a", "c")])
    pos = layout.layered(G)
    assert [pos[n][0] for n in "abc"] == [0, 1, 2]


def test_a_side_chain_sits_next_to_its_use():
    # a kernel reshaped before a late op: the whole side chain moves up to that op
    G = nx.DiGraph([("x", "a"), ("a", "b"), ("b", "c"), ("c", "out"), ("k", "reshape"), ("reshape", "c")])
    pos = layout.layered(G)
    assert pos["reshape"][0] == pos["b"][0] and pos["k"][0] == pos["a"][0]


def test_a_late_input_sits_next_to_its_use():
    # z = w*x + b: b is an input, but it belongs beside the add, not in the first column
    G = nx.DiGraph([("w", "mul"), ("x", "mul"), ("mul", "wx"), ("wx", "add"), ("b", "add"), ("add", "z")])
    pos = layout.layered(G)
    assert pos["b"][0] == pos["wx"][0] == pos["add"][0] - 1


def test_sweeps_undo_a_crossing():
    # d waits for e, so a topological order lists b's child c first: a->d and b->c cross
    G = nx.DiGraph()
    G.add_nodes_from(["a", "b", "e", "c", "d"])
    G.add_edges_from([("a", "d"), ("e", "d"), ("b", "c")])
    pos = layout.layered(G)
    assert crossings(G, pos) == 0


def test_no_two_nodes_share_a_place():
    rec, _ = keras_like()
    G = graph.build(rec, View(group=False))
    pos = layout.layered(G)
    assert len(set(pos.values())) == len(pos)


@pytest.mark.parametrize("edges", [
    [("a", "b"), ("b", "a")],
    [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")],
    [("a", "a"), ("a", "b")],
])
def test_cycles_are_broken_not_fatal(edges):
    G = nx.DiGraph(edges)
    pos = layout.layered(G)
    assert set(pos) == set(G)


def test_empty_and_isolated():
    assert layout.layered(nx.DiGraph()) == {}
    G = nx.DiGraph()
    G.add_nodes_from(["lonely", "alone"])
    assert set(layout.layered(G)) == {"lonely", "alone"}


def test_bad_direction_is_refused():
    with pytest.raises(ValueError):
        layout.layered(nx.DiGraph([(1, 2)]), direction="RL")


def test_ten_thousand_op_chain():
    G = graph.build(chain(10_000), View(tape=1))
    pos = layout.layered(G)
    assert len(pos) == G.number_of_nodes() == 20_001
    assert all(pos[u][0] < pos[v][0] for u, v in G.edges)
