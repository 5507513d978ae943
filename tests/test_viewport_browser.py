"""The graph's labels are placed for the chart the browser really draws: the window's width
reaches the figure's label placement (ui/viewport.py), so a wide "Graph first" page names
more of a crowded graph's boxes than a narrow page does."""
import json
import os
import subprocess
import sys

import pytest

from browser_util import WAIT_MS, ROOT, assert_no_exception, browser_page, screenshot_path, served

pytestmark = pytest.mark.slow

ACTOR_CRITIC = ROOT / "tests" / "programs" / "actor_critic_cartpole.py"
LABELS = "() => [...document.querySelectorAll('.js-plotly-plot .textpoint text')].filter(t => t.textContent).length"


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    folder = tmp_path_factory.mktemp("episode")
    subprocess.run([sys.executable, "-m", "tapeviz", "record", str(ACTOR_CRITIC), "-o", "run.json",
                    "--timeout", "240"], cwd=folder, check=True, capture_output=True, timeout=300,
                   env={**os.environ, "PYTHONPATH": str(ROOT)})
    return folder


@pytest.fixture(scope="module")
def viewer(recording):
    with served(lambda port: [sys.executable, "-m", "tapeviz", "view", "run.json", "--port", str(port),
                              "--headless"], cwd=recording, env={"PYTHONPATH": str(ROOT)}) as url:
        yield url


def drawn_boxes(recording, chart_width, height=None):
    """The page's opening view drawn as the page draws it for a chart `chart_width` px wide
    (and `height` px tall when the page fitted it to the window): (how many
    labels, how many of its folded-loop and layer boxes are named)."""
    from tapeviz.draw import figures, gradient_flow, graph, layout, overview
    from tapeviz.draw.options import View
    from tapeviz.state import view
    rec = overview.as_recording(json.loads((recording / "run.json").read_text()))
    tape, call = view.parse_view(view.default_view(rec))
    showing = View(tape=tape, call=call, group=graph.opens_grouped(rec), legend=False, width=chart_width,
                   height=height)
    G = graph.build(rec, showing)
    flow = gradient_flow.flow_norms(rec, tape, call, G) if call is not None else None
    fig = figures.op_graph(G, layout.layered(G), showing, flow=flow)
    texts = {n: t for tr in fig.data if tr.customdata is not None and tr.text is not None
             for n, t in zip(tr.customdata, tr.text) if t}
    boxes = [n for n, d in G.nodes(data=True) if d.get("kind") in ("repeat", "group")]
    return sum(1 for tr in fig.data if tr.text is not None for t in tr.text if t), \
        sum(1 for n in boxes if n in texts)


def labels_on_page(page, viewer, width, height, graph_first):
    """(the chart's width as Chromium lays it out and the height its labels were placed for
    (its meta: the chart's height with the legend's room, which the page, legend off, does
    not draw), the labels plotly drew) once settled."""
    page.set_viewport_size({"width": width, "height": height})
    page.goto(viewer)
    page.wait_for_selector(".js-plotly-plot .scatterlayer", timeout=WAIT_MS)
    if graph_first:
        page.get_by_text("Graph first").click()
    page.wait_for_timeout(3000)         # the width's report, then the redraw it asks for
    chart = page.evaluate("() => { const gd = document.querySelector('.js-plotly-plot');"
                          " return [gd.getBoundingClientRect().width, gd.layout.meta.height,"
                          " document.documentElement.clientWidth]; }")   # a scroll bar's width off
    assert_no_exception(page)
    page.screenshot(path=screenshot_path(f"episode_{width}x{height}{'_graph_first' if graph_first else ''}.png"))
    return chart, page.evaluate(LABELS)


def test_a_wide_graph_first_page_names_more_boxes_than_a_narrow_one(recording, viewer):
    from tapeviz.ui import viewport
    with browser_page() as page:
        (wide_chart, wide_h, wide_w), wide_labels = labels_on_page(page, viewer, 1600, 1000, graph_first=True)
    with browser_page() as page:
        (narrow_chart, narrow_h, narrow_w), narrow_labels = labels_on_page(page, viewer, 1280, 720, graph_first=False)
    # The column's width the page computes is the one Chromium lays the chart out at
    for chart, (width, first) in ((wide_chart, (wide_w, True)), (narrow_chart, (narrow_w, False))):
        assert abs(viewport.graph_width(width, first, False) - chart) < 12, (width, first, chart)
    # and the labels drawn are those placed for it, not for the narrowest chart (PLOT_W)
    wide = drawn_boxes(recording, viewport.graph_width(wide_w, True, False), wide_h)
    assert wide_labels == wide[0]
    # The narrow page's graph is also fitted to the window's height, so its
    # labels are checked against the wide page's, not recomputed.
    narrow = drawn_boxes(recording, viewport.graph_width(narrow_w, False, False), narrow_h)
    assert narrow_labels < wide_labels
    assert wide[1] > narrow[1] and wide[0] > drawn_boxes(recording, None)[0]
