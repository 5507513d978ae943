"""An op graph's first picture: the figure op_graph built, as an SVG image in the page's own
HTML. A browser opening a lesson link paints it as soon as the page's first message
arrives, while it still fetches and runs Plotly's 4.7 MB of code (2-3 s on a 2-core
machine, the most of a link's wait). The Plotly chart, drawn in the same box, takes its
place once it has painted (the page's CSS: .tv-first-paint under a chart with a .main-svg
is hidden). It is an image (st.html's sanitizer drops inline SVG), so it has no hover.

It draws what op_graph puts on a lesson's graph, at the places Plotly will: scatter traces
of lines (edges, NaN between segments), markers (circle, square, diamond, triangle-up
turned by `angle`; "-open" drawn hollow) with their rims and colour scales, text at its
textposition, the None notes (annotations with an arrow), the colour bar on the right and
the legend above. x and y are percentages of the plot's box, so the picture stretches with
the column as Plotly's does, and the plot starts below the legend's rows as the browser
wraps them. A WebGL figure (past figures.SVG_NODES) gets no
first picture: None. No Streamlit here.
"""
from __future__ import annotations

import base64
import html
import math
import re
from typing import Optional

import numpy as np
from plotly.colors import sample_colorscale

# Plotly's own geometry for op_graph's layout, read off its drawn charts (_fullLayout._size)
LEGEND_ROW_PX = 20          # one row of a horizontal legend at 13 px
LEGEND_SYMBOL_PX = 45       # an entry's symbol and the gap after it, beside its entrywidth
LEGEND_PAD_PX = 20          # the legend's padding: its rows and this are the plot's top margin
# Plotly puts the colour bar 2% of the plot's width right of it, then its ticks and title:
# the plot takes (row - COLOUR_BAR_PX) / 1.02 of the row inside the margins
COLOUR_BAR_PX = 91
TEXT_PAD_PX = 3             # between a marker's edge and its label
LINE_EM = 1.25              # a label's lines, as Plotly spaces "<br>"
FONT = "'Source Sans', 'Source Sans Pro', 'Open Sans', sans-serif"
_TAG = re.compile(r"<[^>]+>")


def picture(fig) -> Optional[str]:
    """The HTML of `fig`'s first picture (a plotly Figure from figures.op_graph), or None
    when it cannot stand in for it (WebGL traces)."""
    if any(tr.type != "scatter" for tr in fig.data):
        return None
    layout = fig.layout
    height = int(layout.height or 450)
    margin = layout.margin
    left, right, top, bottom = (int(m or 0) for m in (margin.l, margin.r, margin.t, margin.b))
    legend = _legend_items(fig) if layout.showlegend is not False else []
    bar = next((tr for tr in fig.data if tr.marker and tr.marker.showscale), None)
    plot_w = f"calc((100% - {COLOUR_BAR_PX}px) / 1.02)" if bar is not None else "100%"
    x0, x1 = layout.xaxis.range or (0, 1)
    y0, y1 = layout.yaxis.range or (0, 1)
    to = _Axes(x0, x1, y0, y1)
    body = []
    for tr in fig.data:
        body.extend(_trace(tr, to))
    for note in layout.annotations or ():
        body.append(_note(note, to))
    # A column: the legend's rows as the browser wraps them, then the plot in the rest of
    # the height, as Plotly grows its top margin for a legend that wraps.
    parts = [f'<div class="tv-first-paint" style="display:flex;flex-direction:column;height:{height}px;'
             f'box-sizing:border-box;padding:0 {right}px {bottom}px {left}px;font-family:{FONT};'
             f'color:#222;background:white;overflow:hidden">']
    if legend:
        entry = layout.legend.entrywidth or max(60, *(7 * len(name) for name, *_ in legend))
        parts.append(_legend_html(legend, plot_w, top, int(entry), int(layout.legend.font.size or 13)))
    else:
        parts.append(f'<div style="height:{top}px"></div>')
    plot = _image(f'<svg xmlns="http://www.w3.org/2000/svg" width="100%" height="100%" '
                  f'font-family="{FONT}">{"".join(body)}</svg>')
    parts.append(f'<div style="position:relative;flex:1"><img alt="" src="{plot}" '
                 f'style="position:absolute;left:0;top:0;width:{plot_w};height:100%"/>')
    if bar is not None:
        parts.append(_colour_bar(bar))
    parts.append("</div></div>")
    return "".join(parts)


