"""Plotly figures of the op graph and of the gradient flowing back through it.

Drawing only: graph.py says what the nodes are, layout.py where they go. One trace per
node category: SVG for the graphs a lesson shows (arrowheads, labels placed without
overlaps), WebGL past SVG_NODES so that a 10,000-op recording stays responsive.
"""
from __future__ import annotations

import functools
import html
import math
from typing import Optional

import networkx as nx
import numpy as np
import plotly.graph_objects as go
from plotly.colors import sample_colorscale

from .graph import BACKWARD_OP, CATEGORIES, FORWARD_OP, GROUP, REPEAT, UNRECORDED_OP

# Okabe-Ito colours: told apart by colour-blind students and on a washed-out projector.
STYLE = {   # category: (legend name, symbol, colour)
    "variable": ("variables", "circle", "#E69F00"),
    "watched_constant": ("watched constants", "circle", "#D55E00"),
    "constant": ("constants", "circle", "#999999"),
    "intermediate": ("intermediate tensors", "circle", "#56B4E9"),
    FORWARD_OP: ("forward ops", "square", "#009E73"),
    BACKWARD_OP: ("backward ops", "diamond", "#CC79A7"),
    GROUP: ("layers", "square", "#0072B2"),
    REPEAT: ("repeated ops (folded)", "square", "#117733"),
    UNRECORDED_OP: ("ops the tape did not record", "square-open", "#777777"),
}
SIZE = {"tensor": 16, "op": 20, GROUP: 34, REPEAT: 30}
LARGE = 1500              # nodes: beyond this, smaller markers
SVG_NODES = 800           # up to this many nodes: SVG (arrowheads, measurable labels); beyond, WebGL
LABELLED_TRACE = 400      # kept for callers: the most labels a graph draws (MAX_LABELS)
MAX_LABELS = 400
LABEL_FONT = 14
LARGE_FONT = 18           # "large text": for a projector at the back of a room
MAX_NONE_NOTES = 40
NOTE_RISE = 46            # px between a None-gradient node and its note
# The plot area the label placement assumes (px): the debugger's chart in a 1280 px wide window.
PLOT_W, PLOT_H = 570.0, 470.0
MARGIN_W = 20             # px of a figure's width that are not plot: its side margins
COLOUR_BAR_PX = 110       # what the colour bar takes from the plot's width
PLOT_MARGIN = 150         # px of the chart's height that are not plot: legend on top, margins
MIN_HEIGHT, MAX_HEIGHT = 320, 620
CHAR_EM, LINE_EM = 0.62, 1.3    # a label character's width and a line's height, in font sizes
WIDER = 1.6               # the widest plot, against PLOT_W, a label's place is checked on
EDGE_MARGIN = 2           # px around a label that an arrow should not cross either
NEARER_PX = 6             # a label whose box is this much nearer another node reads as that node's
ARROW_AWARE_NODES = 250   # up to this many nodes labels keep off arrows (a lesson's graph); past
                          # it the checks cost seconds on a graph too dense to read labels on anyway
PLACES = ("top center", "bottom center", "middle right", "middle left",
          "top right", "top left", "bottom right", "bottom left")
CURVE_POINTS = 16
CURVE_ROOM = 36           # px an arrow curving around a chain's node rises above its row

COLORSCALE = "Viridis"
NO_GRADIENT = "#D0D0D0"   # nodes and edges the gradient did not reach, or reached as zero
NON_FINITE = "#FF0000"    # a NaN or Inf gradient: must not blend into the scale
EDGE = "#8A8A8A"
FLOW_EDGE = "#3A3A3A"
SELECTED = "#D55E00"
CURRENT = "#0072B2"       # the op a step-through stands on
RIM = 3                   # flow mode: px of a node's rim, in its category's colour
# Flow mode colours nodes with numbers on one scale: no gradient at 0, NaN/Inf at 1, and
# the log-norm scale between SCALE_LOW and SCALE_HIGH.
NO_GRADIENT_AT, NON_FINITE_AT = 0.0, 1.0
SCALE_LOW, SCALE_HIGH = 0.02, 0.98


