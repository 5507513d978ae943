"""Plotly figures for the training page, drawn from the metrics records training.run emits.

TF-free: the page calls these with the plain dicts it polled from the worker.
"""
from __future__ import annotations

import math
from typing import Iterable, Optional

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .. import metrics

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


def accuracy_figure(evals: list) -> go.Figure:
    """Held-out accuracy at every evaluation, with the end of each epoch marked."""
    fig = _base("Held-out accuracy", "step", "accuracy")
    fig.update_yaxes(range=[0, 1.02], tickformat=".0%")
    if not evals:
        return _waiting(fig)
    fig.add_trace(go.Scatter(x=[e["step"] for e in evals], y=[e["accuracy"] for e in evals],
                             mode="lines+markers", name="every N steps", line=dict(color=SMOOTH)))
    ends = [e for e in evals if e.get("epoch_end")]
    fig.add_trace(go.Scatter(
        x=[e["step"] for e in ends], y=[e["accuracy"] for e in ends], mode="markers+text",
        name="end of epoch", marker=dict(color=EPOCH, size=13, symbol="diamond"),
        text=[f"epoch {e['epoch']}: {e['accuracy']:.1%}" for e in ends],
        # Left of the point: the last epoch ends at the axis' right edge, where text is cut.
        textposition="bottom left"))
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


def prediction_grid(predictions: Optional[dict], columns: int = 4) -> go.Figure:
    """Held-out digits with "pred / true" titles; wrong predictions titled in colour with a ✗."""
    if not predictions or not predictions.get("images"):
        return _waiting(_base("Predictions", None, None))
    images, true, pred = predictions["images"], predictions["true"], predictions["pred"]
    rows = math.ceil(len(images) / columns)
    titles = [("✓ " if p == t else "✗ ") + f"pred {p} / true {t}" for p, t in zip(pred, true)]
    fig = make_subplots(rows=rows, cols=columns, subplot_titles=titles,
                        horizontal_spacing=0.02, vertical_spacing=0.08)
    for i, image in enumerate(images):
        # Heatmaps draw row 0 at the bottom: flip so the digit stands upright.
        fig.add_trace(go.Heatmap(z=image[::-1], colorscale="Greys", zmin=0, zmax=255, showscale=False,
                                 hovertemplate=titles[i] + "<extra></extra>"),
                      row=i // columns + 1, col=i % columns + 1)
    for annotation, p, t in zip(fig.layout.annotations, pred, true):
        annotation.font = dict(color=RIGHT if p == t else WRONG, size=13)
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False, scaleanchor="x")
    wrong = sum(p != t for p, t in zip(pred, true))
    fig.update_layout(title=f"Predictions at step {predictions.get('step')}: {wrong} of {len(images)} wrong",
                      height=170 * rows + 80, margin=dict(l=10, r=10, t=70, b=10), template="plotly_white")
    return fig


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


def grad_hist_figure(steps: list) -> go.Figure:
    """Per layer, kernel and bias side by side, the distribution of gradient values over
    the steps as a heat strip: a column per step that has a histogram, a row per fixed bin
    of |value| (metrics.HIST_EDGES_LOG10), shaded by the share of the variable's values."""
    steps = [s for s in steps if s.get("grad_hist")]
    if not steps:
        fig = _waiting(_base("Gradient values per layer over the steps", None, None))
        return fig.update_layout(height=260).update_xaxes(visible=False).update_yaxes(visible=False)
    layers: dict = {}
    for path in steps[-1]["grad_hist"]:
        layer, _, kind = path.rpartition("/")
        layers.setdefault(layer or path, {})[kind] = path
    kinds = sorted({k for paths in layers.values() for k in paths}, key=lambda k: (k != "kernel", k))
    fig = make_subplots(rows=len(layers), cols=len(kinds), shared_xaxes=True,
                        horizontal_spacing=0.06, vertical_spacing=0.04 if len(layers) > 1 else 0,
                        subplot_titles=[f"{layer}/{kind}" for layer in layers for kind in kinds])
    x = [s["step"] for s in steps]
    centres = _bin_centres()
    for row, paths in enumerate(layers.values(), start=1):
        for col, kind in enumerate(kinds, start=1):
            if kind not in paths:
                continue
            path = paths[kind]
            z = [[_share(s["grad_hist"].get(path), b) for s in steps] for b in range(len(centres))]
            fig.add_trace(go.Heatmap(
                x=x, y=centres, z=z, zmin=0, zmax=0.5, colorscale="Blues", showscale=False,
                hovertemplate=f"{path}<br>step %{{x}}<br>|gradient| ≈ 10^%{{y}}<br>"
                              f"%{{z:.0%}} of its values<extra></extra>"), row=row, col=col)
    ticks = list(range(-10, 3, 4))
    fig.update_yaxes(tickvals=ticks, ticktext=[power_of_ten(t) for t in ticks],
                     range=[centres[0] - 0.25, centres[-1] + 0.25])
    fig.update_xaxes(rangemode="nonnegative")
    fig.update_xaxes(title="step", row=len(layers))
    fig.update_layout(title="Gradient values per layer over the steps (|value|, share per bin)",
                      template="plotly_white", height=120 * len(layers) + 110,
                      margin=dict(l=60, r=20, t=70, b=40), uirevision="grad_hist")
    for annotation in fig.layout.annotations:
        annotation.font = dict(size=13)
    return fig


def _bin_centres() -> list:
    """Each fixed bin's place on the log10 |value| axis: the middle of its half decade (the
    two open-ended bins half a step outside the edges)."""
    edges = list(metrics.HIST_EDGES_LOG10)
    step = edges[1] - edges[0]
    return [edges[0] - step / 2] + [a + step / 2 for a in edges[:-1]] + [edges[-1] + step / 2]


def _share(counts, b: int) -> Optional[float]:
    if not counts:
        return None
    total = sum(counts)
    return counts[b] / total if total else None


def power_of_ten(exponent: int) -> str:
    """10 to the `exponent` as a reader writes it: 10⁻³."""
    digits = str(exponent).translate(str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹"))
    return f"10{digits}"
