"""The live charts (the training page's, and the debugger's run view while a program runs) as
Vega-Lite: a spec that stays the same for a run and rows of plain data that grow. Streamlit keys a Vega-Lite chart
by its key alone and feeds it new rows in place, where a plotly chart is keyed by its whole
figure and remounts, blank, on every update. TF-free; the page passes the rows on.
"""
from __future__ import annotations

import math
from typing import Optional

from .train_figures import (EPOCH, PALETTE, RAW, SMOOTH, WARNING_KINDS, ema, layer_part,
                            power_of_ten, warning_marks, worst_kind)

POWERS = list(range(-12, 5))      # log axes are ticked at these powers of ten only
_STEP_FIELD = {"field": "step", "type": "quantitative", "title": "step"}   # a tooltip's too
# Steps are whole: no "1.2" ticks while a run has only its first few
_STEP = {**_STEP_FIELD, "axis": {"tickMinStep": 1, "format": "d"}}


def power_labels(powers, exponent: str = "round(log(datum.value) / LN10)",
                 label=lambda k: "1" if k == 0 else "10" if k == 1 else power_of_ten(k)) -> str:
    """A Vega expression writing a tick whose `exponent` is k in `powers` as `label(k)`
    ("10⁻³"; no "2, 10⁻¹, 5" mixed in), and any other tick as nothing."""
    expr = "''"
    for k in reversed(powers):
        expr = f"{exponent} == {k} ? '{label(k)}' : {expr}"
    return expr


def every_kth(items: list, most: int) -> list:
    """`items` thinned to about `most`: every k-th, and the newest always."""
    stride = max(1, -(-len(items) // most))
    return items[::stride] + (items[-1:] if (len(items) - 1) % stride else [])


def _log_axis(title: str) -> dict:
    return {"type": "quantitative", "title": title, "scale": {"type": "log"},
            "axis": {"values": [10.0 ** k for k in POWERS], "labelExpr": power_labels(POWERS),
                     "grid": True}}


def base_spec(title: str, height: Optional[int]) -> dict:
    """height: the plot's; None leaves the whole chart's height to Streamlit's `height=`."""
    spec = {"$schema": "https://vega.github.io/schema/vega-lite/v5.json", "title": title,
            "config": {"font": "sans-serif", "axis": {"labelFontSize": 15,
                                         "titleFontSize": 16}, "legend": {"labelFontSize": 15,
                                         "orient": "bottom", "title": None},
                                         "title": {"fontSize": 17, "anchor": "start"}}}
    if height is not None:
        spec["height"] = height
    return spec


def loss_spec(log: bool = False, height: Optional[int] = 300, title: str = "Training loss") -> dict:
    """Loss per step, raw and smoothed; the rows come from `loss_rows`."""
    y = _log_axis("loss (log)") if log else {"type": "quantitative", "title": "loss"}
    spec = base_spec(title, height)
    spec.update({"mark": {"type": "line", "clip": True},
                 "encoding": {"x": _STEP,
                              "y": {**y, "field": "value"},
                              "color": {"field": "series", "type": "nominal",
                                        "scale": {"range": [RAW, SMOOTH]}},
                              "strokeWidth": {"field": "series", "type": "nominal",
                                              "scale": {"range": [1, 3]}, "legend": None}}})
    return spec


def loss_rows(steps: list, smoothing: float = 0.9) -> list:
    loss = [_finite(s["loss"]) for s in steps]
    rows = []
    for step, raw, smooth in zip((s["step"] for s in steps), loss, ema(loss, smoothing)):
        if raw is not None:
            rows.append({"step": step, "value": raw, "series": "loss per step"})
        if smooth is not None:
            rows.append({"step": step, "value": smooth, "series": f"smoothed (EMA {smoothing})"})
    return rows


def _finite(value) -> Optional[float]:
    return value if value is not None and math.isfinite(value) else None


MAX_POINTS = 1_500     # steps drawn per line: past that every k-th (and the newest) is drawn
MIN_DECADES = 2        # a norm axis spans at least this many powers of ten


def norm_spec(height: Optional[int] = 300, title: str = "Gradient norm per variable (dotted: bias)") -> dict:
    """Each variable's gradient norm per step (log), a layer's kernel and bias in one colour
    (bias dotted), and the warnings as dashed rules whose tooltip says what happened; the
    rows come from `norm_rows`. The same spec for the whole run: only the rows change."""
    spec = base_spec(title, height)
    step, at = _STEP, _STEP_FIELD          # an axis's step, and a tooltip's (no axis)
    spec["layer"] = [
        {"transform": [{"filter": "datum.series == 'norm'"}],
         "mark": {"type": "line", "clip": True, "strokeWidth": 1.5},
         "encoding": {"x": step, "y": {**_log_axis("norm (log)"), "field": "value"},
                      "color": {"field": "layer", "type": "nominal",
                                "scale": {"range": PALETTE}},
                      "strokeDash": {"field": "part", "type": "nominal", "legend": None,
                                     "scale": {"domain": ["kernel", "bias"],
                                               "range": [[1, 0], [2, 2]]}},
                      "detail": {"field": "variable"},
                      "tooltip": [{"field": "variable"}, at,
                                  {"field": "value", "format": ".3g", "title": "norm"}]}},
        {"transform": [{"filter": "datum.series == 'warning'"}],
         "mark": {"type": "rule", "strokeDash": [6, 4], "strokeWidth": 2},
         "encoding": {"x": step,
                      "color": {"field": "kind", "type": "nominal", "legend": None,
                                "scale": {"domain": list(WARNING_KINDS),
                                          "range": list(WARNING_KINDS.values())}},
                      "tooltip": [{"field": "message", "title": "warning"}, at]}},
        # Two unseen points a decade or more beyond the norms: the log axis spans whole
        # decades, at least two, and a constant norm is not a degenerate domain
        {"transform": [{"filter": "datum.series == 'span'"}], "mark": {"type": "point", "opacity": 0},
         "encoding": {"x": step, "y": {"field": "value", "type": "quantitative"}}}]
    spec["resolve"] = {"scale": {"color": "independent"}}
    return spec


def norm_rows(steps: list, warnings: Optional[list] = None, max_points: int = MAX_POINTS) -> list:
    """Rows for `norm_spec` from the training page's step records ({step, grad_norms}):
    a zero or None norm is left out (a log axis has no place for it), and past `max_points`
    steps every k-th step and the newest are drawn, so an update stays small."""
    drawn = every_kth(steps, max_points)
    rows = []
    for s in drawn:
        for path, norm in s["grad_norms"].items():
            value = _finite(norm)
            if value is None or value <= 0:
                continue
            layer, part = layer_part(path)
            rows.append({"series": "norm", "step": s["step"], "value": value, "variable": path,
                         "layer": layer, "part": "bias" if part == "bias" else "kernel"})
    values = [r["value"] for r in rows]
    if values:
        lo, hi = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)))
        lo = min(lo, hi - MIN_DECADES)
        rows += [{"series": "span", "step": drawn[0]["step"], "value": 10.0 ** k} for k in (lo, hi)]
    for step, kinds in warning_marks(warnings or []):
        rows.append({"series": "warning", "step": step, "kind": worst_kind(kinds),
                     "message": "; ".join(f"{k}: {', '.join(v)}" for k, v in kinds.items())})
    return rows


