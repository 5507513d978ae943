"""draw/first_paint.py: an op graph's first picture carries what the Plotly figure does (every
label, every node at its place on the axes) and stands aside where it cannot (WebGL)."""
import base64
import re

import plotly.graph_objects as go

from tapeviz.draw import first_paint
from builders import keras_like, wxb
from figure_boxes import lesson_figure


def plot_svg(html: str) -> str:
    """The plot's SVG inside the picture's image."""
    images = re.findall(r'src="data:image/svg\+xml;base64,([^"]+)"', html)
    svgs = [base64.b64decode(i).decode() for i in images]
    return max(svgs, key=len)


def test_every_label_of_the_figure_is_in_the_picture():
    rec, _ = wxb()
    fig = lesson_figure(rec, tape=1, call=0)
    svg = plot_svg(first_paint.picture(fig))
    labels = [line for tr in fig.data if tr.text is not None and "text" in (tr.mode or "")
              for text in tr.text if text for line in re.sub(r"<[^>]+>", "\n", text).split("\n") if line]
    assert labels, "the lesson's figure has labels"
    for line in labels:
        assert f">{line}<" in svg.replace("&lt;", "<").replace("&gt;", ">"), line


def test_each_node_sits_at_its_share_of_the_axes():
    rec, _ = wxb()
    fig = lesson_figure(rec, tape=1)
    (x0, x1), (y0, y1) = fig.layout.xaxis.range, fig.layout.yaxis.range
    svg = plot_svg(first_paint.picture(fig))
    placed = {(float(a), float(b)) for a, b in re.findall(r'<svg x="([-\d.]+)%" y="([-\d.]+)%"', svg)}
    nodes = [(x, y) for tr in fig.data if tr.customdata is not None for x, y in zip(tr.x, tr.y)]
    assert nodes
    for x, y in nodes:
        want = ((x - x0) / (x1 - x0) * 100, (y1 - y) / (y1 - y0) * 100)
        assert any(abs(a - want[0]) < 1e-2 and abs(b - want[1]) < 1e-2 for a, b in placed), (x, y)


def test_the_colour_bar_and_the_none_note_come_with_the_gradient_flow():
    rec, _ = wxb()
    fig = lesson_figure(rec, tape=1, call=0)
    html = first_paint.picture(fig)
    assert "size of the gradient" in html
    notes = [a.text for a in fig.layout.annotations]
    assert notes and all(note.split(":")[0] in plot_svg(html) for note in notes)


def test_a_grouped_model_graph_has_a_picture_too():
    rec, _ = keras_like()
    fig = lesson_figure(rec, tape=1, call=0, group=True)
    svg = plot_svg(first_paint.picture(fig))
    layers = [t for tr in fig.data if tr.name == "layers" and tr.text is not None for t in tr.text if t]
    assert layers and all(t.split("<br>")[0] in svg for t in layers)


def test_a_webgl_figure_gets_no_picture():
    fig = go.Figure(go.Scattergl(x=[0, 1], y=[0, 1], mode="markers"))
    assert first_paint.picture(fig) is None