def op_graph(G: nx.DiGraph, pos: dict, flow: Optional[dict] = None, selected: Optional[str] = None,
             title: Optional[str] = None, visible: Optional[set] = None, current: Optional[str] = None,
             large_text: bool = False, size: Optional[tuple] = None,
             chart_width: Optional[float] = None) -> go.Figure:
    """The op graph: edges with arrowheads, one trace per node category, customdata = node id.

    flow ({node: norm of d target / d node}) colours nodes by log10 of the norm and
    greys what the gradient did not reach; sources whose gradient is None are
    annotated with the reason; `selected` is ringed. visible: draw only these nodes,
    on the axes of the whole graph (stepping through the ops reveals, nothing moves);
    `current` (the step's op) gets its own ring. large_text: labels of LARGE_FONT px.
    Labels that would overlap another label or a marker are left to the hover. size: (width,
    height) in px when the caller knows it (a notebook's figure, a saved picture): labels are
    placed for that plot, else for the smallest the page draws (PLOT_W). chart_width: the px
    width the page's column will stretch the figure to, when it knows it: labels are placed
    for it, the figure's own width left to the page.
    """
    large = G.number_of_nodes() > LARGE
    svg = G.number_of_nodes() <= SVG_NODES
    trace = go.Scatter if svg else go.Scattergl
    font = LARGE_FONT if large_text else LABEL_FONT
    shown = {n: p for n, p in pos.items() if n in G and (visible is None or n in visible)}
    width, height = size if size is not None else (None, chart_height(pos))
    drawn_w = width if width is not None else chart_width     # the figure's, else the page's
    plot_w = drawn_w - MARGIN_W if drawn_w is not None else PLOT_W
    scale = _log_range(flow) if flow is not None else None
    plot = (plot_w - (COLOUR_BAR_PX if scale is not None else 0), height - PLOT_MARGIN)
    ranges = _ranges(G, pos, font, *plot)     # of the whole graph: a step reveals on the same axes
    screen = _Screen(ranges, plot[1], plot[0])
    edges = [(u, v) for u, v in G.edges if u in shown and v in shown]
    paths = _edge_paths(G, shown, edges, screen) if svg else {e: None for e in edges}
    fig = go.Figure()
    fig.add_trace(_edges(trace, shown, paths, edges, "edges", NO_GRADIENT if flow is not None else EDGE, 1.5))
    if flow is not None:
        carried = [(u, v) for u, v in edges if _carries(flow.get(u)) and _carries(flow.get(v))]
        fig.add_trace(_edges(trace, shown, paths, carried, "gradient path", FLOW_EDGE, 2.5))
    if svg and edges:
        fig.add_trace(_arrowheads(G, shown, paths, edges, screen, flow))
    occupied = [screen.marker_box(shown[n], _radius(G, n)) for n in shown]
    rises = _note_sides(G, shown, screen, occupied)
    occupied += [screen.note_box(shown[n], _note_text(G.nodes[n]["none_reason"]), rise) for n, rise in rises.items()]
    counts = _edge_counts(G, shown, paths, edges, screen, occupied, font)
    if counts is not None:
        fig.add_trace(counts)
    # Past SVG_NODES, labels would be a smear (and costly to place): the hover carries them.
    arrows = _Segments(paths, shown, screen) if len(shown) <= ARROW_AWARE_NODES else None
    places = _place_labels(G, shown, screen, occupied, font, arrows) if svg else {}
    for category in CATEGORIES:
        nodes = [n for n, d in G.nodes(data=True) if d.get("category") == category and n in shown]
        if nodes:
            fig.add_trace(_node_trace(trace, G, shown, nodes, category, flow, scale, large, places, font))
            if flow is not None:
                fig.add_trace(_legend_entry(trace, STYLE[category][0], STYLE[category][1], "white",
                                            rim=STYLE[category][2]))
    if scale is not None and _spread(flow):
        fig.add_trace(_colour_bar(trace, *scale))
    if flow is not None:
        fig.add_trace(_legend_entry(trace, "no gradient", "circle", NO_GRADIENT))
        if any(v is not None and not math.isfinite(v) for v in flow.values()):
            fig.add_trace(_legend_entry(trace, "NaN / Inf gradient", "circle", NON_FINITE))
    for note in _none_notes(G, shown, rises):
        fig.add_annotation(note)
    alarming = [n for n in shown if G.nodes[n].get("nonfinite")]
    if alarming:
        fig.add_trace(_ring(G, shown, alarming, NON_FINITE, "NaN / Inf value"))
    if current is not None and current in shown:
        fig.add_trace(_ring(G, shown, [current], CURRENT, "this step"))
    if selected is not None and selected in shown:
        fig.add_trace(_ring(G, shown, [selected], SELECTED, "selected"))
    fig.update_layout(
        title=title, showlegend=True, hovermode="closest", dragmode="pan", clickmode="event+select",
        plot_bgcolor="white", paper_bgcolor="white", font=dict(size=font),
        hoverlabel=dict(font_size=max(15, font - 1), align="left"),
        legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="left", x=0, font=dict(size=max(13, font - 3))),
        margin=dict(l=10, r=10, t=60 if title else 40, b=10), height=height, width=width,
        xaxis=dict(visible=False, range=ranges[0]),
        yaxis=dict(visible=False, range=ranges[1]),
    )
    return fig


