"""Training-page figures from plain metrics records, without TensorFlow."""

import math

import pytest

from tapeviz import metrics

from tapeviz.draw import train_figures

PATHS = ["m/conv1/kernel", "m/conv1/bias", "m/logits/kernel", "m/logits/bias"]


def steps(n=30):
    return [{"type": "step", "step": i, "epoch": 1, "loss": 2.3 / i,
             "grad_norms": {p: 1.0 / i for p in PATHS}, "steps_per_s": 20.0} for i in range(1, n + 1)]


def test_ema_is_debiased_and_skips_non_finite():
    assert train_figures.ema([4.0, 4.0]) == pytest.approx([4.0, 4.0])  # no pull towards 0 at the start
    smoothed = train_figures.ema([1.0, float("nan"), 3.0], smoothing=0.5)
    assert smoothed[1] is None and 1.0 < smoothed[2] < 3.0


def test_loss_figure_has_raw_and_smoothed_lines():
    fig = train_figures.loss_figure(steps())
    assert [len(t.x) for t in fig.data] == [30, 30]
    assert fig.data[1].y[-1] > fig.data[0].y[-1]  # the average lags a falling loss


def test_grad_norms_one_line_per_variable_on_a_log_axis():
    records = steps()
    records[5]["grad_norms"]["m/conv1/kernel"] = 0.0
    records[6]["grad_norms"]["m/conv1/bias"] = float("nan")
    warning = {"type": "warning", "step": 7, "layer": "m/conv1", "kind": "nan", "message": "..."}
    fig = train_figures.grad_norm_figure(records, [warning])
    # one legend entry per layer, less the model's name; the bias toggles with its kernel
    assert [t.name for t in fig.data] == ["conv1", "conv1 bias", "logits", "logits bias"]
    assert [t.showlegend for t in fig.data] == [True, False, True, False]
    assert fig.data[0].legendgroup == fig.data[1].legendgroup == "conv1"
    assert all(p in t.hovertemplate for p, t in zip(PATHS, fig.data))
    assert fig.layout.yaxis.type == "log"
    assert fig.data[0].y[5] is None and fig.data[1].y[6] is None  # gaps, not log(0)
    assert any("nan" in a.text for a in fig.layout.annotations)


def test_warnings_of_one_step_share_one_mark_and_each_layer_is_listed_once():
    # Step 11 of a run at learning rate 1.0: three layers vanish at once, then again later.
    warnings = [{"type": "warning", "step": s, "layer": layer, "kind": "vanishing", "message": "..."}
                for s in (11, 12) for layer in ("conv2d", "conv2d_1", "dense")]
    warnings.append({"type": "warning", "step": 11, "layer": None, "kind": "nan", "message": "..."})
    fig = train_figures.grad_norm_figure(steps(), warnings)
    texts = [a.text for a in fig.layout.annotations]
    assert len(texts) == 1                               # one mark at step 11, none at 12
    assert texts[0].count("conv2d_1") == 1 and "nan: loss" in texts[0]
    assert train_figures.warning_marks(warnings) == [
        (11, {"vanishing": ["conv2d", "conv2d_1", "dense"], "nan": ["loss"]})]


def test_loss_on_a_log_axis_on_request():
    assert train_figures.loss_figure(steps()).layout.yaxis.type != "log"
    assert train_figures.loss_figure(steps(), log=True).layout.yaxis.type == "log"


def test_log_axes_tick_only_at_powers_of_ten_over_at_least_two_decades():
    narrow = steps()                                     # norms 0.11 .. 0.4: half a decade
    for record in narrow:
        record["grad_norms"] = {p: 0.1 + 0.01 * record["step"] for p in PATHS}
    axis = train_figures.grad_norm_figure(narrow).layout.yaxis
    # one tick per power of ten (never plotly's "2, 10⁻¹, 5, 2"), and at least three of them
    assert axis.type == "log" and axis.dtick == 1 and axis.exponentformat == "power"
    lo, hi = axis.range
    assert hi - lo >= 2 and lo <= math.log10(0.11) and hi >= math.log10(0.4)
    wide = steps()
    wide[0]["grad_norms"] = {p: 1e-6 for p in PATHS}
    lo, hi = train_figures.grad_norm_figure(wide).layout.yaxis.range
    assert lo <= -6 and hi >= 0
    loss = train_figures.loss_figure(steps(), log=True).layout.yaxis
    assert loss.dtick == 1 and loss.range[1] - loss.range[0] >= 2


