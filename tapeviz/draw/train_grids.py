"""The training page's two grids as Vega-Lite, the way train_vega.py draws its lines: a
spec that stays the same for a run and rows that change, so an update is drawn in place
rather than remounted blank. The held-out digits with their predictions, and each
variable's gradient values over the steps as a heat strip. TF-free.
"""
from __future__ import annotations

import math
from typing import Optional

from .. import metrics
from .train_figures import RIGHT, WRONG, power_of_ten
from .train_vega import WAITING, base_spec, every_kth, power_labels, waiting_layer

SIDE = 28                 # an MNIST digit's pixels a side
CELL = SIDE + 4           # a digit and the gap after it, in pixels of the digit
LABEL = 9                 # the "7 ✓" line above each digit, in the same units
TOP = 8                   # the "step 100: 3 of 16 wrong" line above them all
INK = 8                   # pixels fainter than this (of 255) are paper: not sent
PIXEL_PX = 3              # screen pixels per digit pixel: 16 digits about as tall as the
                          # accuracy chart beside them
COLUMNS = 4


def prediction_spec(count: int = metrics.PREDICTION_COUNT, columns: int = COLUMNS) -> dict:
    """`count` digits in rows of `columns`, each under the class the model predicted, grey
    with a ✓ when right, orange with a ✗ and the true class when wrong; the rows come from
    `prediction_rows`. Drawn at its own size: a stretched grid would squash the digits."""
    rows = math.ceil(count / columns)
    width, height = columns * CELL, TOP + rows * (LABEL + CELL)
    spec = base_spec("Predictions: the model's answer, held-out digits", None)
    spec.update(width=width * PIXEL_PX, height=height * PIXEL_PX)
    x = {"type": "quantitative", "scale": {"domain": [0, width]}, "axis": None}
    y = {"type": "quantitative", "scale": {"domain": [0, height], "reverse": True}, "axis": None}
    ink = {"field": "ink", "type": "quantitative", "legend": None,
           "scale": {"scheme": "greys", "domain": [0, 255]}}
    spec["layer"] = [
        # Outlined in their own shade: abutting rects left hairlines of paper between them
        {"transform": [{"filter": "datum.series == 'pixel'"}],
         "mark": {"type": "rect", "strokeWidth": 0.75},
         "encoding": {"x": {**x, "field": "x"}, "x2": {"field": "x2"},
                      "y": {**y, "field": "y"}, "y2": {"field": "y2"},
                      "fill": ink, "stroke": ink}},
        {"transform": [{"filter": "datum.series == 'label'"}],
         "mark": {"type": "text", "fontSize": 14, "baseline": "bottom"},
         "encoding": {"x": {**x, "field": "x"}, "y": {**y, "field": "y"},
                      "text": {"field": "label"},
                      "color": {"condition": {"test": "datum.right", "value": RIGHT},
                                "value": WRONG}}},
        {"transform": [{"filter": "datum.series == 'summary'"}],
         "mark": {"type": "text", "fontSize": 15, "align": "left", "baseline": "top",
                  "x": 0, "y": 0},
         "encoding": {"text": {"field": "label"}}},
        waiting_layer()]
    return spec


