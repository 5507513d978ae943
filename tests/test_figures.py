"""figures.op_graph: one edge trace, a trace per category, flow colours, None notes, 10k ops."""
import pathlib

import plotly.graph_objects as go

from tapeviz.draw import figures, gradient_flow, graph, layout, nodes, place
from tapeviz.draw.options import View
from tapeviz.recording import FlowEntry
from builders import chain, keras_like, wxb
from figure_boxes import label_boxes, overlaps

ROOT = pathlib.Path(__file__).resolve().parents[1]


def draw(rec, flow=None, **kw):
    G = graph.build(rec, View(**kw))
    return G, figures.op_graph(G, layout.layered(G), flow=flow)


def lines(fig):
    return [tr for tr in fig.data if tr.mode == "lines"]


def gaps(trace):
    """Segments in an edge trace: they are separated by NaN gaps."""
    return sum(1 for v in trace.x if v != v)


def node_traces(fig):
    return [tr for tr in fig.data if tr.mode != "lines" and tr.customdata is not None and tr.name != "selected"]


def test_one_edge_trace_holds_every_edge():
    rec, _ = wxb()
    G, fig = draw(rec, tape=1)
    (edges,) = lines(fig)
    assert gaps(edges) == G.number_of_edges()


def test_one_trace_per_category_with_the_node_ids():
    rec, _ = wxb()
    G, fig = draw(rec)
    traces = node_traces(fig)
    names = [tr.name for tr in traces]
    assert names == ["variables", "constants", "intermediate tensors", "forward ops", "backward ops"]
    assert sorted(n for tr in traces for n in tr.customdata) == sorted(G)
    # a small graph is SVG: arrowheads and labels the browser can measure
    assert all(isinstance(tr, go.Scatter) for tr in fig.data)
    ops = next(tr for tr in traces if tr.name == "forward ops")
    assert ops.marker.symbol == "square" and ops.textfont.size >= 14
    assert "*" in ops.text


def test_hover_text_is_html_with_line_breaks():
    rec, ids = wxb()
    G, fig = draw(rec, tape=1)
    variables = next(tr for tr in node_traces(fig) if tr.name == "variables")
    k = list(variables.customdata).index(graph.tensor_node(ids["w"]))
    assert variables.hovertext[k].startswith("w  (variable)<br>")


def test_flow_colours_nodes_and_shows_a_colour_bar():
    rec, ids = wxb()
    G = graph.build(rec, View(tape=1, call=0))
    flow = gradient_flow.flow_norms(rec, 1, 0, G)
    fig = figures.op_graph(G, layout.layered(G), flow=flow)
    bars = [tr for tr in fig.data if tr.marker is not None and tr.marker.showscale]
    assert len(bars) == 1 and bars[0].marker.colorscale
    colours = {n: c for tr in node_traces(fig) for n, c in zip(tr.customdata, tr.marker.color)}
    assert colours[graph.tensor_node(ids["u"])] == figures.NO_GRADIENT_AT  # the branch the gradient skips
    w, z = colours[graph.tensor_node(ids["w"])], colours[graph.tensor_node(ids["z"])]
    assert figures.SCALE_LOW <= z < w <= figures.SCALE_HIGH              # |dz/dw| = 3 > |dz/dz| = 1
    scale = node_traces(fig)[0].marker.colorscale     # the numbers' colours: grey, Viridis, red
    assert scale[0][1] == figures.NO_GRADIENT and scale[-1][1] == figures.NON_FINITE
    # the base edges grey out and the path is drawn again on top
    base, path = lines(fig)
    assert base.line.color == figures.NO_GRADIENT
    assert gaps(path) == 5    # w->Mul->wx->Add->z and b->Add; not x, which is not watched


