"""The training page's loss chart as Vega-Lite: a spec that stays the same for a run and
rows of plain data that grow. Streamlit keys a Vega-Lite chart
by its key alone and feeds it new rows in place, where a plotly chart is keyed by its whole
figure and remounts, blank, on every update. TF-free; the page passes the rows on.
"""
from __future__ import annotations

import math
from typing import Optional

from .train_figures import RAW, SMOOTH, ema

POWERS = list(range(-12, 5))      # log axes are ticked at these powers of ten only
_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def _power_labels() -> str:
    """A Vega expression writing a tick 10^k as "10⁻³" (no "2, 10⁻¹, 5" mixed in)."""
    expr = "''"
    for k in reversed(POWERS):
        label = "1" if k == 0 else "10" if k == 1 else "10" + str(k).translate(_SUPERSCRIPT)
        expr = f"round(log(datum.value) / LN10) == {k} ? '{label}' : {expr}"
    return expr


def _log_axis(title: str) -> dict:
    return {"type": "quantitative", "title": title, "scale": {"type": "log"},
            "axis": {"values": [10.0 ** k for k in POWERS], "labelExpr": _power_labels(),
                     "grid": True}}


def _base(title: str, height: int) -> dict:
    return {"$schema": "https://vega.github.io/schema/vega-lite/v5.json", "title": title,
            "height": height, "config": {"font": "sans-serif", "axis": {"labelFontSize": 15,
                                         "titleFontSize": 16}, "legend": {"labelFontSize": 15,
                                         "orient": "bottom", "title": None},
                                         "title": {"fontSize": 17, "anchor": "start"}}}


def loss_spec(log: bool = False, height: int = 300) -> dict:
    """Loss per step, raw and smoothed; the rows come from `loss_rows`."""
    y = _log_axis("loss (log)") if log else {"type": "quantitative", "title": "loss"}
    spec = _base("Training loss", height)
    spec.update({"mark": {"type": "line", "clip": True},
                 "encoding": {"x": {"field": "step", "type": "quantitative", "title": "step"},
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