class _Axes:
    """Data -> (x, y) as % of the plot's width and height, y from its top."""

    def __init__(self, x0, x1, y0, y1):
        self.x0, self.dx = x0, (x1 - x0) or 1.0
        self.y1, self.dy = y1, (y1 - y0) or 1.0

    def x(self, v) -> str:
        return f"{(v - self.x0) / self.dx * 100:.3f}%"

    def y(self, v) -> str:
        return f"{(self.y1 - v) / self.dy * 100:.3f}%"


def _seq(value, n: int) -> list:
    """A trace attribute as one value per point (Plotly takes a scalar for all)."""
    if value is None or isinstance(value, (str, int, float)):
        return [value] * n
    out = list(value)
    return out if len(out) == n else (out + [out[-1] if out else None] * n)[:n]


def _finite(v) -> bool:
    return v is not None and isinstance(v, (int, float, np.floating)) and math.isfinite(v)


def _colours(marker, n: int) -> list:
    """Each point's fill: a colour, or a number on the marker's colour scale."""
    colour = marker.color
    if colour is None or isinstance(colour, str):
        return [colour or "#444"] * n
    values = list(colour)
    if values and all(isinstance(v, str) for v in values):
        return _seq(values, n)
    scale = marker.colorscale
    lo = marker.cmin if marker.cmin is not None else min(values)
    hi = marker.cmax if marker.cmax is not None else max(values)
    span = (hi - lo) or 1.0
    ts = [min(1.0, max(0.0, (float(v) - lo) / span)) if _finite(float(v)) else 0.0 for v in values]
    return _seq(sample_colorscale([list(s) for s in scale], ts), n)


def _shape(symbol: str, size: float, fill: str, rim: Optional[str], rim_w: float, angle: float) -> str:
    """One marker centred on (0, 0), as Plotly draws `symbol` at `size` px."""
    hollow = symbol.endswith("-open")
    base = symbol[:-5] if hollow else symbol
    r = size / 2
    if hollow:
        fill, rim, rim_w = "none", rim or fill, rim_w or 1
    stroke = f' stroke="{rim}" stroke-width="{rim_w}"' if rim and rim_w else ""
    paint = f'fill="{fill}"{stroke}'
    if base == "square":
        return f'<rect x="{-r:.2f}" y="{-r:.2f}" width="{size:.2f}" height="{size:.2f}" {paint}/>'
    if base == "diamond":
        d = r * 1.3
        return f'<path d="M{d:.2f},0L0,{d:.2f}L{-d:.2f},0L0,{-d:.2f}Z" {paint}/>'
    if base == "triangle-up":
        rt, r2 = r * 2 / math.sqrt(3), r / 2
        turn = f' transform="rotate({angle:.1f})"' if angle else ""
        return f'<path d="M{-rt:.2f},{r2:.2f}H{rt:.2f}L0,{-r:.2f}Z" {paint}{turn}/>'
    return f'<circle r="{r:.2f}" {paint}/>'


def _plain(text) -> str:
    """Hover or label HTML as plain lines."""
    return html.unescape(_TAG.sub("", str(text).replace("<br>", "\n")))