WAITING = "waiting for the first records…"


def waiting_layer() -> dict:
    """A grey note in the plot's middle, drawn from a row {"series": "waiting"}."""
    return {"transform": [{"filter": "datum.series == 'waiting'"}],
            "mark": {"type": "text", "fontSize": 16, "color": "#777777",
                     "x": {"expr": "width / 2"}, "y": {"expr": "height / 2"}},
            "encoding": {"text": {"field": "label"}}}


def accuracy_spec(height: Optional[int] = 300) -> dict:
    """Held-out accuracy at every evaluation, each epoch's end a labelled diamond; the rows
    come from `accuracy_rows`."""
    spec = base_spec("Held-out accuracy", height)
    y = {"field": "accuracy", "type": "quantitative", "title": "accuracy",
         "scale": {"domain": [0, 1]}, "axis": {"format": ".0%"}}
    tip = [_STEP_FIELD, {"field": "accuracy", "format": ".1%"}]
    epoch = [{"filter": "datum.series == 'epoch'"}]
    spec["layer"] = [
        {"transform": [{"filter": "datum.series == 'eval'"}],
         "mark": {"type": "line", "point": True, "color": SMOOTH},
         "encoding": {"x": _STEP, "y": y, "tooltip": tip}},
        {"transform": epoch, "mark": {"type": "point", "shape": "diamond", "size": 170,
                                      "filled": True, "color": EPOCH, "opacity": 1},
         "encoding": {"x": _STEP, "y": y, "tooltip": tip}},
        # Left of and below its point: the last epoch ends at the axis' right edge
        {"transform": epoch, "mark": {"type": "text", "align": "right", "dx": -10, "dy": 16,
                                      "fontSize": 15, "color": EPOCH},
         "encoding": {"x": _STEP, "y": y, "text": {"field": "label"}}},
        waiting_layer()]
    return spec


def accuracy_rows(evals: list) -> list:
    if not evals:
        return [{"series": "waiting", "label": WAITING}]
    rows = [{"series": "eval", "step": e["step"], "accuracy": e["accuracy"]} for e in evals]
    rows += [{"series": "epoch", "step": e["step"], "accuracy": e["accuracy"],
              "label": f"epoch {e['epoch']}: {e['accuracy']:.1%}"}
             for e in evals if e.get("epoch_end")]
    return rows
