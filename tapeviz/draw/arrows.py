"""The figure's arrows in px of the plot: each edge straight or curved around a node in its
way, its arrowhead, its "×2" when it stands for several inputs, and the pieces a label must
not sit across.
"""
from __future__ import annotations

import math

import networkx as nx
import numpy as np
import plotly.graph_objects as go

from .place import Screen, intersect, radius

WIDER = 1.6               # the widest plot, against place.PLOT_W, a label's place is checked on
EDGE_MARGIN = 2           # px around a label that an arrow should not cross either
CURVE_POINTS = 16


class Segments:
    """The drawn edges as straight pieces in plot pixels, to count the ones a label box
    would sit across (an arrow through "grad 2" hides its digits). Counted on the plot the
    placement assumes and on one WIDER times as wide: a wider window stretches the edges'
    slopes but not the labels, and a label clear on both is clear between them."""

    def __init__(self, paths: dict, pos: dict, screen: Screen):
        self.screens = [screen, Screen(((screen.x0, screen.x0 + screen.w / screen.sx),
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


def edge_paths(G: nx.DiGraph, pos: dict, edges: list, screen: Screen) -> dict:
    """{edge: points}: straight, unless a node sits on the segment (x feeding a chain's
    later op, collinear with the chain): then a curve around it, so no edge hides."""
    px = {n: screen.px(p) for n, p in pos.items()}
    names = list(px)
    where = {n: i for i, n in enumerate(names)}
    xy = np.array([px[n] for n in names], dtype=float).reshape(-1, 2)
    reach = np.array([radius(G, n) + 3 for n in names], dtype=float)
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


def arrowheads(G: nx.DiGraph, pos: dict, paths: dict, edges: list, screen: Screen,
               colours: list) -> go.Scatter:
    """A triangle at the head of every edge, just outside the node it points to, in its edge's colour."""
    xs, ys, angles = [], [], []
    for u, v in edges:
        path = paths.get((u, v)) or [pos[u], pos[v]]
        tail, head = screen.px(path[-2]), screen.px(path[-1])
        dx, dy = head[0] - tail[0], head[1] - tail[1]
        length = math.hypot(dx, dy) or 1.0
        back = radius(G, v) + 6
        xs_, ys_ = screen.data((head[0] - dx / length * back, head[1] - dy / length * back))
        xs.append(xs_)
        ys.append(ys_)
        angles.append(math.degrees(math.atan2(dx, dy)))    # plotly: clockwise from pointing up
    return go.Scatter(x=xs, y=ys, mode="markers", name="arrows", showlegend=False, hoverinfo="skip",
                      marker=dict(symbol="triangle-up", size=11, angle=angles, color=colours,
                                  line=dict(width=0)))


def edge_counts(G: nx.DiGraph, pos: dict, paths: dict, edges: list, screen: Screen, occupied: list,
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
        if any(intersect(box, o) for o in occupied):
            box = screen.label_box(mid, 0, [text], "bottom center", font)
            if any(intersect(box, o) for o in occupied):
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