def prediction_rows(predictions: Optional[dict], columns: int = COLUMNS) -> list:
    """Rows for `prediction_spec`: a rect per inked pixel (a digit is mostly paper), a
    label per digit and the summary line."""
    if not predictions or not predictions.get("images"):
        return [{"series": "waiting", "label": WAITING}]
    images, true, pred = predictions["images"], predictions["true"], predictions["pred"]
    wrong = sum(p != t for p, t in zip(pred, true))
    out = [{"series": "summary", "label": f"step {predictions.get('step')}: "
                                          f"{wrong} of {len(images)} wrong"}]
    for i, (image, t, p) in enumerate(zip(images, true, pred)):
        left, top = (i % columns) * CELL, TOP + (i // columns) * (LABEL + CELL) + LABEL
        out.append({"series": "label", "x": left + SIDE / 2, "y": top - 1, "right": p == t,
                    "label": f"{p} ✓" if p == t else f"{p} ✗ true {t}"})
        for r, line in enumerate(image):
            for c, ink in enumerate(line):
                if ink >= INK:
                    out.append({"series": "pixel", "x": left + c, "x2": left + c + 1,
                                "y": top + r, "y2": top + r + 1, "ink": int(ink)})
    return out


MAX_COLUMNS = 120          # heat-strip columns: past that every k-th histogram is drawn
MAX_STRIPS = 16            # variables given a strip on the run view (a page, not a wall)
STRIP_PX = 46              # a variable's strip
# log10 |gradient| ticked at every other decade that falls inside a strip's own span
TICKS = tuple(range(-10, 3, 2))


def _edges() -> list:
    """(low, high) in log10 |value| of each fixed bin (metrics.HIST_EDGES_LOG10); the two
    open-ended bins are given half a decade, so that they can be drawn."""
    edges = list(metrics.HIST_EDGES_LOG10)
    return ([(edges[0] - 0.5, edges[0])] + list(zip(edges[:-1], edges[1:]))
            + [(edges[-1], edges[-1] + 0.5)])


GRADIENTS, ACTIVATIONS = "grad_hist", "act_hist"     # a step's histograms (metrics.Step)
ACTIVATIONS_TITLE = "Activations per layer over the steps (|output| on the step's batch, share per bin)"


def histogram_paths(steps: list, field: str = GRADIENTS) -> list:
    """The variables (or, for ACTIVATIONS, the layers) the newest histogram covers, each
    layer's kernel before its bias: the strips of `histogram_spec`, fixed for a run."""
    latest = next((s[field] for s in reversed(steps) if s.get(field)), {})
    if field == ACTIVATIONS:
        return list(latest)                    # the model's own order, input to output
    return sorted(latest, key=lambda p: (p.rpartition("/")[0], p.rpartition("/")[2] != "kernel"))


def histogram_spec(paths: list, title: str = "Gradient values per layer over the steps "
                                             "(|value|, share per bin)",
                   what: str = "|gradient|") -> dict:
    """A strip per variable of `paths`: a column per histogram's steps, a row per fixed
    bin of |gradient|, shaded by the share of the variable's values in it. The rows come
    from `histogram_rows`."""
    if not paths:
        spec = base_spec(title, 120)
        spec["layer"] = [waiting_layer()]
        return spec
    strips = []
    for n, path in enumerate(paths):
        last = n == len(paths) - 1
        strips.append({
            "title": {"text": path, "fontSize": 14, "anchor": "start", "offset": 2},
            "height": STRIP_PX, "transform": [{"filter": {"field": "variable", "equal": path}}],
            "mark": {"type": "rect"},
            "encoding": {
                "x": {"field": "x", "type": "quantitative", "title": "step" if last else None,
                      "scale": {"nice": False},
                      "axis": {"tickMinStep": 1, "format": "d", "labels": last,
                               "ticks": last}},
                "x2": {"field": "x2"},
                "y": {"field": "lo", "type": "quantitative", "title": None,
                      # each strip spans the bins its variable filled: over all 26 a
                      # layer's values were a hairline on a projector
                      "scale": {"zero": False, "nice": False},
                      # one width for every strip's axis, "10⁰" or "10⁻¹⁰": the strips'
                      # steps line up
                      "axis": {"values": list(TICKS), "labelExpr": power_labels(TICKS, "datum.value", power_of_ten),
                               "labelFontSize": 12, "minExtent": 40, "maxExtent": 40}},
                "y2": {"field": "hi"},
                "color": {"field": "share", "type": "quantitative", "legend": None,
                          "scale": {"scheme": "blues", "domain": [0, 0.5], "clamp": True}},
                "tooltip": [{"field": "variable"}, {"field": "step", "title": "step"},
                            {"field": "bin", "title": what},
                            {"field": "share", "format": ".0%", "title": "of its values"}]}})
    spec = base_spec(title, None)
    spec.update(vconcat=strips, spacing=6,
                resolve={"scale": {"x": "shared", "y": "independent", "color": "shared"}})
    return spec


def histogram_rows(steps: list, paths: list, max_columns: int = MAX_COLUMNS,
                   field: str = GRADIENTS) -> list:
    """Rows for `histogram_spec`: a rect per (histogram, variable, bin holding any value),
    a histogram's column running to the next one drawn; past `max_columns` every k-th
    histogram (and the newest) is drawn, so an update stays small."""
    drawn = every_kth([s for s in steps if s.get(field)], max_columns)
    edges = _edges()
    names = ([f"below 10^{edges[0][1]:g} (zero too)"] + [f"10^{a:g} to 10^{b:g}" for a, b in edges[1:-1]]
             + [f"10^{edges[-1][0]:g} or above"])
    # each column runs to the next one drawn; the newest is as wide as the one before it
    starts = [s["step"] for s in drawn]
    ends = starts[1:] + [2 * starts[-1] - starts[-2] if len(starts) > 1 else starts[-1] + 1] \
        if starts else []
    rows = []
    for s, end in zip(drawn, ends):
        x2 = max(end, s["step"] + 1)
        for path in paths:
            counts = s[field].get(path)
            total = sum(counts) if counts else 0
            for b, count in enumerate(counts or ()):
                if count:
                    rows.append({"variable": path, "step": s["step"], "x": s["step"], "x2": x2,
                                 "lo": edges[b][0], "hi": edges[b][1], "bin": names[b],
                                 "share": round(count / total, 4)})
    return rows