def test_a_small_flow_graph_needs_no_webgl():
    """One WebGL trace (even a point-less legend swatch) makes plotly set up WebGL for the
    whole chart: about 0.2 s of every draw in Chromium. A small graph is all SVG."""
    rec, _ = wxb()
    G = graph.build(rec, View(tape=1, call=0))
    fig = figures.op_graph(G, layout.layered(G), flow=gradient_flow.flow_norms(rec, 1, 0, G))
    assert G.number_of_nodes() <= figures.SVG_NODES
    assert {tr.type for tr in fig.data} == {"scatter"}
    assert any(tr.marker is not None and tr.marker.showscale for tr in fig.data)   # colour bar
    assert sum(1 for tr in fig.data if tr.showlegend is not False and tr.x == (None,)) >= 2


def test_zero_and_non_finite_norms_stand_apart():
    rec, ids = wxb()
    flow = rec.tapes[0].gradients[0].flow
    flow[:] = [FlowEntry(ids["w"], "nan"), FlowEntry(ids["wx"], "inf"), FlowEntry(ids["b"], 0.0),
               FlowEntry(ids["z"], 1.0)]
    G = graph.build(rec, View(tape=1))
    fig = figures.op_graph(G, layout.layered(G), flow=gradient_flow.flow_norms(rec, 1, 0, G))
    colours = {n: c for tr in node_traces(fig) for n, c in zip(tr.customdata, tr.marker.color)}
    assert colours[graph.tensor_node(ids["w"])] == colours[graph.tensor_node(ids["wx"])] \
        == figures.NON_FINITE_AT
    assert colours[graph.tensor_node(ids["b"])] == figures.NO_GRADIENT_AT
    assert figures.SCALE_LOW <= colours[graph.tensor_node(ids["z"])] <= figures.SCALE_HIGH
    hover = {n: h for tr in node_traces(fig) for n, h in zip(tr.customdata, tr.hovertext)}
    assert "nan" in hover[graph.tensor_node(ids["w"])]


def test_no_colour_bar_when_no_gradient_flows():
    rec, ids = wxb()
    G = graph.build(rec, View(tape=1))
    fig = figures.op_graph(G, layout.layered(G), flow={graph.tensor_node(ids["w"]): 0.0})
    assert not any(tr.marker is not None and tr.marker.showscale for tr in fig.data)


def test_none_gradient_source_is_annotated_with_its_reason():
    rec, ids = wxb()
    G, fig = draw(rec, tape=1, call=0)
    (note,) = fig.layout.annotations
    x, y = layout.layered(G)[graph.tensor_node(ids["x"])]
    assert (note.x, note.y) == (x, y)
    assert note.text == "gradient None: x is not watched"
    assert note.hovertext == "x is not watched: it is a tf.constant"


def test_no_notes_without_a_call():
    rec, _ = wxb()
    _, fig = draw(rec, tape=1)
    assert not fig.layout.annotations


def test_selected_node_is_ringed():
    rec, ids = wxb()
    G = graph.build(rec, View(tape=1))
    pos = layout.layered(G)
    node = graph.tensor_node(ids["wx"])
    fig = figures.op_graph(G, pos, View(picked=node), title="z = w*x + b")
    (ring,) = [tr for tr in fig.data if tr.name == "selected"]
    assert (ring.x[0], ring.y[0]) == pos[node] and list(ring.customdata) == [node]
    assert fig.layout.title.text == "z = w*x + b"


def test_groups_are_drawn_by_phase():
    rec, _ = keras_like()
    _, fig = draw(rec)
    (layers,) = [tr for tr in node_traces(fig) if tr.name == "layers"]
    symbols = dict(zip(layers.customdata, layers.marker.symbol))
    assert symbols["g:forward:sequential/dense"] == "square"
    assert symbols["g:backward:sequential/dense"] == "diamond"
    # a label that has no room is left to the hover, which always names the layer and phase
    assert "dense_1 (backward)" in layers.text
    assert any("sequential/dense  (backward)" in h for h in layers.hovertext)
    assert overlaps(label_boxes(fig)) == []


