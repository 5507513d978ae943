"""The run view: every gradient call's summary (Recording.steps) charted over the run --
the target (loss) per step and each variable's gradient norm per step on a log scale, with
vanishing, exploding, NaN and dead layers marked as the training page marks them. Drawn
with the training page's own figures; no TensorFlow here.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..gradient_watch import EARLY_STEPS, GradientWatch
from ..recording import as_float
from . import train_figures

DEAD = "dead"


def call_sites(rec) -> list:
    """[(file, line)] of the run's gradient calls, the most frequent first: a training
    loop's step is the call that repeats most."""
    counts: dict = {}
    for s in rec.steps:
        counts[(s.file, s.line)] = counts.get((s.file, s.line), 0) + 1
    return sorted(counts, key=lambda site: -counts[site])


def site_steps(rec, site: Optional[tuple] = None) -> list:
    """The training page's step records ({step, loss, grad_norms: {variable: norm}, and on
    the calls that binned their gradients grad_hist: {variable: counts}}) of the gradient
    calls made at `site` (default: the most frequent), step n being its n-th call from 1.
    A source without a variable path is named by its Python name."""
    sites = call_sites(rec)
    if not sites:
        return []
    site = site or sites[0]
    named = rec.step_sources
    out = []
    mine = [s for s in rec.steps if (s.file, s.line) == site]
    # One site made every call: its n-th call is the run's, also where a live run thinned
    # its older steps or the bounds dropped the oldest (a position would then undercount)
    alone = len(mine) == len(rec.steps)
    for n, s in enumerate(mine, start=1):
        if alone:
            n = s.call + 1
        norms, hist = {}, {}
        for position, (i, norm) in enumerate(zip(s.sources, s.norms)):
            source = named[i] if 0 <= i < len(named) else None
            label = (source.variable or source.name or f"tensor {source.tensor}") if source \
                else "?"
            if label in norms and source is not None and source.name:
                label = source.name      # two unnamed tf.Variables are both "Variable"
            norms[label] = 0.0 if norm is None else as_float(norm)
            if position < len(s.hist) and s.hist[position]:
                hist[label] = s.hist[position]
        step = {"step": n, "call": s.call, "loss": as_float(s.target) if s.scalar else None,
                "grad_norms": norms}
        if hist:
            step["grad_hist"] = hist
        out.append(step)
    return out


def judge(steps: list) -> list:
    """Warnings as the training page makes them (GradientWatch), plus a dead layer: one whose
    every variable's gradient was zero or None for the newest EARLY_STEPS steps."""
    watch, warnings = GradientWatch(), []
    for s in steps:
        loss = s["loss"] if s["loss"] is not None else 0.0
        found = watch.check(s["step"], loss, {k: v for k, v in s["grad_norms"].items()
                                              if v is not None})
        warnings += [dataclasses.asdict(w) for w in found]
    if len(steps) >= EARLY_STEPS:
        newest = steps[-EARLY_STEPS:]
        layers: dict = {}
        for path in newest[-1]["grad_norms"]:
            layers.setdefault(path.rsplit("/", 1)[0], []).append(path)
        for layer, paths in layers.items():
            if all(not s["grad_norms"].get(p) for s in newest for p in paths):
                warnings.append({"step": newest[0]["step"], "layer": layer, "kind": DEAD,
                                 "message": f"every gradient of {layer} was zero or None in "
                                            f"the last {EARLY_STEPS} steps"})
    return warnings


def run_figure(rec, site: Optional[tuple] = None) -> go.Figure:
    """Loss per step above, per-variable gradient norm per step (log) below, sharing the step
    axis; warnings as dashed lines on the norms."""
    steps = site_steps(rec, site)
    where = call_sites(rec)
    site = site or (where[0] if where else None)
    # Sorted by layer: the training figure colours variables in pairs (kernel, bias)
    ordered = [dict(s, grad_norms=dict(sorted(s["grad_norms"].items()))) for s in steps]
    loss = train_figures.loss_figure(ordered)
    norms = train_figures.grad_norm_figure(ordered, judge(ordered))
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                        subplot_titles=("target (loss) per step", "gradient norm per variable"))
    for trace in loss.data:
        fig.add_trace(trace, row=1, col=1)
    for trace in norms.data:
        fig.add_trace(trace, row=2, col=1)
    for shape in norms.layout.shapes:
        fig.add_shape(shape, row=2, col=1)
    for note in norms.layout.annotations:
        fig.add_annotation(note, row=2, col=1)
    fig.update_yaxes(type="log", exponentformat="power", row=2, col=1,
                     dtick=norms.layout.yaxis.dtick)
    fig.update_xaxes(title="step", row=2, col=1)
    where_text = f"{site[0]} line {site[1]}" if site else "no gradient call"
    dropped = getattr(rec, "dropped", {}).get("steps")
    title = f"the run: {len(steps):,} gradient call{'' if len(steps) == 1 else 's'} at {where_text}"
    if len(rec.steps) > len(steps):     # the other calls: a tape asked twice is two calls
        title += f" ({len(rec.steps):,} in the run)"
    if dropped:
        title += f" (the newest; {dropped:,} older summaries dropped)"
    fig.update_layout(title=title, template="plotly_white", height=700,
                      legend=dict(orientation="h", y=-0.12), margin=dict(l=60, r=20, t=80, b=40))
    return fig
