"""figures.op_graph as a lesson: arrowheads, every input visible, labels that never overlap,
large text, and a step-through that reveals without moving anything."""
import pytest

from tapeviz.draw import arrows, figures, gradient_flow, graph, layout, place
from tapeviz.draw.options import View
from tapeviz.words import values
from builders import Builder, keras_like, loop, o, t, wxb
from figure_boxes import label_boxes, overlaps, screen_of
from tapeviz.recording import BACKWARD, FlowEntry, GradientCall, GradResult, Stats, Tape


def cube():
    """inner tape of y = x * x * x: x feeds both Muls, the second one past the first."""
    b = Builder()
    x = b.tensor("x", "variable", value=3.0)
    xx = b.op("Mul", [x, x], line=5)
    y = b.op("Mul", [xx, x], line=5, name="y")
    b.rec.tapes.append(Tape(id=1, line=4, persistent=False, watch_accessed_variables=True, parent=None,
                            ops=[op.id for op in b.rec.ops]))
    return b.rec, dict(x=x, xx=xx, y=y)


def drawn(rec, **kw):
    G = graph.build(rec, View(**kw))
    pos = layout.layered(G)
    flow = gradient_flow.flow_norms(rec, kw.get("tape"), kw["call"], G) if kw.get("call") is not None else None
    return G, pos, figures.op_graph(G, pos, flow=flow)


def trace(fig, name):
    return next(tr for tr in fig.data if tr.name == name)


def test_every_edge_has_an_arrowhead_pointing_at_its_head():
    rec, ids = cube()
    G, pos, fig = drawn(rec, tape=1)
    arrows = trace(fig, "arrows")
    assert len(arrows.x) == G.number_of_edges()
    # x -> first Mul points rightwards (layers run left to right): 90 degrees clockwise from up
    k = list(G.edges).index((t(ids["x"]), o(rec, ids["xx"])))
    assert pos[o(rec, ids["xx"])][0] > pos[t(ids["x"])][0]
    assert pos[o(rec, ids["xx"])][1] == pos[t(ids["x"])][1]
    assert arrows.marker.angle[k] == pytest.approx(90)


def test_an_input_past_a_chain_curves_around_it_not_under_it():
    rec, ids = cube()
    G, pos, fig = drawn(rec, tape=1)
    edges = trace(fig, "edges")
    # segments are separated by NaN; a straight one has 2 points, a curve CURVE_POINTS + 1
    segments, current = [], []
    for x, y in zip(edges.x, edges.y):
        if x != x:
            segments.append(current)
            current = []
        else:
            current.append((x, y))
    assert len(segments) == G.number_of_edges()
    late = list(G.edges).index((t(ids["x"]), o(rec, ids["y"])))
    a, b = pos[t(ids["x"])], pos[o(rec, ids["y"])]
    # the layout puts the chain on one row: the first Mul sits on the straight x -> second Mul line
    assert a[1] == b[1] == pos[o(rec, ids["xx"])][1] and a[0] < pos[o(rec, ids["xx"])][0] < b[0]
    assert len(segments[late]) == arrows.CURVE_POINTS + 1
    assert max(abs(y - a[1]) for _, y in segments[late]) > 0.1
    straight = list(G.edges).index((t(ids["x"]), o(rec, ids["xx"])))
    assert len(segments[straight]) == 2


def test_a_tensor_used_twice_says_x2_on_its_edge():
    rec, ids = cube()
    _, _, fig = drawn(rec, tape=1)
    assert list(trace(fig, "inputs per edge").text) == ["×2"]


def test_labels_never_overlap_on_the_lesson_graphs():
    for rec, kw in [(wxb()[0], dict(tape=1, call=0)), (keras_like()[0], dict(tape=1, call=0)),
                    (loop(3000)[0], dict(tape=1, call=0)), (cube()[0], dict(tape=1))]:
        _, _, fig = drawn(rec, **kw)
        boxes = label_boxes(fig)
        assert boxes, "a lesson graph must carry labels"
        assert overlaps(boxes) == []


def test_wxb_shows_each_variables_gradient_on_its_node():
    rec, ids = wxb()
    _, _, fig = drawn(rec, tape=1, call=0)
    variables = trace(fig, "variables")
    text = dict(zip(variables.customdata, variables.text))
    assert text[t(ids["w"])] == "w = 2.0<br>grad " + values.short_value(rec.tensor(ids["dw"]))
    assert text[t(ids["b"])].startswith("b = 1.0<br>grad ")