def test_the_page_lists_each_layers_warning_once():
    from tapeviz.state import training_run
    warnings = [{"kind": "vanishing", "layer": layer, "step": s} for s in (11, 12, 13)
                for layer in ("conv2d", "dense")] + [{"kind": "exploding", "layer": "dense", "step": 14}]
    listed = training_run.first_per_layer(warnings)
    assert [(w["kind"], w["layer"], w["step"]) for w in listed] == [
        ("vanishing", "conv2d", 11), ("vanishing", "dense", 11), ("exploding", "dense", 14)]


def test_the_live_loss_chart_is_one_spec_with_growing_rows():
    from tapeviz.draw import train_vega
    records = steps()
    records[3]["loss"] = float("nan")
    rows = train_vega.loss_rows(records)
    raw = [r for r in rows if r["series"] == "loss per step"]
    assert [r["step"] for r in raw] == [s["step"] for s in records if s["step"] != 4]   # a gap
    smooth = [r["value"] for r in rows if r["series"].startswith("smoothed")]
    assert smooth == [v for v in train_figures.ema([s["loss"] for s in records]) if v is not None]
    # the spec holds no data: the same for every update, so the chart is never remounted
    assert train_vega.loss_spec() == train_vega.loss_spec() and "data" not in train_vega.loss_spec()
    axis = train_vega.loss_spec(log=True)["encoding"]["y"]
    assert axis["scale"]["type"] == "log" and all(v == 10.0 ** k for v, k in
                                                  zip(axis["axis"]["values"], train_vega.POWERS))
    assert "'10⁻³'" in axis["axis"]["labelExpr"]


def test_the_live_norm_chart_draws_each_norm_once_and_spans_two_decades():
    from tapeviz.draw import train_vega
    records = [{"step": n, "grad_norms": {"dense/kernel": 0.5, "dense/bias": 0.0 if n == 3 else 0.25}}
               for n in range(1, 11)]
    warnings = [{"kind": "dead", "layer": "dense", "step": 7, "message": "..."}]
    rows = train_vega.norm_rows(records, warnings)
    norms = [r for r in rows if r["series"] == "norm"]
    # every step's norm, kernel and bias named by layer; the zero left off the log axis
    assert len(norms) == 19 and not any(r["step"] == 3 and r["part"] == "bias" for r in norms)
    assert {r["layer"] for r in norms} == {"dense"} and {r["part"] for r in norms} == {"kernel", "bias"}
    # a domain of whole decades, at least two, around 0.25-0.5; the dead layer's rule
    assert sorted(r["value"] for r in rows if r["series"] == "span") == [0.01, 1.0]
    assert [(r["step"], r["kind"]) for r in rows if r["series"] == "warning"] == [(7, "dead")]
    # past max_points every k-th step and the newest are drawn
    thinned = train_vega.norm_rows(records, max_points=3)
    assert sorted({r["step"] for r in thinned if r["series"] == "norm"}) == [1, 5, 9, 10]
    assert train_vega.norm_spec(None) == train_vega.norm_spec(None) and "height" not in train_vega.norm_spec(None)


def test_the_live_specs_are_valid_vega_lite():
    """Vega-Lite draws nothing for a spec it rejects: each is checked against its schema
    (Altair's, which Streamlit installs)."""
    import altair
    from tapeviz.draw import train_vega
    from tapeviz.draw import train_grids
    for spec in (train_vega.loss_spec(), train_vega.loss_spec(log=True, height=None),
                 train_vega.norm_spec(), train_vega.norm_spec(None), train_vega.accuracy_spec(None),
                 train_grids.prediction_spec(), train_grids.histogram_spec([]),
                 train_grids.histogram_spec(PATHS)):
        altair.Chart.from_dict({**spec, "data": {"values": []}}, validate=True)


