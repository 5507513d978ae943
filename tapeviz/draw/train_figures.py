"""A run's loss and gradient-norm charts as plotly figures (the finished run view,
run_figures.py), and the colours and helpers the live Vega-Lite charts share (train_vega.py,
train_grids.py). TF-free: they take the plain metrics records the worker emits.
"""
from __future__ import annotations

import math
from typing import Iterable, Optional

import plotly.graph_objects as go


# Okabe-Ito, as in figures.py: readable for colour-blind students and on a projector.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]
RAW = "#9BBBD4"
SMOOTH = "#0072B2"
EPOCH = "#D55E00"
WRONG = "#D55E00"
RIGHT = "#333333"
WARNING_KINDS = {"vanishing": "#56B4E9", "exploding": "#D55E00", "nan": "#CC0000",
                 "dead": "#777777"}


def ema(values: Iterable[float], smoothing: float = 0.9) -> list:
    """TensorBoard's debiased exponential moving average; non-finite points give None
    and do not poison the average."""
    smoothed, average, weight = [], 0.0, 0.0
    for value in values:
        if value is None or not math.isfinite(value):
            smoothed.append(None)
            continue
        average = smoothing * average + (1 - smoothing) * value
        weight = smoothing * weight + (1 - smoothing)
        smoothed.append(average / weight)
    return smoothed


def loss_figure(steps: list, smoothing: float = 0.9, log: bool = False) -> go.Figure:
    """Loss per step, raw and smoothed; `log` puts it on a log axis, so that one spike of
    800 does not flatten the rest."""
    fig = _base("Training loss", "step", "loss (log)" if log else "loss")
    if not steps:
        return _waiting(fig.update_yaxes(log_axis([]) if log else {}))
    x = [s["step"] for s in steps]
    loss = [_finite(s["loss"]) for s in steps]
    if log:
        fig.update_yaxes(log_axis([v for v in loss if v is not None and v > 0]))
    # SVG, not WebGL (Scattergl): a thinned history is small, and every redraw of a WebGL
    # chart makes a new context, of which a browser keeps only a few.
    fig.add_trace(go.Scatter(x=x, y=loss, mode="lines", name="loss per step", line=dict(color=RAW, width=1)))
    fig.add_trace(go.Scatter(x=x, y=ema(loss, smoothing), mode="lines", name=f"smoothed (EMA {smoothing})",
                             line=dict(color=SMOOTH, width=3)))
    return fig


def grad_norm_figure(steps: list, warnings: Optional[list] = None) -> go.Figure:
    """Gradient norm of each trainable variable per step, log scale; warnings as lines."""
    fig = _base("Gradient norm per variable (dotted: bias)", "step", "gradient norm (log)")
    if not steps:
        return _waiting(fig.update_yaxes(log_axis([])))
    x = [s["step"] for s in steps]
    seen = []
    for i, path in enumerate(steps[-1]["grad_norms"]):
        y = [_positive(s["grad_norms"].get(path)) for s in steps]
        seen += [v for v in y if v is not None]
        dash = "dot" if path.endswith("bias") else "solid"   # kernel and bias of a layer share a colour
        colour = PALETTE[(i // 2) % len(PALETTE)]
        # One legend entry per layer (its kernel; the bias toggles with it), so that the
        # legend is one row under the chart; the hover names the whole path.
        layer, kind = layer_part(path)
        fig.add_trace(go.Scatter(x=x, y=y, mode="lines", name=layer if kind != "bias" else f"{layer} bias",
                                 legendgroup=layer, showlegend=kind != "bias",
                                 line=dict(color=colour, dash=dash, width=1.5),
                                 hovertemplate=f"{path}<br>step %{{x}}: %{{y:.3g}}<extra></extra>"))
    fig.update_yaxes(log_axis(seen))
    fig.update_layout(legend=dict(y=-0.3))
    for step, kinds in warning_marks(warnings or []):
        worst = worst_kind(kinds)
        fig.add_vline(x=step, line=dict(color=WARNING_KINDS.get(worst, EPOCH), dash="dash"),
                      annotation_text="<br>".join(f"{k}: {', '.join(v)}" for k, v in kinds.items()),
                      annotation_position="top left")
    return fig


def log_axis(values: list, min_decades: int = 2) -> dict:
    """A log axis ticked at powers of ten only (10⁻³, 10⁻², …), over whole decades around
    `values`, at least `min_decades` of them: plotly's own ticks over a narrow span mix
    digits and powers ("2, 10⁻¹, 5, 2"), which a projector's reader cannot place."""
    if values:
        lo, hi = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)))
    else:
        lo, hi = -3, 1
    while hi - lo < min_decades:     # widen below first: gradients shrink as a run learns
        lo -= 1
        if hi - lo < min_decades:
            hi += 1
    return dict(type="log", dtick=1, exponentformat="power", showexponent="all",
                range=[lo - 0.05, hi + 0.05], minor=dict(showgrid=False))


def layer_part(path: str) -> tuple:
    """("conv1", "kernel") of "model/conv1/kernel": a variable's layer (its model's name
    dropped) and its part; a path without "/" is its own layer."""
    layer, _, part = path.rpartition("/")
    return (layer.split("/", 1)[-1] if "/" in layer else layer or path), part


def worst_kind(kinds: dict) -> str:
    """The kind a step's warning mark is coloured by: NaN, then exploding, then vanishing."""
    return next((k for k in ("nan", "exploding", "vanishing") if k in kinds), next(iter(kinds)))


def warning_marks(warnings: list) -> list:
    """[(step, {kind: [layer, ...]})]: each layer's warning of a kind once (its first step),
    and the warnings of one step in one mark, so that their labels do not stack."""
    first, marks = set(), {}
    for w in warnings:
        kind, layer = w.get("kind"), w.get("layer") or "loss"
        if (kind, layer) in first or w.get("step") is None:
            continue
        first.add((kind, layer))
        marks.setdefault(w["step"], {}).setdefault(kind, []).append(layer)
    return sorted(marks.items())


def _base(title: str, x_title: Optional[str], y_title: Optional[str]) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(title=title, template="plotly_white", margin=dict(l=50, r=20, t=50, b=40),
                      legend=dict(orientation="h", y=-0.2, entrywidth=0), uirevision=title)  # keep zoom across redraws
    # Steps start at 0: no padding into negative steps (plotly pads markers' autorange).
    fig.update_xaxes(title=x_title, rangemode="nonnegative")
    fig.update_yaxes(title=y_title)
    return fig


def _waiting(fig: go.Figure) -> go.Figure:
    fig.add_annotation(text="waiting for the first records…", showarrow=False, x=0.5, y=0.5,
                       xref="paper", yref="paper", font=dict(size=16, color="#777777"))
    return fig


def _finite(value) -> Optional[float]:
    return value if value is not None and math.isfinite(value) else None


def _positive(value) -> Optional[float]:
    """A log axis cannot show zero or NaN: leave a gap there instead."""
    value = _finite(value)
    return value if value is not None and value > 0 else None


def power_of_ten(exponent: int) -> str:
    """10 to the `exponent` as a reader writes it: 10⁻³."""
    digits = str(exponent).translate(str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹"))
    return f"10{digits}"