def test_a_big_sources_gradient_is_its_norm():
    rec, ids = wxb()
    dw = rec.tensor(ids["dw"])
    dw.shape = [10, 10]
    dw.stats = Stats(min=-1.0, max=1.0, mean=0.0, std=1.0)
    G = graph.build(rec, View(tape=1, call=0))
    assert G.nodes[t(ids["w"])]["label"] == "w = 2.0\nsize of grad 10.0"


def test_large_text_is_at_least_16_px_and_still_without_overlaps():
    rec, _ = wxb()
    G = graph.build(rec, View(tape=1, call=0))
    fig = figures.op_graph(G, layout.layered(G), View(large_text=True))
    assert all(tr.textfont.size >= 16 for tr in fig.data if tr.customdata is not None and tr.text is not None)
    assert fig.layout.font.size >= 16
    assert overlaps(label_boxes(fig)) == []


def test_a_3000_op_loop_draws_a_handful_of_markers_naming_the_count():
    rec, _ = loop(3000)
    _, _, fig = drawn(rec, tape=1, call=0)
    markers = sum(len(tr.x) for tr in fig.data if tr.mode and "markers" in tr.mode and tr.customdata is not None)
    assert markers < 10
    assert any("×3000" in str(x) for tr in fig.data if tr.text is not None for x in tr.text)


def test_a_step_reveals_on_the_same_axes():
    rec, ids = wxb()
    G = graph.build(rec, View(tape=1, call=0))
    pos = layout.layered(G)
    whole = figures.op_graph(G, pos)
    first = o(rec, ids["wx"])
    visible = {n for n, d in G.nodes(data=True) if d["order"] <= G.nodes[first]["order"]}
    step = figures.op_graph(G, pos, View(current=first), visible=visible)
    assert step.layout.xaxis.range == whole.layout.xaxis.range
    assert step.layout.yaxis.range == whole.layout.yaxis.range
    drawn_nodes = {n for tr in step.data if tr.customdata is not None and tr.name not in ("this step", "selected")
                   for n in tr.customdata}
    assert drawn_nodes == visible and t(ids["z"]) not in drawn_nodes
    assert trace(step, "this step").customdata == (first,)


def test_none_note_and_labels_do_not_collide():
    rec, ids = wxb()
    G, pos, fig = drawn(rec, tape=1, call=0)
    (note,) = fig.layout.annotations
    screen = screen_of(fig)
    box = screen.note_box(pos[t(ids["x"])], place.note_text(G.nodes[t(ids["x"])]["none_reason"]), note.ay)
    markers = [screen.marker_box(pos[n], place.radius(G, n)) for n in G if n != t(ids["x"])]
    assert not any(place.intersect(box, m) for m in markers)
    assert not any(place.intersect(box, b) for _, b in label_boxes(fig))


def second_derivative():
    """The nested-tapes lesson as the recorder writes the outer tape of y = x * x * x at
    x = 1: three reads of x, two Muls, then the inner gradient's backward ops (recorded by
    the outer tape), summed by an AddN into dy_dx; the outer call asks d dy_dx / dx."""
    b = Builder()
    x = b.tensor("x", "variable", value=1.0)
    r1, r2 = b.read(x), b.read(x)
    xx = b.op("Mul", [r1, r2], line=7)
    r3 = b.read(x)
    y = b.op("Mul", [xx, r3], line=7, name="y")
    seed = b.tensor(kind="constant", value=1.0)
    g_xx = b.op("Mul", [seed, r3], line=9, phase=BACKWARD)
    g_r3 = b.op("Mul", [seed, xx], line=9, phase=BACKWARD)
    g_r1 = b.op("Mul", [g_xx, r2], line=9, phase=BACKWARD)
    g_r2 = b.op("Mul", [g_xx, r1], line=9, phase=BACKWARD)
    dy_dx = b.op("AddN", [g_r3, g_r1, g_r2], line=9, phase=BACKWARD, name="dy_dx")
    for t_, v in ((r1, 1.0), (r2, 1.0), (xx, 1.0), (r3, 1.0), (y, 1.0), (g_xx, 1.0), (g_r3, 1.0),
                  (g_r1, 1.0), (g_r2, 1.0), (dy_dx, 3.0)):
        b.rec.tensor(t_).value = v
    d2 = b.tensor(value=6.0)
    flow = [FlowEntry(x, 6.0, 6.0), FlowEntry(r1, 2.0, 2.0), FlowEntry(r2, 2.0, 2.0), FlowEntry(xx, 1.0, 1.0),
            FlowEntry(r3, 2.0, 2.0), FlowEntry(g_xx, 2.0, 2.0), FlowEntry(g_r3, 1.0, 1.0),
            FlowEntry(g_r1, 1.0, 1.0), FlowEntry(g_r2, 1.0, 1.0), FlowEntry(dy_dx, 1.0, 1.0)]
    b.rec.tapes.append(Tape(id=1, line=5, persistent=False, watch_accessed_variables=True, parent=None,
                            ops=[op.id for op in b.rec.ops], gradients=[
                                GradientCall(line=10, kind="gradient", target=[dy_dx], sources=[x],
                                             results=[GradResult(x, d2)], flow=flow)]))
    return b.rec, dict(x=x, dy_dx=dy_dx)


