"""Where a figure's labels land, in estimated plot pixels, and which of them overlap: what
the figure tests check the no-overlap rule against (the browser tests measure the real ones)."""
import plotly.graph_objects as go

from tapeviz.draw import figures, gradient_flow, graph, layout, place
from tapeviz.draw.options import View


def label_boxes(fig: go.Figure) -> list:
    """[(node, (left, bottom, right, top))] in estimated plot pixels of every drawn label:
    what the no-overlap rule is checked against (the browser test measures the real ones)."""
    screen = screen_of(fig)
    font = fig.layout.font.size or figures.LABEL_FONT
    out = []
    for tr in fig.data:
        if tr.text is None or tr.x is None or tr.customdata is None:
            continue
        places = tr.textposition if isinstance(tr.textposition, (list, tuple)) else [tr.textposition] * len(tr.x)
        sizes = tr.marker.size if isinstance(tr.marker.size, (list, tuple)) else [tr.marker.size] * len(tr.x)
        for node, x, y, text, where, size in zip(tr.customdata, tr.x, tr.y, tr.text, places, sizes):
            if text:
                out.append((node, screen.label_box((x, y), (size or 0) / 2, str(text).split("<br>"), where, font)))
    return out


def screen_of(fig: go.Figure) -> place.Screen:
    """The plot's px as the figure says its labels were placed for (its meta's label room)."""
    width, height = fig.layout.meta["label_room"]
    return place.Screen((list(fig.layout.xaxis.range), list(fig.layout.yaxis.range)), height, width)


def overlaps(boxes: list) -> list:
    """Pairs of labels whose boxes intersect."""
    return [(a, b) for i, (a, p) in enumerate(boxes) for b, q in boxes[i + 1:] if place.intersect(p, q)]


def lesson_figure(rec, **view):
    """The op graph of `rec` as the page draws it for View(**view): its gradient flow
    when a call is chosen."""
    G = graph.build(rec, View(**view))
    call = view.get("call")
    flow = gradient_flow.flow_norms(rec, view.get("tape"), call, G) if call is not None else None
    return figures.op_graph(G, layout.layered(G), View(**view), flow=flow)