def test_the_live_accuracy_chart_marks_epoch_ends_and_waits_for_its_first_evaluation():
    from tapeviz.draw import train_vega
    evals = [{"type": "eval", "step": s, "epoch": e, "accuracy": a, "loss": 1.0, "epoch_end": end}
             for s, e, a, end in ((50, 1, 0.5, False), (100, 1, 0.8, True), (150, 2, 0.9, False))]
    rows = train_vega.accuracy_rows(evals)
    assert [(r["step"], r["accuracy"]) for r in rows if r["series"] == "eval"] == [
        (50, 0.5), (100, 0.8), (150, 0.9)]
    assert [r["label"] for r in rows if r["series"] == "epoch"] == ["epoch 1: 80.0%"]
    assert train_vega.accuracy_rows([]) == [{"series": "waiting", "label": train_vega.WAITING}]
    assert train_vega.accuracy_spec(None) == train_vega.accuracy_spec(None)


def test_the_live_prediction_grid_draws_each_inked_pixel_and_marks_wrong_answers():
    from tapeviz.draw import train_grids
    image = [[0] * 28 for _ in range(28)]
    image[3][5], image[27][27] = 255, 40
    record = {"type": "predictions", "step": 10, "images": [image] * 16,
              "true": list(range(10)) + [0] * 6, "pred": [0] * 16}
    rows = train_grids.prediction_rows(record)
    (summary,) = [r for r in rows if r["series"] == "summary"]
    assert summary["label"] == "step 10: 9 of 16 wrong"
    labels = [r for r in rows if r["series"] == "label"]
    assert [r["label"] for r in labels[:2]] == ["0 ✓", "0 ✗ true 1"]
    assert [r["right"] for r in labels] == [True] + [False] * 9 + [True] * 6
    pixels = [r for r in rows if r["series"] == "pixel"]
    assert len(pixels) == 32 and {r["ink"] for r in pixels} == {255, 40}   # paper not sent
    # the second digit sits one cell right of the first, its pixel at the same place in it
    first, second = pixels[0], pixels[2]
    assert second["x"] - first["x"] == train_grids.CELL and second["y"] == first["y"]
    assert first["x2"] - first["x"] == 1 and first["y2"] - first["y"] == 1
    assert train_grids.prediction_rows(None)[0]["series"] == "waiting"


def test_the_live_histograms_are_a_strip_per_variable_with_each_bins_share():
    from tapeviz.draw import train_grids
    records = []
    for step in (1, 5, 10):
        hist = {}
        for i, path in enumerate(PATHS):
            counts = [0] * metrics.HIST_BINS
            counts[10 + i] = 3 * step           # three quarters of a variable's values in one bin
            counts[0] = step                    # and a quarter below 10^-10 (zeros)
            hist[path] = counts
        records.append({"step": step, "grad_hist": hist})
    records.insert(1, {"step": 2})              # a step without histograms is left out
    paths = train_grids.histogram_paths(records)
    assert paths == ["m/conv1/kernel", "m/conv1/bias", "m/logits/kernel", "m/logits/bias"]
    rows = train_grids.histogram_rows(records, paths)
    assert len(rows) == 3 * len(PATHS) * 2      # only bins that hold values are sent
    kernel = [r for r in rows if r["variable"] == "m/conv1/kernel"]
    assert [(r["x"], r["x2"], r["share"]) for r in kernel if r["lo"] >= -10] == [
        (1, 5, 0.75), (5, 10, 0.75), (10, 15, 0.75)]
    zeros = [r for r in kernel if r["lo"] < -10]
    assert {r["share"] for r in zeros} == {0.25} and zeros[0]["bin"].startswith("below 10^-10")
    spec = train_grids.histogram_spec(paths)
    assert [strip["title"]["text"] for strip in spec["vconcat"]] == paths
    thinned = train_grids.histogram_rows(records, paths, max_columns=2)
    assert sorted({r["x"] for r in thinned}) == [1, 10]