def edge_pieces(fig, width_scale=1.0):
    """The drawn edges as straight pieces in the estimated plot pixels label_boxes uses."""
    screen = screen_of(fig)
    edges = trace(fig, "edges")
    pieces, last = [], None
    for x, y in zip(edges.x, edges.y):
        point = None if x != x else screen.px((x, y))
        if point is not None and last is not None:
            pieces.append((last, point))
        last = point
    return pieces


def crosses(box, piece) -> bool:
    """Whether a straight piece passes through a box (clipped against its four sides)."""
    (x0, y0), (x1, y1) = piece
    low, high = 0.0, 1.0
    for p, q in ((x0 - x1, x0 - box[0]), (x1 - x0, box[2] - x0), (y0 - y1, y0 - box[1]), (y1 - y0, box[3] - y0)):
        if p == 0:
            if q < 0:
                return False
        elif p < 0:
            low = max(low, q / p)
        else:
            high = min(high, q / p)
    return low < high


def crossed_labels(fig) -> list:
    pieces = edge_pieces(fig)
    return [node for node, box in label_boxes(fig) if any(crosses(box, piece) for piece in pieces)]


@pytest.mark.xfail(strict=True, reason="known gap: floats keep their point ('x = 1.0', 'size of grad 1.0'), and "
                   "place.py finds no spot for the longer label that no arrow crosses")
def test_no_arrow_crosses_the_nested_tapes_lesson_labels():
    # The inner gradient's AddN fans three arrows in, and x fans five out: placed against
    # labels and markers only, tf.add_n's label sat where its inputs arrive, and x's "grad 6"
    # and two "*" were crossed by x's own arrows.
    rec, ids = second_derivative()
    G, pos, fig = drawn(rec, tape=1, call=0)
    crossed = crossed_labels(fig)
    lesson = [t(ids["x"]), t(ids["dy_dx"])] + [n for n, d in G.nodes(data=True) if d["kind"] == "op"]
    assert [G.nodes[n]["label"] for n in crossed if n in lesson] == []
    assert len(crossed) <= 2, [G.nodes[n]["label"] for n in crossed]
    assert overlaps(label_boxes(fig)) == []


@pytest.mark.xfail(strict=True, reason="known gap: floats keep their point ('x = 1.0', 'size of grad 1.0'), and "
                   "place.py finds no spot for the longer label that no arrow crosses")
def test_no_arrow_crosses_a_label_on_the_small_lesson_graphs():
    for rec, kw in [(wxb()[0], dict(tape=1, call=0)), (cube()[0], dict(tape=1))]:
        G, _, fig = drawn(rec, **kw)
        assert [G.nodes[n]["label"] for n in crossed_labels(fig)] == []


def misattributed(G, fig) -> list:
    """Labels whose box lies nearer another node's centre than their own's (by more than
    place.NEARER_PX): read as that node's label."""
    import numpy as np
    screen = screen_of(fig)
    pos = layout.layered(G)
    centres = {n: screen.px(p) for n, p in pos.items()}

    def gap(box, point):
        dx = max(box[0] - point[0], point[0] - box[2], 0.0)
        dy = max(box[1] - point[1], point[1] - box[3], 0.0)
        return float(np.hypot(dx, dy))

    return [node for node, box in label_boxes(fig)
            if any(gap(box, c) + place.NEARER_PX < gap(box, centres[node]) for m, c in centres.items() if m != node)]


def test_each_label_sits_by_its_own_node():
    # A training step's layers in a row, 34 px squares a few px apart: "conv2d_1" placed to
    # the top right of its square sat over the next layer's square and named it.
    rec, _ = keras_like()
    for G in (graph.build(rec, View(tape=1, call=0, group=True)), graph.build(rec, View(tape=1, call=0)),
              graph.build(second_derivative()[0], View(tape=1, call=0))):
        fig = figures.op_graph(G, layout.layered(G), flow=None)
        assert misattributed(G, fig) == [], [G.nodes[n]["label"] for n in misattributed(G, fig)]
