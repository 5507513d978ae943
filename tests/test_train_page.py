"""The training page through streamlit.testing: start, live steps, stop and resume with the
history kept, reset, one run per session, "Inspect this step", and no TensorFlow in the
Streamlit process. Real workers train on real digits; runs are kept small."""
import os
import pathlib
import sys
import time

import pytest
from streamlit.testing.v1 import AppTest

from tapeviz.state import debugger

pytestmark = pytest.mark.slow   # every training run here is a real worker

ROOT = pathlib.Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
SHARED_MNIST = ROOT.parent / "shared" / "data" / "mnist"
TIMEOUT = 120      # a cold worker imports TensorFlow first; on a busy 2-core machine that is slow
if SHARED_MNIST.is_dir():   # before any worker starts: workers inherit the environment
    os.environ.setdefault("TAPEVIZ_MNIST_DIR", str(SHARED_MNIST))


def training_page(epochs=5):
    """The page with a small run set up: 2,000 digits, batches of 16 (100 steps an epoch)."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.switch_page("pages/train.py").run()
    at.number_input(key="t_epochs").set_value(epochs)
    at.selectbox(key="t_batch").set_value(16)
    at.selectbox(key="t_digits").set_value(2000)
    at.selectbox(key="t_eval").set_value(25)
    return at.run()


def press(at, word):
    return next(b for b in at.button if word in b.label).click().run()


def button(at, word):
    return next(b for b in at.button if word in b.label)


def wait_for(at, condition, what, limit_s=TIMEOUT):
    """Rerun the page (as its live fragment would) until `condition(run)` holds."""
    deadline = time.monotonic() + limit_s
    while True:
        at.run()
        assert not at.exception, at.exception
        run = at.session_state["train_run"]
        if condition(run):
            # The run's own thread fills it in the background: draw the page once more so
            # that what it shows includes what the condition saw.
            at.run()
            assert not at.exception, at.exception
            return at.session_state["train_run"]
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what}: status {run.status}, {len(run.steps)} steps, "
                        f"error {run.error}")
        time.sleep(0.3)


def test_start_steps_stop_resume_reset():
    tf_before = "tensorflow" in sys.modules
    at = training_page()
    assert not at.exception
    assert "press **Start**" in "".join(i.value for i in at.info)
    # The demo's default learns within a minute (test_training: > 80% held-out after 200
    # steps); the guide's CNN is the other choice, with its note.
    assert at.selectbox(key="t_model").value == "lenet"
    assert any("guide" in option.lower() for option in at.selectbox(key="t_model").options)
    press(at, "Start")
    run = wait_for(at, lambda r: len(r.steps) >= 5, "five steps")
    assert run.start["source"] and "Data:" in "".join(c.value for c in at.caption)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Step"] != "0" and metrics["Steps/s"] != "—" and "/ 5" in metrics["Epoch"]
    # the loss, the gradient norms, accuracy, predictions, the gradients' and the
    # activations' histograms: all drawn in place
    assert len(at.get("vega_lite_chart")) == 6 and not at.get("plotly_chart")

    press(at, "Stop")
    run = wait_for(at, lambda r: r.status == "paused", "the pause")
    assert button(at, "Resume").disabled is False and button(at, "Stop").disabled is True
    time.sleep(1.0)
    at.run()
    kept = [s["step"] for s in run.steps]
    assert kept == list(range(1, len(kept) + 1))

    press(at, "Resume")
    run = wait_for(at, lambda r: len(r.steps) > len(kept) + 5, "steps after resuming")
    assert [s["step"] for s in run.steps[:len(kept)]] == kept       # the history survived
    assert run.steps[len(kept)]["step"] == len(kept) + 1            # and it carried on from there

    press(at, "Reset")
    assert not at.exception
    assert "train_run" not in at.session_state
    assert "press **Start**" in "".join(i.value for i in at.info)
    assert run.job.done                                                # its worker is gone
    if not tf_before:
        assert "tensorflow" not in sys.modules, "the Streamlit side imported TensorFlow"


def test_a_run_is_submitted_with_its_browsers_client_id():
    """The fair share of a browser's tabs (server/queues.py) counts training runs too. AppTest
    has no browser (session.client_id() is None there), so the page's runner is given one."""
    from tapeviz.state import training_run
    at = press(training_page(epochs=1), "Start")
    page_run = wait_for(at, lambda r: r.job is not None, "the page's job")
    run = training_run.Run(page_run._runner, page_run.config, "another-tab", client="browser-1")
    deadline = time.monotonic() + TIMEOUT
    while run.job is None and run.failed is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert run.failed is None and run.job.client == "browser-1" and run.job.owner == "another-tab"
    run.cancel()
    press(at, "Reset")


