"""Where a figure's words go: each node's label beside its marker where it overlaps no other
label or marker and reads as its own node's, the None notes, and the axes' room for them,
all in the estimated px of the plot the page draws (Screen). No plotly here.
"""
from __future__ import annotations

import html
import math

import networkx as nx
import numpy as np

from .nodes import GROUP, REPEAT

SIZE = {"tensor": 16, "op": 20, GROUP: 34, REPEAT: 30}   # marker px: what a label keeps clear of
MAX_LABELS = 400          # the most labels a graph draws: past them, an unreadable smear (hover has them)
MAX_NONE_NOTES = 40
NOTE_RISE = 46            # px between a None-gradient node and its note
# The plot area the label placement assumes (px): the debugger's chart in a 1280 px wide window.
PLOT_W, PLOT_H = 570.0, 470.0
CHAR_EM, LINE_EM = 0.62, 1.3    # a label character's width and a line's height, in font sizes
NEARER_PX = 6             # a label whose box is this much nearer another node reads as that node's
PLACES = ("top center", "bottom center", "middle right", "middle left",
          "top right", "top left", "bottom right", "bottom left")
CURVE_ROOM = 36           # px an arrow curving around a chain's node rises above its row


def note_sides(G: nx.DiGraph, pos: dict, screen, markers: list) -> dict:
    """{node: px rise} for each None note: below its node, or above when that covers no marker."""
    out = {}
    for node in pos:
        reason = G.nodes[node].get("none_reason")
        if reason is None:
            continue
        own = screen.marker_box(pos[node], radius(G, node))
        others = [m for m in markers if m != own] + [screen.note_box(pos[n], note_text(G.nodes[n]["none_reason"]), r)
                                                      for n, r in out.items()]
        out[node] = next((rise for rise in (NOTE_RISE, -NOTE_RISE, 2 * NOTE_RISE, -2 * NOTE_RISE)
                          if not any(intersect(screen.note_box(pos[node], note_text(reason), rise), m)
                                     for m in others)), NOTE_RISE)
        if len(out) == MAX_NONE_NOTES:
            break
    return out


def none_notes(G: nx.DiGraph, pos: dict, rises: dict) -> list:
    """Short "None: <why>" notes by the sources whose gradient is None, full reason on hover."""
    notes = []
    for node, data in G.nodes(data=True):
        reason = data.get("none_reason")
        if reason is None or node not in rises:
            continue
        notes.append(dict(x=pos[node][0], y=pos[node][1], text=html.escape(note_text(reason)),
                          hovertext=html.escape(reason), showarrow=True, arrowhead=2, ax=0, ay=rises[node],
                          font=dict(size=15, color="#B00020"), bgcolor="rgba(255,255,255,0.9)",
                          bordercolor="#B00020", borderwidth=2))
        if len(notes) == MAX_NONE_NOTES:   # annotations are DOM nodes; past this they only slow the page
            break
    return notes


class Screen:
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


def note_text(reason: str) -> str:
    return "gradient None: " + _short(reason)


def radius(G: nx.DiGraph, node: str) -> float:
    return SIZE.get(G.nodes[node].get("kind"), SIZE["tensor"]) / 2


def intersect(p, q) -> bool:
    return p[0] < q[2] and q[0] < p[2] and p[1] < q[3] and q[1] < p[3]


def inside(box, screen) -> bool:
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


def place_labels(G: nx.DiGraph, pos: dict, screen: Screen, occupied: list, font: int,
                 edges=None) -> dict:
    """{node: (textposition, text)}: each label where it overlaps no other label or marker.
    First every label that has a place no arrow crosses takes it, in priority order; then the
    rest take the place the fewest arrows cross (a crossed label still reads, a missing one
    does not), else keep only their first line, else go to the hover. edges: the arrows'
    pieces (arrows.Segments), None where labels need not keep off them."""
    nodes = sorted((n for n in pos if G.nodes[n].get("label")), key=lambda n: _label_priority(G.nodes[n]))
    if len(nodes) > MAX_LABELS:
        nodes = nodes[:MAX_LABELS]   # thousands of labels would be an unreadable smear: hover has them
    mine = {n: screen.marker_box(pos[n], radius(G, n)) for n in pos}
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
        box = screen.label_box(pos[n], radius(G, n), lines, place, font)
        if not inside(box, screen) or boxes.hits(box, own) or not _nearest_own(box, screen.px(pos[n]), centres):
            continue
        crossing = edges.crossing(pos[n], radius(G, n), lines, place, font) if edges is not None else 0
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


def ranges(G: nx.DiGraph, pos: dict, font: int, width: float, height: float) -> tuple:
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
    beside = lambda n: radius(G, n) + 3 + _label_size(G, n, font)[0] + 4  # noqa: E731

    def over(n):
        label = radius(G, n) + 2 + _label_size(G, n, font)[1] + 4
        return max(label, radius(G, n) + CURVE_ROOM, NOTE_RISE + 18 if G.nodes[n].get("none_reason") else 0)

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
    """(width, height) px of a node's whole label, as place_labels would draw it."""
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