def chart_height(pos: dict) -> int:
    """Pixels for the chart: a one-row chain needs little height, a wide network all of it."""
    rows = len({round(y, 6) for _, y in pos.values()})
    return int(min(MAX_HEIGHT, max(MIN_HEIGHT, 230 + 95 * (rows - 1))))


def to_html(fig: go.Figure) -> str:
    """A standalone HTML page for the download button; plotly.js is inlined so it opens offline."""
    return fig.to_html(include_plotlyjs=True, full_html=True)


def _edges(trace, pos: dict, paths: dict, edges, name: str, colour: str, width: float):
    # All edges in one trace, segments separated by NaN (a gap): a trace per edge would not
    # scale. NumPy arrays, because plotly validates Python lists element by element.
    xs, ys = [], []
    for u, v in edges:
        path = paths.get((u, v)) or [pos[u], pos[v]]
        xs += [p[0] for p in path] + [math.nan]
        ys += [p[1] for p in path] + [math.nan]
    return trace(x=np.array(xs, dtype=float), y=np.array(ys, dtype=float), mode="lines",
                 name=name, line=dict(color=colour, width=width), hoverinfo="skip", showlegend=False)


def _node_trace(trace, G: nx.DiGraph, pos: dict, nodes: list, category: str, flow, scale,
                large: bool, places: dict, font: int):
    name, symbol, colour = STYLE[category]
    data = [G.nodes[n] for n in nodes]
    size = SIZE.get(data[0].get("kind"), SIZE["tensor"]) * (0.5 if large else 1)
    hover = [_hover_html(d.get("hover", "")) for d in data]
    if category == GROUP:
        symbol = ["diamond" if d.get("phase") == "backward" else "square" for d in data]
    marker = dict(symbol=symbol, size=size, color=colour, line=dict(color="white", width=1))
    if category == "unrecorded_op":
        marker["line"] = dict(color=colour, width=2)
    if flow is not None:
        # the fill is the gradient's size; the rim keeps the category's colour, as the legend shows it
        marker["line"] = dict(color=colour, width=RIM)
        marker.update(color=np.array(_flow_colours([flow.get(n) for n in nodes], scale)),
                      colorscale=_flow_scale(), cmin=0.0, cmax=1.0, showscale=False)
        hover = [h + "<br>" + _norm_line(flow.get(n)) for h, n in zip(hover, nodes)]
    labelled = any(n in places for n in nodes)
    return trace(
        x=np.array([pos[n][0] for n in nodes], dtype=float), y=np.array([pos[n][1] for n in nodes], dtype=float),
        mode="markers+text" if labelled else "markers", name=name,
        # Coloured by gradient, a category's first node would make a misleading legend swatch:
        # in flow mode the legend comes from point-less entries showing the category's rim.
        showlegend=flow is None,
        text=[places[n][1] if n in places else "" for n in nodes] if labelled else None,
        textposition=[places[n][0] if n in places else "top center" for n in nodes] if labelled else None,
        textfont=dict(size=font, color="#222222"),
        marker=marker,
        hovertext=np.array(hover), hoverinfo="text", customdata=np.array(nodes),
    )


# The point-less traces take the graph's own trace type: one Scattergl trace makes plotly
# set up WebGL for the whole chart, which took Chromium about 0.2 s per draw of a small graph.
def _legend_entry(trace, name: str, symbol: str, colour: str, rim: Optional[str] = None):
    line = dict(color=rim, width=RIM) if rim else dict(width=0)
    return trace(x=[None], y=[None], mode="markers", name=name, hoverinfo="skip",
                 marker=dict(symbol=symbol, size=14, color=colour, line=line))


def _colour_bar(trace, low: float, high: float):
    # Node colours are computed per node (grey and red sit outside the scale), so the
    # colour bar comes from a point-less trace carrying the same scale.
    return trace(
        x=[None], y=[None], mode="markers", showlegend=False, hoverinfo="skip",
        marker=dict(color=[low, high], cmin=low, cmax=high, colorscale=COLORSCALE, showscale=True,
                    colorbar=dict(title=dict(text="size of the gradient", side="right"), thickness=18,
                                  tickvals=_ticks(low, high), ticktext=[f"{10 ** v:.3g}" for v in _ticks(low, high)])),
    )