def _label(text: str, where: str, x: str, y: str, r: float, size: float, colour: str) -> str:
    """A label's lines at Plotly's textposition beside a marker of radius r."""
    lines = _plain(text).split("\n")
    step = size * LINE_EM
    vertical, _, horizontal = (where or "middle center").partition(" ")
    if vertical == "top":
        first = -r - TEXT_PAD_PX - (len(lines) - 1) * step - size * 0.25
    elif vertical == "bottom":
        first = r + TEXT_PAD_PX + size * 0.8
    else:
        first = -(len(lines) - 1) * step / 2 + size * 0.35
    anchor = {"left": "end", "right": "start"}.get(horizontal, "middle")
    shift = {"left": -(r + TEXT_PAD_PX), "right": r + TEXT_PAD_PX}.get(horizontal, 0)
    spans = "".join(f'<tspan x="{x}" dx="{shift}" y="{y}" dy="{first + i * step:.2f}">{html.escape(line)}</tspan>'
                    for i, line in enumerate(lines))
    return f'<text text-anchor="{anchor}" font-size="{size}" fill="{colour}">{spans}</text>'


def _trace(tr, to: _Axes) -> list:
    xs = [] if tr.x is None else list(tr.x)
    ys = [] if tr.y is None else list(tr.y)
    n = min(len(xs), len(ys))
    mode = tr.mode or "markers"
    out = []
    if "lines" in mode and n:
        colour, width = (tr.line.color or "#444"), (tr.line.width or 2)
        segs = []
        for (xa, ya), (xb, yb) in zip(zip(xs, ys), zip(xs[1:], ys[1:])):
            if all(_finite(v) for v in (xa, ya, xb, yb)):
                segs.append(f'<line x1="{to.x(xa)}" y1="{to.y(ya)}" x2="{to.x(xb)}" y2="{to.y(yb)}"/>')
        out.append(f'<g stroke="{colour}" stroke-width="{width}">{"".join(segs)}</g>')
    marker = tr.marker
    if "markers" in mode and n:
        symbols = _seq(marker.symbol or "circle", n)
        sizes = _seq(marker.size if marker.size is not None else 6, n)
        angles = _seq(marker.angle if marker.angle is not None else 0, n)
        fills = _colours(marker, n)
        rims = _seq(marker.line.color, n)
        rim_w = marker.line.width if marker.line.width is not None else 0
        for i in range(n):
            if not (_finite(xs[i]) and _finite(ys[i])):
                continue
            shape = _shape(str(symbols[i]), float(sizes[i]), fills[i], rims[i], rim_w, float(angles[i] or 0))
            out.append(f'<svg x="{to.x(xs[i])}" y="{to.y(ys[i])}" overflow="visible">{shape}</svg>')
    if "text" in mode and n and tr.text is not None:
        texts = _seq(tr.text, n)
        where = _seq(tr.textposition or "middle center", n)
        sizes = _seq(marker.size if "markers" in mode and marker.size is not None else 0, n)
        font = tr.textfont
        size, colour = (font.size or 14), (font.color or "#222")
        for i in range(n):
            if texts[i] and _finite(xs[i]) and _finite(ys[i]):
                out.append(_label(texts[i], where[i], to.x(xs[i]), to.y(ys[i]), float(sizes[i]) / 2, size, colour))
    return out


def _note(note, to: _Axes) -> str:
    """A None note: its boxed text centred `ay` px below the node (Plotly's ay points
    down), an arrow from the box up to the node."""
    x, y = to.x(note.x), to.y(note.y)
    ay = note.ay or 0
    size = (note.font.size if note.font else None) or 14
    colour = (note.font.color if note.font else None) or "#222"
    text = _plain(note.text)
    wide, high = 0.46 * size * len(text) + 8, size * 1.4 + 4
    edge = ay - high / 2 if ay > 0 else ay + high / 2       # the box's side that faces the node
    head = 9 if ay > 0 else -9
    return (f'<svg x="{x}" y="{y}" overflow="visible">'
            f'<line x1="0" y1="{edge:.1f}" x2="0" y2="{head:.1f}" stroke="{colour}" stroke-width="1.5"/>'
            f'<path d="M-4,{head + (5 if ay > 0 else -5)}L0,{head - (1 if ay > 0 else -1)}L4,{head + (5 if ay > 0 else -5)}Z" '
            f'fill="{colour}"/>'
            f'<rect x="{-wide / 2:.1f}" y="{ay - high / 2:.1f}" width="{wide:.1f}" height="{high:.1f}" '
            f'fill="{note.bgcolor or "white"}" stroke="{note.bordercolor or colour}" stroke-width="{note.borderwidth or 1}"/>'
            f'<text x="0" y="{ay + size * 0.35:.1f}" text-anchor="middle" font-size="{size}" fill="{colour}">'
            f'{html.escape(text)}</text></svg>')


