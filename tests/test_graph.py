"""graph.build on small hand-built recordings: which nodes, which edges, what they say."""
import math

import pytest

from tapeviz.draw import gradient_flow, graph
from tapeviz.draw.options import View
from tapeviz.recording import FlowEntry, Stats
from builders import chain, keras_like, o, t, wxb


def test_wxb_nodes_and_edges_on_its_tape():
    rec, ids = wxb()
    G = graph.build(rec, View(tape=1))
    mul, add, square = o(rec, ids["wx"]), o(rec, ids["z"]), o(rec, ids["u"])
    assert set(G.edges) == {
        (t(ids["w"]), mul), (t(ids["x"]), mul), (mul, t(ids["wx"])),
        (t(ids["wx"]), add), (t(ids["b"]), add), (add, t(ids["z"])),
        (t(ids["x"]), square), (square, t(ids["u"])),
    }
    assert set(G) == {n for e in G.edges for n in e}
    # the backward ops were recorded by no tape
    assert o(rec, ids["dw"]) not in G


def test_read_variable_op_is_folded_into_the_variable():
    rec, ids = wxb()
    G = graph.build(rec, View(tape=1))
    reads = [op for op in rec.ops if op.type == "ReadVariableOp"]
    assert reads and all(graph.op_node(op.id) not in G and t(op.outputs[0]) not in G for op in reads)
    assert G.has_edge(t(ids["w"]), o(rec, ids["wx"]))


def test_categories_labels_and_order():
    rec, ids = wxb()
    G = graph.build(rec)
    cat = {n: d["category"] for n, d in G.nodes(data=True)}
    assert cat[t(ids["w"])] == cat[t(ids["b"])] == "variable"
    assert cat[t(ids["x"])] == "constant"
    assert cat[t(ids["wx"])] == "intermediate"
    assert cat[o(rec, ids["wx"])] == "forward_op"
    assert cat[o(rec, ids["dw"])] == "backward_op"
    assert G.nodes[t(ids["w"])]["label"] == "w = 2.0"    # name and value (a float keeps its point)
    assert G.nodes[o(rec, ids["z"])]["label"] == "+"       # the Python that made it
    assert "TensorFlow op: AddV2" in G.nodes[o(rec, ids["z"])]["hover"]
    assert G.nodes[t(ids["z"])]["line"] == 4
    assert G.nodes[o(rec, ids["wx"])]["order"] < G.nodes[o(rec, ids["z"])]["order"]
    assert G.nodes[t(ids["z"])]["order"] == G.nodes[o(rec, ids["z"])]["order"]
    assert G.nodes[t(ids["w"])]["order"] == -1
    for _, d in G.nodes(data=True):
        assert {"kind", "category", "label", "hover", "line", "order", "phase"} <= set(d)


def test_watched_constant_is_its_own_category():
    rec, ids = wxb()
    rec.tapes[0].watched.append(ids["x"])
    G = graph.build(rec, View(tape=1))
    assert G.nodes[t(ids["x"])]["category"] == "watched_constant"


def test_hover_says_shape_dtype_value_stats_and_line():
    rec, ids = wxb()
    rec.tensor(ids["wx"]).stats = Stats(min=1.0, max=2.0, mean=1.5, std=0.5, nan=2, inf=0)
    G = graph.build(rec, View(tape=1))
    hover = G.nodes[t(ids["wx"])]["hover"]
    assert "float32" in hover and "mean 1.5" in hover and "2 NaN" in hover and "line 4" in hover
    assert "value 2" in G.nodes[t(ids["w"])]["hover"]


def test_tape_none_shows_every_op():
    rec, ids = wxb()
    G = graph.build(rec)
    assert {o(rec, ids["dw"]), o(rec, ids["db"])} <= set(G)


def test_none_gradient_reason_lands_on_its_source():
    rec, ids = wxb()
    G = graph.build(rec, View(tape=1, call=0))
    assert G.nodes[t(ids["x"])]["none_reason"] == "x is not watched: it is a tf.constant"
    assert "none_reason" not in G.nodes[t(ids["w"])]
    assert G.nodes[t(ids["z"])]["role"] == "target"


def test_gradient_path_only_drops_the_unconnected_branch():
    rec, ids = wxb()
    G = graph.build(rec, View(tape=1, call=0, path_only=True))
    assert t(ids["u"]) not in G and o(rec, ids["u"]) not in G
    assert {t(ids["w"]), t(ids["b"]), t(ids["wx"]), t(ids["z"]), o(rec, ids["wx"]), o(rec, ids["z"])} <= set(G)
    # the None source stays, so that its reason has somewhere to be shown
    assert "none_reason" in G.nodes[t(ids["x"])]


def test_gradient_path_without_flow_follows_the_graph():
    rec, ids = wxb()
    rec.tapes[0].gradients[0].flow = []
    G = graph.build(rec, View(tape=1, call=0, path_only=True))
    assert t(ids["u"]) not in G and t(ids["wx"]) in G and o(rec, ids["z"]) in G


def test_gradient_path_needs_a_call():
    rec, _ = wxb()
    with pytest.raises(ValueError):
        graph.build(rec, View(tape=1, path_only=True))


def test_upto_op_replays_a_prefix():
    rec, ids = wxb()
    G = graph.build(rec, View(tape=1), upto_op=rec.tensor(ids["wx"]).producer)
    assert o(rec, ids["wx"]) in G and t(ids["wx"]) in G
    assert o(rec, ids["z"]) not in G and t(ids["z"]) not in G and t(ids["u"]) not in G