def test_ten_thousand_ops_stay_in_a_handful_of_webgl_traces():
    rec = chain(10_000)
    rec.tapes[0].gradients = []
    G, fig = draw(rec, tape=1)
    assert len(fig.data) <= len(nodes.CATEGORIES) + 1
    assert all(isinstance(tr, go.Scattergl) for tr in fig.data)
    assert len(lines(fig)) == 1
    # thousands of labels would be an unreadable smear: hover carries them instead
    assert all(tr.text is None for tr in node_traces(fig) if len(tr.customdata) > place.MAX_LABELS)
    assert sum(len(tr.customdata) for tr in node_traces(fig)) == G.number_of_nodes()


def test_to_html_is_standalone():
    rec, _ = wxb()
    _, fig = draw(rec, tape=1)
    page = figures.to_html(fig)
    assert "<html>" in page and page.rstrip().endswith("</html>")
    # plotly.js itself is inlined (megabytes), not fetched from a CDN: the file opens offline
    assert len(page) > 1_000_000 and 'src="https://cdn.plot.ly' not in page
    assert '"customdata"' in page


def test_flow_legend_colours_match_the_nodes_rims():
    rec, ids = wxb()
    G = graph.build(rec, View(tape=1, call=0))
    fig = figures.op_graph(G, layout.layered(G), flow=gradient_flow.flow_norms(rec, 1, 0, G))
    shown = [tr for tr in fig.data if tr.showlegend is not False and tr.name]
    assert all(tr.customdata is None for tr in shown), "coloured node traces must not be in the legend"
    rims = {tr.name: tr.marker.line.color for tr in shown if tr.marker.line.color}
    nodes = {tr.name: tr.marker.line.color for tr in node_traces(fig)}
    # every category's legend swatch has the rim its nodes have, and categories differ
    assert rims == nodes and len(set(rims.values())) == len(rims) >= 4
    assert {tr.name: tr.marker.color for tr in shown}["no gradient"] == figures.NO_GRADIENT


def test_long_labels_on_one_row_do_not_overlap():
    import networkx as nx
    G = nx.DiGraph()
    for k in range(3):
        G.add_node(f"n{k}", kind="op", category="forward_op", label=f"sparse_categorical_crossentropy_{k}", hover="")
    pos = {f"n{k}": (float(k), 0.0) for k in range(3)}
    fig = figures.op_graph(G, pos)
    (trace,) = node_traces(fig)
    places = list(trace.textposition)
    # neighbours go above and below each other; what fits nowhere is left to the hover
    assert places[0] != places[1]
    assert overlaps(label_boxes(fig)) == []


def test_no_colour_bar_invents_a_range_when_every_gradient_is_one_size():
    rec, ids = wxb()
    G = graph.build(rec, View(tape=1))
    w, z = graph.tensor_node(ids["w"]), graph.tensor_node(ids["z"])
    fig = figures.op_graph(G, layout.layered(G), flow={w: 1.0, z: 1.0})
    assert not any(tr.marker is not None and tr.marker.showscale for tr in fig.data)
    fig = figures.op_graph(G, layout.layered(G), flow={w: 3.0, z: 1.0})
    assert any(tr.marker is not None and tr.marker.showscale for tr in fig.data)


def test_the_figure_is_built_for_its_legend_and_keeps_the_labels_room_without_it():
    rec, _ = wxb()
    G = graph.build(rec, View(tape=1, call=0))
    pos, flow = layout.layered(G), gradient_flow.flow_norms(rec, 1, 0, G)
    with_legend, without = (figures.op_graph(G, pos, View(legend=shown, height=420), flow=flow)
                            for shown in (True, False))
    assert with_legend.layout.showlegend and not without.layout.showlegend
    # the labels are placed for one plot either way, and the figure says which
    assert with_legend.layout.meta == without.layout.meta
    assert label_boxes(with_legend) == label_boxes(without)
    assert with_legend.layout.height == with_legend.layout.meta["height"] == 420
    # without the legend the chart is only its plot and margins: no white where the legend was
    width, height = without.layout.meta["label_room"]
    assert without.layout.height - without.layout.margin.t - without.layout.margin.b == height
    assert without.layout.height < with_legend.layout.height
