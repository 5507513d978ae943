"""Two recordings' op graphs side by side, each drawn by figures.op_graph as the page draws
one, with rings over it: matched ops coloured by how far they differ, ops on one side only,
and the first divergence called out. It reads matching/match.py's Comparison by its fields.
No TensorFlow here."""
from __future__ import annotations

from typing import Optional

import networkx as nx
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from . import figures, graph, layout, place
from .options import View

MATCHED, PAST, BROKEN, ALONE = "#2CA02C", "#FF7F0E", "#D62728", "#9467BD"
RANK = {MATCHED: 0, PAST: 1, ALONE: 2, BROKEN: 3}
WORDS = {MATCHED: "matches within rtol", PAST: "differs past rtol", BROKEN: "NaN, Inf or None on one side",
         ALONE: "only on this side"}


def side_view(rec, tape: Optional[int], group: Optional[bool] = None, **figure) -> View:
    """The view each side is drawn in: its step's tape with the ops its block ran unrecorded
    (a removed tf.stop_gradient is one), every op when there is no tape."""
    tp = next((t for t in rec.tapes if t.id == tape), None)
    call = 0 if tp is not None and tp.gradients else None
    return View(tape=tape, call=call, group=graph.opens_grouped(rec) if group is None else group, **figure)


def side_tape(rec, step: Optional[int]) -> Optional[int]:
    """The tape a side shows: its kept step's, else the first top-level tape."""
    tops = sorted((min(t.ops), t.id) for t in rec.tapes if t.parent is None and t.ops)
    if not tops:
        return None
    return tops[step % len(tops)][1] if step is not None else tops[0][1]


def node_of_op(G: nx.DiGraph) -> dict:
    """{op id: the node drawing it}: its own, or the fold or layer group it went into."""
    out = {}
    for n, data in G.nodes(data=True):
        if data.get("ref") is not None and data.get("kind") != "tensor":
            out[data["ref"]] = n
        for member in data.get("members") or ():
            out[member] = n
    return out


def row_colour(row, rtol: float) -> str:
    if row.a is None or row.b is None:
        return ALONE
    if row.breaks():
        return BROKEN
    return PAST if row.beyond(rtol) else MATCHED


def marks(cmp, side: str, G: nx.DiGraph) -> dict:
    """{node: (colour, hover words)}, the worst of the ops a node draws."""
    where = node_of_op(G)
    out = {}
    for row in cmp.rows:
        op_id = getattr(row, side)
        node = where.get(op_id)
        if node is None:
            continue
        colour = row_colour(row, cmp.rtol)
        words = f"{WORDS[colour]}: {row.op}, line {row.line_a if side == 'a' else row.line_b}"
        if row.value_diff is not None:
            words += f"<br>max relative difference of value {row.value_diff:.3g}"
        if row.grad_diff is not None:
            words += f"<br>... of gradient {row.grad_diff:.3g}"
        for mark in (row.value_mark, row.grad_mark):
            if mark and mark != "no value":
                words += f"<br>{'gradient ' if mark == row.grad_mark else ''}{mark}"
        if node not in out or RANK[colour] > RANK[out[node][0]]:
            out[node] = (colour, words)
    return out


def first_node(cmp, side: str, G: nx.DiGraph) -> Optional[str]:
    """The node of the first divergent op on this side; for an op the side does not have
    (removed, or added on the other), the node of the next op it does have: where it would be."""
    if cmp.first is None:
        return None
    where = node_of_op(G)
    for row in cmp.rows[cmp.first:]:
        op_id = getattr(row, side)
        if op_id is not None and op_id in where:
            return where[op_id]
    return None


def callout_text(cmp, side: str) -> str:
    row = cmp.first_row()
    if row is not None and getattr(row, side) is None:
        gone = "removed" if side == "b" else "added"
        return f"<b>first divergence</b>: {row.op} {gone} before this"
    return "<b>first divergence</b>"


