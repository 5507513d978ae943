"""Plotly figures of the op graph and of the gradient flowing back through it.

Drawing only: graph.py says what the nodes are, layout.py where they go. WebGL
traces, one per node category, so that a 10,000-op recording stays responsive.
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

from .graph import BACKWARD_OP, CATEGORIES, FORWARD_OP, GROUP

# Okabe-Ito colours: told apart by colour-blind students and on a washed-out projector.
STYLE = {   # category: (legend name, symbol, colour)
    "variable": ("variables", "circle", "#E69F00"),
    "watched_constant": ("watched constants", "circle", "#D55E00"),
    "constant": ("constants", "circle", "#999999"),
    "intermediate": ("intermediate tensors", "circle", "#56B4E9"),
    FORWARD_OP: ("forward ops", "square", "#009E73"),
    BACKWARD_OP: ("backward ops", "diamond", "#CC79A7"),
    GROUP: ("layers", "square", "#0072B2"),
}
SIZE = {"tensor": 16, "op": 20, GROUP: 34}
LARGE = 1500              # nodes: beyond this, smaller markers and labels only where few
LABELLED_TRACE = 400      # a trace with more points than this draws no text labels
LABEL_FONT = 16
MAX_NONE_NOTES = 40

COLORSCALE = "Viridis"
NO_GRADIENT = "#D0D0D0"   # nodes and edges the gradient did not reach, or reached as zero
NON_FINITE = "#FF0000"    # a NaN or Inf gradient: must not blend into the scale
EDGE = "#8A8A8A"
FLOW_EDGE = "#3A3A3A"
SELECTED = "#D55E00"
LEGEND_SHAPE = "#555555"  # flow mode: the legend tells categories apart by shape alone
# Flow mode colours nodes with numbers on one scale: no gradient at 0, NaN/Inf at 1, and
# the log-norm scale between SCALE_LOW and SCALE_HIGH.
NO_GRADIENT_AT, NON_FINITE_AT = 0.0, 1.0
SCALE_LOW, SCALE_HIGH = 0.02, 0.98


def op_graph(G: nx.DiGraph, pos: dict, flow: Optional[dict] = None, selected: Optional[str] = None,
             title: Optional[str] = None) -> go.Figure:
    """The op graph: one edge trace, one trace per node category, customdata = node id.

    flow ({node: norm of d target / d node}) colours nodes by log10 of the norm and
    greys what the gradient did not reach; sources whose gradient is None are
    annotated with the reason; `selected` is ringed.
    """
    large = G.number_of_nodes() > LARGE
    fig = go.Figure()
    fig.add_trace(_edges(G, pos, G.edges, "edges", NO_GRADIENT if flow is not None else EDGE, 1.5))
    scale = None
    if flow is not None:
        carried = [(u, v) for u, v in G.edges if _carries(flow.get(u)) and _carries(flow.get(v))]
        fig.add_trace(_edges(G, pos, carried, "gradient path", FLOW_EDGE, 2.5))
        scale = _log_range(flow)
    for category in CATEGORIES:
        nodes = [n for n, d in G.nodes(data=True) if d.get("category") == category and n in pos]
        if nodes:
            fig.add_trace(_node_trace(G, pos, nodes, category, flow, scale, large))
            if flow is not None:
                fig.add_trace(_legend_entry(STYLE[category][0], STYLE[category][1], LEGEND_SHAPE))
    if scale is not None:
        fig.add_trace(_colour_bar(*scale))
    if flow is not None:
        fig.add_trace(_legend_entry("no gradient", "circle", NO_GRADIENT))
        if any(v is not None and not math.isfinite(v) for v in flow.values()):
            fig.add_trace(_legend_entry("NaN / Inf gradient", "circle", NON_FINITE))
    for note in _none_notes(G, pos):
        fig.add_annotation(note)
    if selected is not None and selected in pos:
        fig.add_trace(_ring(G, pos, selected))
    fig.update_layout(
        title=title, showlegend=True, hovermode="closest", dragmode="pan", clickmode="event+select",
        plot_bgcolor="white", paper_bgcolor="white", font=dict(size=LABEL_FONT),
        hoverlabel=dict(font_size=15, align="left"),
        legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="left", x=0),
        margin=dict(l=10, r=10, t=60 if title else 40, b=10),
        xaxis=dict(visible=False, range=_padded([x for x, _ in pos.values()])),
        yaxis=dict(visible=False, range=_padded([y for _, y in pos.values()])),
    )
    _stagger_labels(fig)
    return fig


def to_html(fig: go.Figure) -> str:
    """A standalone HTML page for the download button; plotly.js is inlined so it opens offline."""
    return fig.to_html(include_plotlyjs=True, full_html=True)


def _edges(G: nx.DiGraph, pos: dict, edges, name: str, colour: str, width: float) -> go.Scattergl:
    # All edges in one trace, segments separated by NaN (a gap): a trace per edge would not
    # scale. NumPy arrays, because plotly validates Python lists element by element.
    xs, ys = [], []
    for u, v in edges:
        if u in pos and v in pos:
            xs += [pos[u][0], pos[v][0], math.nan]
            ys += [pos[u][1], pos[v][1], math.nan]
    return go.Scattergl(x=np.array(xs, dtype=float), y=np.array(ys, dtype=float), mode="lines",
                        name=name, line=dict(color=colour, width=width), hoverinfo="skip",
                        showlegend=False)


def _node_trace(G: nx.DiGraph, pos: dict, nodes: list, category: str, flow, scale,
                large: bool) -> go.Scattergl:
    name, symbol, colour = STYLE[category]
    data = [G.nodes[n] for n in nodes]
    size = SIZE.get(data[0].get("kind"), SIZE["tensor"]) * (0.5 if large else 1)
    hover = [_hover_html(d.get("hover", "")) for d in data]
    if category == GROUP:
        symbol = ["diamond" if d.get("phase") == "backward" else "square" for d in data]
    marker = dict(symbol=symbol, size=size, color=colour, line=dict(color="white", width=1))
    if flow is not None:
        marker.update(color=np.array(_flow_colours([flow.get(n) for n in nodes], scale)),
                      colorscale=_flow_scale(), cmin=0.0, cmax=1.0, showscale=False)
        hover = [h + "<br>" + _norm_line(flow.get(n)) for h, n in zip(hover, nodes)]
    labelled = len(nodes) <= LABELLED_TRACE
    xs = [pos[n][0] for n in nodes]
    return go.Scattergl(
        x=np.array(xs, dtype=float), y=np.array([pos[n][1] for n in nodes], dtype=float),
        mode="markers+text" if labelled else "markers", name=name,
        # Coloured by gradient, a category's first node would make a misleading legend swatch:
        # in flow mode the legend comes from neutral, point-less entries instead.
        showlegend=flow is None,
        text=np.array([_clip(d.get("label", "")) for d in data]) if labelled else None,
        textfont=dict(size=LABEL_FONT, color="#222222"),
        marker=marker,
        hovertext=np.array(hover), hoverinfo="text", customdata=np.array(nodes),
    )


def _legend_entry(name: str, symbol: str, colour: str) -> go.Scattergl:
    return go.Scattergl(x=[None], y=[None], mode="markers", name=name, hoverinfo="skip",
                        marker=dict(symbol=symbol, size=14, color=colour))


def _colour_bar(low: float, high: float) -> go.Scattergl:
    # Node colours are computed per node (grey and red sit outside the scale), so the
    # colour bar comes from a point-less trace carrying the same scale.
    return go.Scattergl(
        x=[None], y=[None], mode="markers", showlegend=False, hoverinfo="skip",
        marker=dict(color=[low, high], cmin=low, cmax=high, colorscale=COLORSCALE, showscale=True,
                    colorbar=dict(title=dict(text="log10 ‖∂target/∂x‖", side="right"), thickness=18)),
    )


def _ring(G: nx.DiGraph, pos: dict, node: str) -> go.Scattergl:
    kind = G.nodes[node].get("kind", "tensor")
    return go.Scattergl(
        x=[pos[node][0]], y=[pos[node][1]], mode="markers", name="selected", showlegend=False,
        hoverinfo="skip", customdata=[node],
        marker=dict(symbol="circle-open", size=SIZE.get(kind, SIZE["tensor"]) * 2, color=SELECTED,
                    line=dict(width=4, color=SELECTED)),
    )


def _none_notes(G: nx.DiGraph, pos: dict) -> list:
    """Short "None: <why>" notes by the sources whose gradient is None, full reason on hover."""
    notes = []
    for node, data in G.nodes(data=True):
        reason = data.get("none_reason")
        if reason is None or node not in pos:
            continue
        notes.append(dict(x=pos[node][0], y=pos[node][1], text="None: " + html.escape(_short(reason)),
                          hovertext=html.escape(reason), showarrow=True, arrowhead=2, ax=0, ay=40,
                          font=dict(size=14, color="#B00020"), bgcolor="rgba(255,255,255,0.85)",
                          bordercolor="#B00020"))
        if len(notes) == MAX_NONE_NOTES:   # annotations are DOM nodes; past this they only slow the page
            break
    return notes


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
        return f"‖∂target/∂x‖ = {norm} ⚠"
    return f"‖∂target/∂x‖ = {norm:.4g}"


def _stagger_labels(fig, width_px: float = 600.0, char_px: float = 9.5) -> None:
    """Put each text label above or below its node, whichever keeps it off its row neighbours',
    and shorten a label (full text on hover) when neither side has room.

    Layers sit one unit apart and a layer name is often wider than that; plotly does not
    move labels apart by itself. Greedy, left to right along each row of nodes.
    """
    labelled = [tr for tr in fig.data if tr.text is not None and tr.x is not None]
    xs = [x for tr in labelled for x in tr.x if x is not None]
    if not xs:
        return
    unit = char_px * (max(xs) - min(xs) + 1.0) / width_px     # one character, in x units
    points = sorted((round(y, 6), x, k, j) for k, tr in enumerate(labelled)
                    for j, (x, y) in enumerate(zip(tr.x, tr.y)) if x is not None)
    texts = [[str(t or "") for t in tr.text] for tr in labelled]
    places = [["top center"] * len(tr.x) for tr in labelled]
    ends: dict = {}    # (row, position) -> right end of the last label placed there
    for y, x, k, j in points:
        text = texts[k][j]
        if not text:
            continue
        room = {pos: x - ends.get((y, pos), -float("inf")) for pos in ("top center", "bottom center")}
        fits = [pos for pos in room if room[pos] >= len(text) * unit / 2]
        best = fits[0] if fits else max(room, key=room.get)
        if not fits:
            chars = max(4, int(2 * room[best] / unit) - 1)
            texts[k][j] = text[:chars - 1] + "…" if chars < len(text) else text
        places[k][j] = best
        ends[(y, best)] = x + len(texts[k][j]) * unit / 2 + unit
    for tr, place, text in zip(labelled, places, texts):
        tr.textposition = place
        tr.text = text