def _legend_items(fig) -> list:
    """(name, symbol, fill, rim, rim width) of each trace the legend lists, in order."""
    items = []
    for tr in fig.data:
        if tr.showlegend is False or not tr.name:
            continue
        marker = tr.marker
        fill = marker.color if isinstance(marker.color, str) else None
        if fill is None and marker.color is not None:
            fill = _colours(marker, 1)[0]
        symbol = marker.symbol if isinstance(marker.symbol, str) else "square"
        items.append((tr.name, symbol or "circle", fill or "#888", marker.line.color,
                      marker.line.width or 0))
    return items


def _image(svg: str) -> str:
    """An SVG as an image's address: st.html's sanitizer keeps <img> and drops inline <svg>."""
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode()


def _legend_html(items: list, plot_w: str, top: int, entry_px: int, size: int) -> str:
    """Plotly's horizontal legend of entries `entry_px` wide (figures.legend_entry_px): as
    many to a row as the plot's width holds, each its symbol's 40 px and a 5 px gap on."""
    spans = []
    for name, symbol, fill, rim, rim_w in items:
        shape = _shape(symbol, 12, fill, rim if isinstance(rim, str) else None, min(rim_w or 0, 2), 0)
        swatch = _image(f'<svg xmlns="http://www.w3.org/2000/svg" width="20" height="18">'
                        f'<svg x="10" y="9" overflow="visible">{shape}</svg></svg>')
        spans.append(f'<span style="display:inline-flex;align-items:center;gap:14px;white-space:nowrap;'
                     f'box-sizing:border-box;width:{entry_px + LEGEND_SYMBOL_PX}px;height:{LEGEND_ROW_PX}px;'
                     f'padding-left:6px"><img alt="" src="{swatch}" width="20" height="18"/>{html.escape(name)}</span>')
    return (f'<div style="flex:none;display:flex;flex-wrap:wrap;align-content:flex-end;font-size:{size}px;'
            f'width:{plot_w};min-height:{top}px;padding:{LEGEND_PAD_PX - 4}px 0 4px 0;box-sizing:border-box">'
            f'{"".join(spans)}</div>')


def _colour_bar(tr) -> str:
    """The gradient's colour scale beside the plot, its ticks and its title."""
    marker = tr.marker
    lo = marker.cmin if marker.cmin is not None else 0.0
    hi = marker.cmax if marker.cmax is not None else 1.0
    stops = sample_colorscale([list(s) for s in marker.colorscale], [k / 10 for k in range(11)])
    gradient = ", ".join(f"{c} {k * 10}%" for k, c in enumerate(reversed(stops)))
    bar = marker.colorbar
    ticks = []
    for value, text in zip(bar.tickvals or (), bar.ticktext or ()):
        share = (hi - value) / ((hi - lo) or 1.0) * 100
        ticks.append(f'<div style="position:absolute;left:24px;top:calc({share:.2f}% - 8px);'
                     f'font-size:13px">{html.escape(str(text))}</div>')
    title = bar.title.text if bar.title else ""
    return (f'<div style="position:absolute;right:0;top:10px;bottom:10px;width:{COLOUR_BAR_PX - 10}px">'
            f'<div style="position:absolute;left:0;top:0;bottom:0;width:{bar.thickness or 18}px;'
            f'background:linear-gradient({gradient})"></div>{"".join(ticks)}'
            f'<div style="position:absolute;right:0;top:50%;transform:translate(40%,-50%) rotate(-90deg);'
            f'white-space:nowrap;font-size:14px">{html.escape(title or "")}</div></div>')
