"""Room on the graph for what a class must read, from real recordings made in-process: the
mnist_step loss's label whole on the page's chart at 1600, 1280 and 1024 px wide windows
(Large text too), and no white above the graph beyond what its top row's labels take."""
import pytest

tf = pytest.importorskip("tensorflow")

from tapeviz import examples  # noqa: E402
from tapeviz.draw import figures, gradient_flow, graph, layout, place  # noqa: E402
from tapeviz.draw.options import View  # noqa: E402
from tapeviz.state import callouts, view  # noqa: E402
from tapeviz.ui import viewport  # noqa: E402
from tapeviz.worker import recorder  # noqa: E402
from figure_boxes import overlaps, screen_of  # noqa: E402

WINDOWS = (1600, 1280, 1024)


@pytest.fixture(scope="module")
def drawn():
    """{example: (G, pos, flow)} as the page opens each."""
    out = {}
    for name in ("mnist_step", "nan_hunt"):
        rec = recorder.record(examples.load(name).source)
        state = callouts.opening(rec)
        tape, call = view.parse_view(state["view"])
        G = graph.build(rec, View(tape=tape, call=call, fold=state["fold"], backward=state["backward"], group=state.get("group", graph.opens_grouped(rec))))
        out[name] = (G, layout.layered(G), gradient_flow.flow_norms(rec, tape, call, G))
    return out


def page_figure(G, pos, flow, window, large=False):
    width = viewport.graph_width(window, False, large)
    # as the page opens: no legend, the plot the labels were placed for said in the meta
    fig = figures.op_graph(G, pos, View(width=width, large_text=large, legend=False), flow=flow)
    screen = screen_of(fig)
    font = fig.layout.font.size
    boxes = []
    for tr in fig.data:
        if tr.text is None or tr.customdata is None:
            continue
        places = tr.textposition if isinstance(tr.textposition, tuple) else [tr.textposition] * len(tr.x)
        for node, x, y, text, where in zip(tr.customdata, tr.x, tr.y, tr.text, places):
            if text:
                boxes.append((node, text, screen.label_box((x, y), place.radius(G, node),
                                                           text.split("<br>"), where, font)))
    return fig, screen, boxes


@pytest.mark.parametrize("large", [False, True])
@pytest.mark.parametrize("window", WINDOWS)
def test_the_steps_loss_is_labelled_whole_inside_the_chart(drawn, window, large):
    G, pos, flow = drawn["mnist_step"]
    (target,) = [n for n, d in G.nodes(data=True) if d.get("role") == "target"]
    assert G.nodes[target]["label"].startswith("loss = ")
    fig, screen, boxes = page_figure(G, pos, flow, window, large)
    said = {node: (text, box) for node, text, box in boxes}
    assert target in said, f"the loss has no label at a {window} px window"
    text, box = said[target]
    assert text.split("<br>") == G.nodes[target]["label"].split("\n")
    assert place.inside(box, screen), box
    assert overlaps([(n, b) for n, _, b in boxes]) == []


@pytest.mark.parametrize("window", WINDOWS)
def test_no_white_above_the_graph_past_its_top_rows_labels(drawn, window):
    for name, (G, pos, flow) in drawn.items():
        fig, screen, boxes = page_figure(G, pos, flow, window)
        marks = [screen.marker_box(pos[n], place.radius(G, n)) for n in pos]
        top = max(b[3] for b in marks + [b for _, _, b in boxes])
        assert top <= screen.h, f"{name}: a label past the top edge"
        # the top row's labels sit against the top edge: 50 px of white above pushed the
        # graph down a projector's screen
        assert screen.h - top <= 12, (name, screen.h - top)
