"""Plotly figures of the op graph and of the gradient flowing back through it.

Drawing only: graph.py says what the nodes are, layout.py where they go, place.py where
their words go and arrows.py how the edges run. One trace per node category: SVG for the
graphs a lesson shows (arrowheads, labels placed without overlaps), WebGL past SVG_NODES so
that a 10,000-op recording stays responsive.
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

from . import arrows, place
from .nodes import BACKWARD_OP, CATEGORIES, FORWARD_OP, GROUP, REPEAT, UNRECORDED_OP
from .options import View

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
LARGE = 1500              # nodes: beyond this, smaller markers
SVG_NODES = 800           # up to this many nodes: SVG (arrowheads, measurable labels); beyond, WebGL
LABEL_FONT = 14
LARGE_FONT = 18           # "large text": for a projector at the back of a room
MARGIN_W = 20             # px of a figure's width that are not plot: its side margins
COLOUR_BAR_PX = 110       # what the colour bar takes from the plot's width
PLOT_MARGIN = 150         # px of the chart's height that are not plot: legend on top, margins
MARGIN_B = 10             # px below the plot
MIN_HEIGHT, MAX_HEIGHT = 320, 620
ARROW_AWARE_NODES = 250   # up to this many nodes labels keep off arrows (a lesson's graph); past
                          # it the checks cost seconds on a graph too dense to read labels on anyway

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


def op_graph(G: nx.DiGraph, pos: dict, view: View = View(), flow: Optional[dict] = None,
             title: Optional[str] = None, visible: Optional[set] = None,
             size: Optional[tuple] = None) -> go.Figure:
    """The op graph as `view` shows it: edges with arrowheads, one trace per node category,
    customdata = node id.

    flow ({node: norm of d target / d node}) colours nodes by log10 of the norm and
    greys what the gradient did not reach; sources whose gradient is None are
    annotated with the reason; view.picked is ringed. visible: draw only these nodes,
    on the axes of the whole graph (stepping through the ops reveals, nothing moves);
    view.current (the step's op) gets its own ring. view.large_text: labels of LARGE_FONT px.
    Labels that would overlap another label or a marker are left to the hover. They are
    placed for the plot the figure is built for: size, (width, height) px, when the caller
    knows it (a notebook's figure, a saved picture); else view.width, the px the page's
    column stretches the figure to (its own width left to the page; None: the smallest
    the page draws, PLOT_W), and view.height (None: chart_height). The legend, when
    view.legend, sits above the plot in PLOT_MARGIN's room; without it the figure is that
    much shorter. The figure's meta says the room: {"label_room": [plot px wide, high],
    "height": the chart's height with the legend's room}.
    """
    svg = G.number_of_nodes() <= SVG_NODES
    trace = go.Scatter if svg else go.Scattergl
    font = LARGE_FONT if view.large_text else LABEL_FONT
    shown = {n: p for n, p in pos.items() if n in G and (visible is None or n in visible)}
    width, height = size if size is not None else (None, view.height or chart_height(pos))
    scale = _log_range(flow) if flow is not None else None
    room = _label_room(width if width is not None else view.width, height, scale)
    ranges = place.ranges(G, pos, font, *room)     # of the whole graph: a step reveals on the same axes
    screen = place.Screen(ranges, room[1], room[0])
    fig = go.Figure()
    places, rises = _edges_and_places(fig, trace, G, shown, screen, flow, font, svg)
    _nodes(fig, trace, G, shown, flow, scale, places, font)
    for note in place.none_notes(G, shown, rises):
        fig.add_annotation(note)
    _rings(fig, G, shown, view)
    _lay_out(fig, view, title, font, ranges, (width, height), room)
    return fig


def _label_room(width: Optional[float], height: int, scale) -> tuple:
    """(width, height) px of the plot labels are placed for, in a chart `width` px wide (None:
    the narrowest the page draws) and `height` px high: less its margins, the colour bar
    beside it and the legend's room above it."""
    plot_w = width - MARGIN_W if width is not None else place.PLOT_W
    return plot_w - (COLOUR_BAR_PX if scale is not None else 0), height - PLOT_MARGIN


def _edges_and_places(fig: go.Figure, trace, G: nx.DiGraph, shown: dict, screen: place.Screen, flow,
                      font: int, svg: bool) -> tuple:
    """The edges, their arrowheads and counts; then where the None notes and the labels go,
    off the markers, the notes and (on a lesson's graph) the arrows: (labels' places, notes' rises)."""
    edges = [(u, v) for u, v in G.edges if u in shown and v in shown]
    paths = arrows.edge_paths(G, shown, edges, screen) if svg else {e: None for e in edges}
    fig.add_trace(_edges(trace, shown, paths, edges, "edges", NO_GRADIENT if flow is not None else EDGE, 1.5))
    if flow is not None:
        carried = [(u, v) for u, v in edges if _carries(flow.get(u)) and _carries(flow.get(v))]
        fig.add_trace(_edges(trace, shown, paths, carried, "gradient path", FLOW_EDGE, 2.5))
    if svg and edges:
        colours = [EDGE if flow is None else FLOW_EDGE if _carries(flow.get(u)) and _carries(flow.get(v))
                   else NO_GRADIENT for u, v in edges]
        fig.add_trace(arrows.arrowheads(G, shown, paths, edges, screen, colours))
    occupied = [screen.marker_box(shown[n], place.radius(G, n)) for n in shown]
    rises = place.note_sides(G, shown, screen, occupied)
    occupied += [screen.note_box(shown[n], place.note_text(G.nodes[n]["none_reason"]), rise)
                 for n, rise in rises.items()]
    counts = arrows.edge_counts(G, shown, paths, edges, screen, occupied, font)
    if counts is not None:
        fig.add_trace(counts)
    # Past SVG_NODES, labels would be a smear (and costly to place): the hover carries them.
    pieces = arrows.Segments(paths, shown, screen) if len(shown) <= ARROW_AWARE_NODES else None
    return (place.place_labels(G, shown, screen, occupied, font, pieces) if svg else {}), rises


def _nodes(fig: go.Figure, trace, G: nx.DiGraph, shown: dict, flow, scale, places: dict, font: int) -> None:
    """A trace per category, then in flow mode the legend's rims and the colour bar."""
    large = G.number_of_nodes() > LARGE
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


def _rings(fig: go.Figure, G: nx.DiGraph, shown: dict, view: View) -> None:
    alarming = [n for n in shown if G.nodes[n].get("nonfinite")]
    if alarming:
        fig.add_trace(_ring(G, shown, alarming, NON_FINITE, "NaN / Inf value"))
    if view.current is not None and view.current in shown:
        fig.add_trace(_ring(G, shown, [view.current], CURRENT, "this step"))
    if view.picked is not None and view.picked in shown:
        fig.add_trace(_ring(G, shown, [view.picked], SELECTED, "selected"))


def _lay_out(fig: go.Figure, view: View, title: Optional[str], font: int, ranges: tuple, size: tuple,
             room: tuple) -> None:
    """The figure's margins and height for what it shows: the legend above the plot takes
    PLOT_MARGIN's room, and without it the chart is that much shorter (kept, it was white
    above and below the graph); the plot keeps the height its labels were placed for."""
    width, height = size
    top = (60 if title else 40) if view.legend else (40 if title else 10)
    fig.update_layout(
        title=title, showlegend=view.legend, hovermode="closest", dragmode="pan", clickmode="event+select",
        plot_bgcolor="white", paper_bgcolor="white", font=dict(size=font),
        hoverlabel=dict(font_size=max(15, font - 1), align="left"),
        # Entries of one width: Plotly then wraps them by a rule the first picture
        # (first_paint.py) repeats without measuring text, columns of the widest name
        legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="left", x=0, font=dict(size=max(13, font - 3)),
                    entrywidth=legend_entry_px(fig, max(13, font - 3)), entrywidthmode="pixels"),
        margin=dict(l=10, r=10, t=top, b=MARGIN_B), width=width,
        height=height if view.legend else room[1] + top + MARGIN_B,
        xaxis=dict(visible=False, range=ranges[0]),
        yaxis=dict(visible=False, range=ranges[1]),
        meta=dict(label_room=list(room), height=height),
    )


def legend_entry_px(fig: go.Figure, size: int) -> int:
    """The px of the widest name the legend lists, at `size` px (a generous estimate, so no
    name runs into the next)."""
    names = [tr.name for tr in fig.data if tr.showlegend is not False and tr.name]
    return max([round(0.54 * size * len(name)) + 6 for name in names] or [0])


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
    size = place.SIZE.get(data[0].get("kind"), place.SIZE["tensor"]) * (0.5 if large else 1)
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
        marker=dict(symbol="circle-open", size=[2 * place.radius(G, n) + 16 for n in nodes], color=colour,
                    line=dict(width=4, color=colour)),
    )


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