def side_figure(rec, cmp, side: str, title: str, size: Optional[tuple] = None,
                view: Optional[View] = None):
    """(G, positions, figure) of one side: the existing op graph, ringed by difference."""
    step = cmp.step_a if side == "a" else cmp.step_b
    view = view or side_view(rec, side_tape(rec, step))
    G = graph.build(rec, view)
    pos = layout.layered(G)
    fig = figures.op_graph(G, pos, view=view, title=title, size=size)
    ring(fig, G, pos, marks(cmp, side, G), first_node(cmp, side, G), callout_text(cmp, side))
    return G, pos, fig


def ring(fig: go.Figure, G: nx.DiGraph, pos: dict, marked: dict, first: Optional[str],
         callout: str = "<b>first divergence</b>") -> None:
    """Rings of difference over the nodes, one trace per colour (its legend entry), and the
    first divergence's callout."""
    for colour in (MATCHED, PAST, ALONE, BROKEN):
        nodes = [n for n, (c, _) in marked.items() if c == colour and n in pos]
        if not nodes:
            continue
        fig.add_trace(go.Scatter(
            x=[pos[n][0] for n in nodes], y=[pos[n][1] for n in nodes], mode="markers",
            name=WORDS[colour], customdata=nodes, hovertext=[marked[n][1] for n in nodes], hoverinfo="text",
            marker=dict(symbol="circle-open", size=[2 * place.radius(G, n) + 12 for n in nodes],
                        color=colour, line=dict(width=3 if colour != MATCHED else 2, color=colour))))
    if first is not None and first in pos:
        x, y = pos[first]
        fig.add_trace(go.Scatter(x=[x], y=[y], mode="markers", name="first divergence", hoverinfo="skip",
                                 customdata=[first], marker=dict(symbol="circle-open", color=BROKEN,
                                 size=2 * place.radius(G, first) + 26, line=dict(width=5, color=BROKEN))))
        fig.add_annotation(x=x, y=y, text=callout, showarrow=True, arrowhead=2,
                           arrowcolor=BROKEN, ax=0, ay=-48, font=dict(color=BROKEN, size=15),
                           bgcolor="rgba(255,255,255,0.85)", bordercolor=BROKEN)


def mark_picked(fig: go.Figure, G: nx.DiGraph, pos: dict, node: str) -> None:
    """The node picked on either chart, ringed on both (its match on the other)."""
    if node not in pos:
        return
    fig.add_trace(go.Scatter(x=[pos[node][0]], y=[pos[node][1]], mode="markers", name="picked",
                             hoverinfo="skip", customdata=[node],
                             marker=dict(symbol="circle-open", color=figures.CURRENT,
                                         size=2 * place.radius(G, node) + 34,
                                         line=dict(width=4, color=figures.CURRENT))))


def side_by_side(cmp, names: tuple, sentence: str, width: int = 1400, height: int = 560) -> go.Figure:
    """One figure of both sides (a notebook's `tapeviz.figure(a, compare=b)`), the sentence
    as its title."""
    half = (width // 2, height)
    _, _, fa = side_figure(cmp.a, cmp, "a", names[0], size=half)
    _, _, fb = side_figure(cmp.b, cmp, "b", names[1], size=half)
    fig = make_subplots(rows=1, cols=2, subplot_titles=names, horizontal_spacing=0.03)
    for col, part in ((1, fa), (2, fb)):
        for trace in part.data:
            trace.showlegend = col == 1 and trace.showlegend is not False
            fig.add_trace(trace, row=1, col=col)
        axis = "" if col == 1 else "2"
        for note in part.layout.annotations:
            fig.add_annotation(note.update(xref=f"x{axis}", yref=f"y{axis}"))
        fig.update_xaxes(visible=False, range=part.layout.xaxis.range, row=1, col=col)
        fig.update_yaxes(visible=False, range=part.layout.yaxis.range, row=1, col=col)
    fig.update_layout(title=sentence, width=width, height=height + 80, plot_bgcolor="white",
                      paper_bgcolor="white", hovermode="closest",
                      legend=dict(orientation="h", yanchor="top", y=-0.02, x=0))
    return fig