def test_flow_norms_for_tensors_and_ops():
    rec, ids = wxb()
    rec.tapes[0].gradients[0].flow.append(FlowEntry(ids["u"], "nan"))
    norms = gradient_flow.flow_norms(rec, 1, 0)
    assert norms[t(ids["w"])] == 3.0 and norms[t(ids["z"])] == 1.0
    assert norms[o(rec, ids["wx"])] == 1.0          # an op shows the gradient at its output
    assert math.isnan(norms[t(ids["u"])])
    assert t(ids["x"]) not in norms


def test_grouping_collapses_each_layer_per_phase():
    rec, ids = keras_like()
    G = graph.build(rec)
    groups = {n: d for n, d in G.nodes(data=True) if d["kind"] == "group"}
    assert set(groups) == {"g:forward:sequential/dense", "g:forward:sequential/dense_1",
                           "g:backward:sequential/dense", "g:backward:sequential/dense_1"}
    assert groups["g:forward:sequential/dense"]["label"] == "dense (forward)"
    assert groups["g:backward:sequential/dense_1"]["label"] == "dense_1 (backward)"
    # no scoped op is left on its own; the loss ops have no scope and stay
    assert all(not (d["kind"] == "op" and d["scope"]) for _, d in G.nodes(data=True))
    assert G.nodes[o(rec, ids["loss"])]["kind"] == "op"
    forward = groups["g:forward:sequential/dense"]
    assert len(forward["members"]) == 4 and "4 ops" in forward["hover"]


def test_grouping_keeps_what_crosses_a_layer_and_hides_the_rest():
    rec, ids = keras_like()
    G = graph.build(rec, View(tape=1))
    dense, dense_1 = "g:forward:sequential/dense", "g:forward:sequential/dense_1"
    assert G.has_edge(t(ids["k1"]), dense) and G.has_edge(dense, t(ids["h"])) and G.has_edge(t(ids["h"]), dense_1)
    inside = [t(op.outputs[0]) for op in rec.ops if op.scope == "sequential/dense" and op.type != "Relu"]
    assert not any(n in G for n in inside)
    assert t(ids["eps"]) not in G and t(ids["eps"]) in graph.build(rec, View(tape=1, group=False))
    assert G.edges[t(ids["x"]), dense]["count"] == 2   # used twice inside the layer: one edge
    assert G.nodes[dense]["label"] == "dense"        # only the forward phase on this tape


def test_expand_shows_one_layer_op_by_op():
    rec, ids = keras_like()
    G = graph.build(rec, View(tape=1, expand={"sequential/dense"}))
    assert "g:forward:sequential/dense" not in G and "g:forward:sequential/dense_1" in G
    assert G.nodes[o(rec, ids["h"])]["label"] == "Relu"
    assert G.nodes[o(rec, ids["h"])]["group"] == "sequential/dense"


def test_group_false_shows_every_op():
    rec, _ = keras_like()
    G = graph.build(rec, View(tape=1, group=False))
    assert not any(d["kind"] == "group" for _, d in G.nodes(data=True))
    assert sum(d["kind"] == "op" for _, d in G.nodes(data=True)) == \
        sum(1 for op in rec.ops if op.tapes and op.type != "ReadVariableOp")


def test_group_flow_norm_is_the_largest_of_its_ops():
    rec, ids = keras_like()
    call = rec.tapes[0].gradients[0]
    call.flow = [FlowEntry(ids["k1"], 0.5), FlowEntry(ids["h"], 2.0), FlowEntry(ids["y"], 1.0),
                 FlowEntry(ids["loss"], 1.0)]
    G = graph.build(rec, View(tape=1))
    norms = gradient_flow.flow_norms(rec, 1, 0, G)
    assert norms["g:forward:sequential/dense"] == 2.0 and norms["g:forward:sequential/dense_1"] == 1.0
    assert set(norms) <= set(G)


def test_group_key_strips_the_gradient_tape_prefix():
    assert graph.group_key("gradient_tape/sequential/conv2d/Conv2DBackpropFilter") == "sequential/conv2d"
    assert graph.group_key("sequential/conv2d") == "sequential/conv2d"
    assert graph.group_key("dense") == "dense"
    assert graph.group_key(None) is None and graph.group_key("") is None


def test_gradient_calls_are_labelled_with_names():
    rec, _ = wxb()
    assert graph.gradient_calls(rec) == [(1, 0, "tape 1, line 7: gradient(z, [w, b, x])")]


def test_ten_thousand_op_chain_groups_into_layers():
    rec = chain(10_000, scope_every=100)
    G = graph.build(rec, View(tape=1))
    assert sum(d["kind"] == "group" for _, d in G.nodes(data=True)) == 100
    assert graph.build(rec, View(tape=1, group=False)).number_of_nodes() == 20_001


def test_a_named_layer_output_nobody_used_stays():
    rec, ids = keras_like()
    y_op = rec.op(rec.tensor(ids["y"]).producer)
    rec.ops = rec.ops[:rec.ops.index(y_op) + 1]       # y = model(x) and nothing after
    G = graph.build(rec, View(tape=1))
    assert G.has_edge("g:forward:sequential/dense_1", t(ids["y"]))
