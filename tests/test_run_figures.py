"""The run view drawn from a recording's per-call summaries (Recording.steps). No TF."""
import math

import tapeviz
from tapeviz.draw import run_figures
from tapeviz.gradient_watch import EARLY_STEPS
from tapeviz.recording import CallSummary, Recording, StepSource


def recording(n=40, collapse_at=25):
    """A loop's summaries: loss 1/step at line 9 (kernel and bias of dense, kernel of a
    layer that never gets a gradient), and an evaluation call at line 20 every 10 steps."""
    sources = [StepSource(1, "kernel", "dense/kernel", "dense"),
               StepSource(2, "bias", "dense/bias", "dense"),
               StepSource(3, None, "frozen/kernel", "frozen")]
    steps, call = [], 0
    for step in range(1, n + 1):
        kernel = 1e-6 if step >= collapse_at else 1.0 + 0.01 * step
        steps.append(CallSummary(call, call, 0, "gradient", 9, "loop.py", 1.0 / step, True,
                                 [0, 1, 2], [kernel, 0.5, None], none=[[2, "no path"]]))
        call += 1
        if step % 10 == 0:
            steps.append(CallSummary(call, call, 0, "gradient", 20, "loop.py", 7.0, True,
                                     [0], [2.0]))
            call += 1
    return Recording(source="", steps=steps, step_sources=sources)


def test_the_most_frequent_call_site_is_the_step_and_its_losses_are_charted():
    rec = recording()
    assert run_figures.call_sites(rec) == [("loop.py", 9), ("loop.py", 20)]
    steps = run_figures.site_steps(rec)
    assert [s["step"] for s in steps] == list(range(1, 41))
    assert [s["loss"] for s in steps] == [1.0 / k for k in range(1, 41)]
    fig = run_figures.run_figure(rec)
    raw = next(t for t in fig.data if t.name == "loss per step")
    assert list(raw.y) == [1.0 / k for k in range(1, 41)]
    assert fig.layout.yaxis2.type == "log"


def test_vanishing_and_dead_layers_are_marked_as_the_training_page_marks_them():
    rec = recording()
    warnings = run_figures.judge(run_figures.site_steps(rec))
    kinds = {(w["layer"], w["kind"]) for w in warnings}
    assert ("dense", "vanishing") in kinds and ("frozen", "dead") in kinds
    assert not any(w["layer"] == "dense" and w["kind"] == "dead" for w in warnings), \
        "the bias still gets gradients: dense is not dead"
    vanishing = next(w for w in warnings if w["kind"] == "vanishing")
    assert vanishing["step"] == 25
    fig = run_figures.run_figure(rec)
    notes = " ".join(a.text for a in fig.layout.annotations if a.text)
    assert "vanishing: dense" in notes and "dead: frozen" in notes
    # a healthy dense layer: only the frozen one is marked
    healthy = run_figures.judge(run_figures.site_steps(recording(collapse_at=10**9)))
    assert [(w["layer"], w["kind"]) for w in healthy] == [("frozen", "dead")]


def test_figure_view_run_from_a_recordings_json_form():
    rec = recording(n=EARLY_STEPS + 2)
    fig = tapeviz.figure(rec.to_dict(), view="run")
    # a layer's kernel is charted under the layer's name, its bias as "<layer> bias"
    norms = {t.name: list(t.y) for t in fig.data if t.name}
    assert norms["dense"][0] == 1.01
    # None (no gradient) is drawn as a gap on the log axis, not as a number
    assert all(v is None for v in norms["frozen"])
    assert "12 gradient calls at loop.py line 9" in fig.layout.title.text
    assert not math.isnan(fig.data[0].y[-1])


def test_the_title_counts_the_calls_charted_and_the_run_s_others():
    rec = recording(n=10)           # ten steps at line 9, one evaluation at line 20
    assert run_figures.run_figure(rec).layout.title.text.startswith(
        "the run: 10 gradient calls at loop.py line 9 (11 in the run)")
    one = run_figures.run_figure(rec, site=("loop.py", 20)).layout.title.text
    assert one.startswith("the run: 1 gradient call at loop.py line 20 (11 in the run)"), one