def _ticks(low: float, high: float) -> list:
    """Tick positions on the log scale, labelled with the norms themselves (3, not 0.48)."""
    first, last = math.ceil(low), math.floor(high)
    if last - first >= 1:
        step = max(1, (last - first) // 5)
        return [float(k) for k in range(first, last + 1, step)]
    return [low, (low + high) / 2, high]


def _ring(G: nx.DiGraph, pos: dict, nodes: list, colour: str, name: str) -> go.Scatter:
    return go.Scatter(
        x=[pos[n][0] for n in nodes], y=[pos[n][1] for n in nodes], mode="markers", name=name,
        showlegend=False, hoverinfo="skip", customdata=list(nodes),
        marker=dict(symbol="circle-open", size=[2 * _radius(G, n) + 16 for n in nodes], color=colour,
                    line=dict(width=4, color=colour)),
    )


def _note_sides(G: nx.DiGraph, pos: dict, screen, markers: list) -> dict:
    """{node: px rise} for each None note: below its node, or above when that covers no marker."""
    out = {}
    for node in pos:
        reason = G.nodes[node].get("none_reason")
        if reason is None:
            continue
        own = screen.marker_box(pos[node], _radius(G, node))
        others = [m for m in markers if m != own] + [screen.note_box(pos[n], _note_text(G.nodes[n]["none_reason"]), r)
                                                      for n, r in out.items()]
        out[node] = next((rise for rise in (NOTE_RISE, -NOTE_RISE, 2 * NOTE_RISE, -2 * NOTE_RISE)
                          if not any(_intersect(screen.note_box(pos[node], _note_text(reason), rise), m)
                                     for m in others)), NOTE_RISE)
        if len(out) == MAX_NONE_NOTES:
            break
    return out


def _none_notes(G: nx.DiGraph, pos: dict, rises: dict) -> list:
    """Short "None: <why>" notes by the sources whose gradient is None, full reason on hover."""
    notes = []
    for node, data in G.nodes(data=True):
        reason = data.get("none_reason")
        if reason is None or node not in rises:
            continue
        notes.append(dict(x=pos[node][0], y=pos[node][1], text=html.escape(_note_text(reason)),
                          hovertext=html.escape(reason), showarrow=True, arrowhead=2, ax=0, ay=rises[node],
                          font=dict(size=15, color="#B00020"), bgcolor="rgba(255,255,255,0.9)",
                          bordercolor="#B00020", borderwidth=2))
        if len(notes) == MAX_NONE_NOTES:   # annotations are DOM nodes; past this they only slow the page
            break
    return notes


class _Screen:
    """Data units <-> estimated plot pixels (y up), for a plot of PLOT_W x PLOT_H pixels.

    The real plot is at least this big in a window 1280 px wide and up, so a
    placement without overlaps here has none on screen either."""

    def __init__(self, ranges, height: float = PLOT_H, width: float = PLOT_W):
        (x0, x1), (y0, y1) = ranges if ranges[0] else ((0, 1), (0, 1))
        self.x0, self.y0, self.h, self.w = x0, y0, height, width
        self.sx, self.sy = width / ((x1 - x0) or 1), height / ((y1 - y0) or 1)

    def px(self, p):
        return ((p[0] - self.x0) * self.sx, (p[1] - self.y0) * self.sy)

    def data(self, q):
        return (q[0] / self.sx + self.x0, q[1] / self.sy + self.y0)

    def marker_box(self, p, r):
        x, y = self.px(p)
        return (x - r, y - r, x + r, y + r)

    def note_box(self, p, text, rise: float = NOTE_RISE):
        # A None note hangs `rise` px below its node (plotly: ay > 0 is down), 15 px text, a border.
        x, y = self.px(p)
        w = len(text) * CHAR_EM * 15 + 8
        return (x - w / 2, y - rise - 14, x + w / 2, y - rise + 14)

    def label_box(self, p, r, lines, place, font):
        # plotly sets a label off its marker the same way across and up: "top right" is
        # "top center"'s height beside "middle right"'s side.
        x, y = self.px(p)
        w = max(len(line) for line in lines) * CHAR_EM * font
        h = len(lines) * LINE_EM * font
        up, across = place.split()
        left, right = {"center": (x - w / 2, x + w / 2), "right": (x + r + 3, x + r + 3 + w),
                       "left": (x - r - 3 - w, x - r - 3)}[across]
        if up == "top":
            return (left, y + r + 2, right, y + r + 2 + h)
        if up == "bottom":
            return (left, y - r - 2 - h, right, y - r - 2)
        return (left, y - h / 2, right, y + h / 2)


def _note_text(reason: str) -> str:
    return "gradient None: " + _short(reason)


def _radius(G: nx.DiGraph, node: str) -> float:
    return SIZE.get(G.nodes[node].get("kind"), SIZE["tensor"]) / 2


def _intersect(p, q) -> bool:
    return p[0] < q[2] and q[0] < p[2] and p[1] < q[3] and q[1] < p[3]


def _inside(box, screen) -> bool:
    return box[0] >= 0 and box[1] >= 0 and box[2] <= screen.w and box[3] <= screen.h


def _label_priority(data: dict) -> tuple:
    # What the lesson is about gets its label first: the target (a step's loss and its
    # value), the sources, then the layer boxes and folds (a big unnamed square says
    # nothing), named tensors, ops.
    return (data.get("role") is None, data.get("role") != "target",
            data.get("kind") not in ("repeat", GROUP), data.get("name") is None,
            data.get("kind") != "op", data.get("order", 0))


def _attempts(data: dict, lines: list) -> list:
    """The label's forms, longest first: all its lines, the first, and for a layer box or a
    fold its name alone ("Squeeze ×120" without ", line 82"), so every box is named."""
    out = [lines, lines[:1]]
    if data.get("kind") in ("repeat", GROUP):
        out.append([_clip(lines[0].split(", ")[0], 14)])
    return out


def _place_labels(G: nx.DiGraph, pos: dict, screen: _Screen, occupied: list, font: int,
                  edges: Optional["_Segments"] = None) -> dict:
    """{node: (textposition, text)}: each label where it overlaps no other label or marker.
    First every label that has a place no arrow crosses takes it, in priority order; then the
    rest take the place the fewest arrows cross (a crossed label still reads, a missing one
    does not), else keep only their first line, else go to the hover."""
    nodes = sorted((n for n in pos if G.nodes[n].get("label")), key=lambda n: _label_priority(G.nodes[n]))
    if len(nodes) > MAX_LABELS:
        nodes = nodes[:MAX_LABELS]   # thousands of labels would be an unreadable smear: hover has them
    mine = {n: screen.marker_box(pos[n], _radius(G, n)) for n in pos}
    boxes = _Boxes(occupied)
    centres = np.array([screen.px(p) for p in pos.values()], dtype=float).reshape(-1, 2)
    out = {}
    for clear_only in ((True, False) if edges is not None else (False,)):
        for n in nodes:
            if n in out:
                continue
            lines = [_clip(x) for x in G.nodes[n]["label"].split("\n")]
            for attempt in _attempts(G.nodes[n], lines):
                spot = _spot(G, n, pos, screen, boxes, mine[n], attempt, font, edges, clear_only, centres)
                if spot is not None:
                    boxes.add(spot[1])
                    out[n] = (spot[0], "<br>".join(html.escape(x) for x in attempt))
                    break
                if clear_only:
                    break      # its first line alone waits for the second round
    occupied[:] = boxes.all()
    return out


def _spot(G, n, pos, screen, boxes, own, lines, font, edges, clear_only: bool, centres=None):
    """(place, box) for one label: free of labels and markers, nearer its own node than any
    other (a label beside a layer, over the next one, names the wrong layer), and of those
    the first no arrow crosses, else (unless clear_only) the one the fewest cross; None if
    none is free."""
    best, crossed = None, math.inf
    for place in PLACES:
        box = screen.label_box(pos[n], _radius(G, n), lines, place, font)
        if not _inside(box, screen) or boxes.hits(box, own) or not _nearest_own(box, screen.px(pos[n]), centres):
            continue
        crossing = edges.crossing(pos[n], _radius(G, n), lines, place, font) if edges is not None else 0
        if crossing == 0:
            return place, box
        if crossing < crossed:
            best, crossed = (place, box), crossing
    return None if clear_only else best


def _nearest_own(box, own, centres) -> bool:
    """Whether the label sits by its own node: no other node's centre is nearer the box than
    its own by more than NEARER_PX (distances to the box's nearest point, 0 inside it)."""
    if centres is None or len(centres) < 2:
        return True

    def gap(x, y):
        dx = np.maximum(np.maximum(box[0] - x, x - box[2]), 0.0)
        dy = np.maximum(np.maximum(box[1] - y, y - box[3]), 0.0)
        return np.hypot(dx, dy)

    mine = float(gap(np.float64(own[0]), np.float64(own[1])))
    return bool((gap(centres[:, 0], centres[:, 1]) + NEARER_PX >= mine).all())


class _Boxes:
    """Rectangles to test a new one against, in a NumPy array: a few hundred labels against
    a thousand markers stay fast."""

    def __init__(self, boxes: list):
        self.array = np.array(boxes, dtype=float).reshape(-1, 4)

    def hits(self, box, own=None) -> bool:
        a = self.array
        hit = (a[:, 0] < box[2]) & (box[0] < a[:, 2]) & (a[:, 1] < box[3]) & (box[1] < a[:, 3])
        if own is not None:    # a node's own marker does not block its label
            hit &= ~np.all(a == np.array(own, dtype=float), axis=1)
        return bool(hit.any())

    def add(self, box) -> None:
        self.array = np.vstack([self.array, np.array(box, dtype=float)[None, :]])

    def all(self) -> list:
        return [tuple(row) for row in self.array]


class _Segments:
    """The drawn edges as straight pieces in plot pixels, to count the ones a label box
    would sit across (an arrow through "grad 2" hides its digits). Counted on the plot the
    placement assumes and on one WIDER times as wide: a wider window stretches the edges'
    slopes but not the labels, and a label clear on both is clear between them."""

    def __init__(self, paths: dict, pos: dict, screen: _Screen):
        self.screens = [screen, _Screen(((screen.x0, screen.x0 + screen.w / screen.sx),
                                         (screen.y0, screen.y0 + screen.h / screen.sy)),
                                        screen.h, screen.w * WIDER)]
        self.arrays = []
        for view in self.screens:
            pieces = []
            for (u, v), path in paths.items():
                points = [view.px(p) for p in (path or [pos[u], pos[v]])]
                pieces += [(*a, *b) for a, b in zip(points, points[1:])]
            self.arrays.append(np.array(pieces, dtype=float).reshape(-1, 4))

    def crossing(self, p, r, lines, place, font) -> int:
        """How many pieces pass through the label's box (with a margin), on either plot."""
        return sum(_crossing(array, _grown(view.label_box(p, r, lines, place, font), EDGE_MARGIN))
                   for view, array in zip(self.screens, self.arrays))


def _grown(box, by: float):
    return (box[0] - by, box[1] - by, box[2] + by, box[3] + by)


def _crossing(pieces, box) -> int:
    """Pieces (x0, y0, x1, y1) through a box: their bounding boxes meet it and its corners do
    not all lie on one side of the piece's line."""
    x0, y0, x1, y1 = pieces.T
    meet = ((np.minimum(x0, x1) < box[2]) & (np.maximum(x0, x1) > box[0])
            & (np.minimum(y0, y1) < box[3]) & (np.maximum(y0, y1) > box[1]))
    if not meet.any():
        return 0
    x0, y0, x1, y1 = x0[meet], y0[meet], x1[meet], y1[meet]
    sides = [np.sign((x1 - x0) * (cy - y0) - (y1 - y0) * (cx - x0))
             for cx, cy in ((box[0], box[1]), (box[0], box[3]), (box[2], box[1]), (box[2], box[3]))]
    one_side = np.all([side == sides[0] for side in sides], axis=0) & (sides[0] != 0)
    return int((~one_side).sum())


def _edge_paths(G: nx.DiGraph, pos: dict, edges: list, screen: _Screen) -> dict:
    """{edge: points}: straight, unless a node sits on the segment (x feeding a chain's
    later op, collinear with the chain): then a curve around it, so no edge hides."""
    px = {n: screen.px(p) for n, p in pos.items()}
    names = list(px)
    where = {n: i for i, n in enumerate(names)}
    xy = np.array([px[n] for n in names], dtype=float).reshape(-1, 2)
    reach = np.array([_radius(G, n) + 3 for n in names], dtype=float)
    out = {}
    for k, (u, v) in enumerate(edges):
        a, b = px[u], px[v]
        blocked = _blocked(xy, reach, a, b, (where[u], where[v]))
        if not blocked:
            out[(u, v)] = None
            continue
        dx, dy = b[0] - a[0], b[1] - a[1]
        length = math.hypot(dx, dy) or 1.0
        bow = max(28.0, 0.18 * length) * (1 if k % 2 else -1)
        c = ((a[0] + b[0]) / 2 - dy / length * bow, (a[1] + b[1]) / 2 + dx / length * bow)
        out[(u, v)] = [screen.data(((1 - t) ** 2 * a[0] + 2 * (1 - t) * t * c[0] + t * t * b[0],
                                    (1 - t) ** 2 * a[1] + 2 * (1 - t) * t * c[1] + t * t * b[1]))
                       for t in (i / CURVE_POINTS for i in range(CURVE_POINTS + 1))]
    return out


def _blocked(xy, reach, a, b, ends) -> bool:
    """Whether a node other than the edge's ends sits on the segment a-b (within its radius)."""
    dx, dy = b[0] - a[0], b[1] - a[1]
    length2 = dx * dx + dy * dy
    if length2 == 0:
        return False
    t = ((xy[:, 0] - a[0]) * dx + (xy[:, 1] - a[1]) * dy) / length2
    qx, qy = a[0] + t * dx - xy[:, 0], a[1] + t * dy - xy[:, 1]
    near = (t > 0) & (t < 1) & (qx * qx + qy * qy < reach * reach)
    near[list(ends)] = False
    return bool(near.any())


def _arrowheads(G: nx.DiGraph, pos: dict, paths: dict, edges: list, screen: _Screen, flow) -> go.Scatter:
    """A triangle at the head of every edge, just outside the node it points to."""
    xs, ys, angles, colours = [], [], [], []
    for u, v in edges:
        path = paths.get((u, v)) or [pos[u], pos[v]]
        tail, head = screen.px(path[-2]), screen.px(path[-1])
        dx, dy = head[0] - tail[0], head[1] - tail[1]
        length = math.hypot(dx, dy) or 1.0
        back = _radius(G, v) + 6
        xs_, ys_ = screen.data((head[0] - dx / length * back, head[1] - dy / length * back))
        xs.append(xs_)
        ys.append(ys_)
        angles.append(math.degrees(math.atan2(dx, dy)))    # plotly: clockwise from pointing up
        carried = flow is not None and _carries(flow.get(u)) and _carries(flow.get(v))
        colours.append(EDGE if flow is None else FLOW_EDGE if carried else NO_GRADIENT)
    return go.Scatter(x=xs, y=ys, mode="markers", name="arrows", showlegend=False, hoverinfo="skip",
                      marker=dict(symbol="triangle-up", size=11, angle=angles, color=colours,
                                  line=dict(width=0)))


def _edge_counts(G: nx.DiGraph, pos: dict, paths: dict, edges: list, screen: _Screen, occupied: list,
                 font: int):
    """"×2" on an edge that stands for several inputs (x * x: one tensor, two inputs)."""
    xs, ys, texts = [], [], []
    for u, v in edges:
        n = G.edges[u, v].get("count", 1)
        if n < 2:
            continue
        path = paths.get((u, v)) or [pos[u], pos[v]]
        mid = path[len(path) // 2] if len(path) > 2 else ((path[0][0] + path[1][0]) / 2, (path[0][1] + path[1][1]) / 2)
        text = f"×{n}"
        box = screen.label_box(mid, 0, [text], "top center", font)
        if any(_intersect(box, o) for o in occupied):
            box = screen.label_box(mid, 0, [text], "bottom center", font)
            if any(_intersect(box, o) for o in occupied):
                continue
            place = "bottom center"
        else:
            place = "top center"
        occupied.append(box)
        xs.append(mid[0])
        ys.append(mid[1])
        texts.append((text, place))
    if not xs:
        return None
    return go.Scatter(x=xs, y=ys, mode="text", text=[t for t, _ in texts], textposition=[p for _, p in texts],
                      textfont=dict(size=font, color="#B00020"), name="inputs per edge",
                      showlegend=False, hoverinfo="skip")


def _ranges(G: nx.DiGraph, pos: dict, font: int, width: float, height: float) -> tuple:
    """(x range, y range) with room, in px of the plot the labels are placed for, for what
    sits past the outermost nodes: beside the last (or first) layer the target's label in full
    (a step's loss is the last node, a layer box 40 px before it on a 1024 px screen: above
    it there is no room, beside it there must be); above the top row and below the
    bottom one their labels, None notes and curving arrows, and no more (more was 50 px of
    white above the graph, pushing it down a projector's screen)."""
    xs, ys = [x for x, _ in pos.values()], [y for _, y in pos.values()]
    if not xs:
        return None, None
    (x0, x1), (y0, y1) = (min(xs), max(xs)), (min(ys), max(ys))
    padded_x, padded_y = _padded(xs), _padded(ys)
    at = lambda v, axis: [n for n, p in pos.items() if n in G and abs(p[axis] - v) < 1e-9]  # noqa: E731
    beside = lambda n: _radius(G, n) + 3 + _label_size(G, n, font)[0] + 4  # noqa: E731

    def over(n):
        label = _radius(G, n) + 2 + _label_size(G, n, font)[1] + 4
        return max(label, _radius(G, n) + CURVE_ROOM, NOTE_RISE + 18 if G.nodes[n].get("none_reason") else 0)

    x_pad, y_pad = padded_x[1] - x1, padded_y[1] - y1     # the pads a graph had before, in units
    # only the target's: sources take their place above or below, and room for all of them
    # crushed a 1024 px screen's layers together
    left, right = (min(0.4 * width, max((beside(n) for n in at(v, 0) if G.nodes[n].get("role") == "target"),
                                      default=0)) for v in (x0, x1))
    pads = [x_pad, x_pad]
    for _ in range(40):      # px per unit depends on the pads: rounds settle them (cheap)
        per = width / ((x1 - x0) + sum(pads))
        pads = [max(x_pad, left / per), max(x_pad, right / per)]
    xr = [x0 - pads[0], x1 + pads[1]]
    if y1 - y0 < 1e-9:
        return xr, padded_y  # one row: its height is set by chart_height, not by the pads
    below, above = (min(height / 3, max((over(n) for n in at(v, 1)), default=0)) for v in (y0, y1))
    per = (height - below - above) / (y1 - y0)
    if per <= 0:
        return xr, padded_y
    return xr, [y0 - min(y_pad, below / per), y1 + min(y_pad, above / per)]


def _label_size(G: nx.DiGraph, node: str, font: int) -> tuple:
    """(width, height) px of a node's whole label, as _place_labels would draw it."""
    lines = [_clip(x) for x in (G.nodes[node].get("label") or "").split("\n") if x]
    if not lines:
        return 0.0, 0.0
    return max(len(x) for x in lines) * CHAR_EM * font, len(lines) * LINE_EM * font


def _padded(values: list):
    # Autorange fits the markers, not their labels: leave room for the outermost labels.
    if not values:
        return None
    low, high = min(values), max(values)
    pad = 1.0 + 0.08 * (high - low)
    return [low - pad, high + pad]


def _clip(label: str, chars: int = 24) -> str:
    return label if len(label) <= chars else label[:chars - 1] + "…"


def _short(reason: str, chars: int = 32) -> str:
    head = reason
    for stop in (";", ":", ".", "(", " — ", "\n"):
        head = head.split(stop)[0]
    return _clip(head.strip() or reason, chars)


def _hover_html(text: str) -> str:
    return html.escape(text).replace("\n", "<br>")


def _carries(norm) -> bool:
    return norm is not None and (norm != 0 or norm != norm)


def _spread(flow: dict) -> bool:
    """Whether the gradients differ in size: when every one is 1, a colour bar from 0.316 to
    3.16 would invent a range; the labels say the one size."""
    sizes = {round(math.log10(v), 9) for v in flow.values() if v is not None and math.isfinite(v) and v > 0}
    return len(sizes) > 1


def _log_range(flow: dict):
    logs = [math.log10(v) for v in flow.values() if v is not None and math.isfinite(v) and v > 0]
    if not logs:
        return None    # nothing to put on a scale: no colour bar pretending otherwise
    low, high = min(logs), max(logs)
    if high - low < 1e-9:   # one value: give the scale some width around it
        low, high = low - 0.5, high + 0.5
    return (low, high)


def _flow_colours(norms: list, scale) -> list:
    """Numbers on FLOW_SCALE, one per node: plotly validates a list of colour strings element
    by element (seconds at 30,000 nodes) but takes a list of numbers at once."""
    low, high = scale or (0.0, 1.0)
    values = []
    for norm in norms:
        if norm is None or not norm > 0 and norm == norm:
            values.append(NO_GRADIENT_AT)
        elif not math.isfinite(norm):
            values.append(NON_FINITE_AT)
        else:
            t = min(1.0, max(0.0, (math.log10(norm) - low) / (high - low)))
            values.append(SCALE_LOW + t * (SCALE_HIGH - SCALE_LOW))
    return values


@functools.lru_cache(maxsize=1)
def _flow_scale() -> tuple:
    """Grey below the gradient scale, red above it, Viridis between (see _flow_colours)."""
    inner = sample_colorscale(COLORSCALE, [k / 10 for k in range(11)])
    steps = [[SCALE_LOW + k / 10 * (SCALE_HIGH - SCALE_LOW), c] for k, c in enumerate(inner)]
    return ((0.0, NO_GRADIENT), (SCALE_LOW - 1e-9, NO_GRADIENT), *map(tuple, steps),
            (SCALE_HIGH + 1e-9, NON_FINITE), (1.0, NON_FINITE))


def _norm_line(norm) -> str:
    if norm is None:
        return "no gradient flows here"
    if norm != norm or math.isinf(norm):
        return f"size of the gradient here = {norm} ⚠"
    return f"size of the gradient here = {norm:.4g}"