def test_two_sessions_have_their_own_runs():
    first, second = training_page(), training_page()
    press(first, "Start")
    wait_for(first, lambda r: len(r.steps) >= 1, "the first session's steps")
    assert "train_run" not in second.session_state        # nothing leaks into the other tab
    press(second, "Start")
    a, b = first.session_state["train_run"], second.session_state["train_run"]
    assert a is not b and a.job is not b.job
    # The runner trains one job at a time by default: the second waits its turn, and says so.
    if b.job is None:
        wait_for(second, lambda r: r.status == "queued" or r.steps, "the queue place")
        if b.status == "queued":
            assert "in line" in "".join(m.value for m in second.markdown)
    press(first, "Reset")
    b = wait_for(second, lambda r: len(r.steps) >= 3, "the second session's steps")
    assert a.job.done and not b.job.done
    assert all(s["step"] <= len(b.steps) for s in b.steps)
    press(second, "Reset")


def test_inspect_this_step_opens_the_debugger_on_the_recorded_step():
    at = training_page(epochs=1)
    press(at, "Start")
    run = wait_for(at, lambda r: r.start is not None, "the start record")
    program = run.start["step_program"]
    live = not run.job.done
    press(at, "Inspect this step")
    assert not at.exception, at.exception
    if live and run.snapshot is None:
        # A one-epoch run on a loaded machine can end between the check and the press: the
        # page then opens the start's step, as for a run that was over.
        assert run.job.done
        live = False
    if live:     # the step the run takes next: its weights, Adam's state and batch
        assert run.snapshot is not None and "error" not in run.snapshot
        assert at.session_state[debugger.KEY].source == run.snapshot["step_program"]
        assert "np.load" in at.session_state[debugger.KEY].source
        assert not at.error, [e.value for e in at.error]
    else:
        assert at.session_state[debugger.KEY].source == program
    shown = at.selectbox(key="view").value                  # the step's gradient flow
    assert shown.startswith("call:") and shown.endswith(":0"), shown
    assert at.toggle(key="group").value is True             # grouped by layer
    assert at.get("plotly_chart")
    at.session_state["train_run"].cancel()


def test_speed_and_eta_from_the_step_records():
    from tapeviz.state import training_run

    steps = [{"step": i, "elapsed_s": 0.5 + 0.1 * i, "steps_per_s": 1.0, "total_steps": 100}
             for i in range(1, 41)]
    assert training_run.recent_rate(steps) == pytest.approx(10.0)
    assert training_run.steady_rate(steps) == pytest.approx(10.0)
    assert training_run.steady_rate(steps[:4]) is None
    assert len(training_run.thin(list(range(10_000)), 1000)) <= 1001
    assert training_run.thin(list(range(10_000)), 1000)[-1] == 9_999
    assert training_run.duration(75) == "1:15 min" and training_run.duration(None) == "—"
    text = training_run.warning_text({"kind": "vanishing", "layer": "guide/conv1", "step": 120,
                                     "message": "gradient norm of guide/conv1/kernel fell"})
    assert "guide/conv1" in text and "step 120" in text


def test_only_the_newest_step_snapshots_stay_on_disk():
    # Each "Inspect this step" press saves weights, Adam's state and a batch (about a
    # megabyte): a practitioner pressing it all afternoon must not fill /tmp
    from tapeviz.state import training_run
    made = []
    for _ in range(training_run.KEEP_SNAPSHOTS + 3):
        made.append(training_run.snapshot_folder())
        pathlib.Path(made[-1], "step.npz").write_bytes(b"saved by the training worker")
    assert all(os.path.isfile(os.path.join(f, "step.npz"))
               for f in made[-training_run.KEEP_SNAPSHOTS:])
    assert not any(os.path.exists(f) for f in made[:3])
