"""Every tenth gradient call's summary bins each gradient's values (CallSummary.hist) in the
training stream's fixed bins, read against plain TensorFlow's gradients of the same program
and against NumPy's own histogram; the oldest go past their bound; the gate checks them;
the run view draws them as the training page draws its own."""
import numpy as np
import pytest

from tapeviz import metrics, recording_gate
from tapeviz.draw import run_figures, train_grids
from tapeviz.recording import STEP_HIST_EVERY, CallSummary, Recording, StepSource

LOOP = """
import tensorflow as tf
tf.random.set_seed(3)
w = tf.Variable(tf.random.normal([40, 16]), name="w")
b = tf.Variable(tf.zeros([16]), name="b")
frozen = tf.Variable(1.0)
grads = []
for step in range(STEPS):
    x = tf.random.normal([8, 40])
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.nn.relu(x @ w + b) ** 2)
    gw, gb, gf = tape.gradient(loss, [w, b, frozen])
    grads.append((gw.numpy(), gb.numpy()))
    w.assign_sub(0.1 * gw)
    b.assign_sub(0.1 * gb)
"""


def test_metrics_histogram_counts_as_numpys_histogram_over_the_same_edges():
    rng = np.random.default_rng(0)
    values = np.concatenate([rng.normal(0, 1e-3, 5000), np.zeros(300), -rng.exponential(50, 99),
                             [1e9, np.nan, np.inf]])
    counts = metrics.histogram(values.reshape(2, -1))       # any shape
    finite = np.abs(values[np.isfinite(values)])
    edges = np.concatenate([[0.0], 10.0 ** np.asarray(metrics.HIST_EDGES_LOG10), [np.inf]])
    reference, _ = np.histogram(finite, edges)
    # NumPy's bins hold [a, b); so do these, the last open: the same counts
    assert counts == reference.tolist() and len(counts) == metrics.HIST_BINS
    assert counts[0] == 300 and sum(counts) == len(values) - 2     # NaN and Inf left out


def test_every_tenth_call_bins_the_gradients_plain_tensorflow_returns():
    tf = pytest.importorskip("tensorflow")
    from tapeviz.worker import recorder
    source = LOOP.replace("STEPS", "25")
    plain = {"__name__": "__main__"}
    exec(compile(source, "plain.py", "exec"), plain)
    namespace = {}
    rec = recorder.record(source, timeout=None, namespace=namespace)
    assert rec.error is None and len(rec.steps) == 25
    binned = [s.call for s in rec.steps if s.hist]
    assert binned == list(range(0, 25, STEP_HIST_EVERY))
    for n in binned:
        gw, gb = plain["grads"][n]
        hist_w, hist_b, hist_frozen = rec.steps[n].hist
        assert hist_w == metrics.histogram(gw) and hist_b == metrics.histogram(gb)
        assert hist_frozen is None                          # its gradient is None
        assert sum(hist_w) == gw.size
    assert namespace["grads"][0][0].tolist() == plain["grads"][0][0].tolist()   # unchanged
    assert recording_gate.problem(rec.to_dict()) is None
    # the run view's records carry them under the variables' names
    steps = run_figures.site_steps(rec)
    assert [s["step"] for s in steps if "grad_hist" in s] == [n + 1 for n in binned]
    assert sorted(steps[0]["grad_hist"]) == ["b", "w"]


def test_the_oldest_histograms_go_past_their_bound_and_their_summaries_stay():
    pytest.importorskip("tensorflow")
    from tapeviz.worker.capture.steps import StepLog
    log = StepLog(max_hist=3 * metrics.HIST_BINS)
    for call in range(60):
        summary = CallSummary(call, 0, call, "gradient", 9, "loop.py", sources=[0],
                              hist=log.histograms(("loop.py", 9), [np.full(4, 0.5)]))
        log._keep(summary, [None])
    kept = [s.call for s in log.kept if s.hist]
    assert kept == [30, 40, 50] and len(log.kept) == 60
    assert log.hist_cells == 3 * metrics.HIST_BINS


def test_the_gate_refuses_a_histogram_of_the_wrong_shape():
    good = CallSummary(0, 0, 0, "gradient", sources=[0], norms=[1.0],
                       hist=[[0] * metrics.HIST_BINS])
    rec = Recording(source="", steps=[good], step_sources=[StepSource(1, "w", None, None)])
    assert recording_gate.problem(rec.to_dict()) is None
    for bad in ([[0] * 3], [[0.5] * metrics.HIST_BINS], ["many"]):
        d = rec.to_dict()
        d["steps"][0]["hist"] = bad
        assert "steps" in recording_gate.problem(d)


def test_the_run_views_strips_are_the_training_pages_of_the_same_counts():
    counts = [0] * metrics.HIST_BINS
    counts[12] = 4
    steps = [CallSummary(n, n, 0, "gradient", 9, "loop.py", 1.0, True, [0], [0.5],
                         hist=[counts] if n % 10 == 0 else []) for n in range(30)]
    rec = Recording(source="", steps=steps, step_sources=[StepSource(1, "w", "dense/kernel", "dense")])
    records = run_figures.site_steps(rec)
    paths = train_grids.histogram_paths(records)
    rows = train_grids.histogram_rows(records, paths)
    assert paths == ["dense/kernel"]
    assert [(r["x"], r["x2"], r["share"]) for r in rows] == [(1, 11, 1.0), (11, 21, 1.0), (21, 31, 1.0)]


def test_streamed_summaries_with_histograms_stay_within_the_small_message_cap():
    """A big model: 400 variables' histograms on every tenth of 2,000 calls. The worker's
    steps messages must each pass the server's channel (its shape and size checks)."""
    import json
    from tapeviz.recording import _plain
    from tapeviz.server import protocol
    from tapeviz.worker import step_stream
    counts = [7] * metrics.HIST_BINS
    summaries = [CallSummary(n, n, 0, "gradient", 9, "loop.py", 1.0, True, list(range(400)),
                             [0.5] * 400, hist=[counts] * 400 if n % 10 == 0 else [])
                 for n in range(2_000)]
    parts = step_stream._messages(summaries)
    assert [s.call for part in parts for s in part] == list(range(2_000))   # all, in order
    assert len(parts) > 1
    for part in parts:
        message = {"type": "steps", "steps": [_plain(s) for s in part], "step_sources": []}
        line = json.dumps(message).encode()
        assert len(line) < protocol.MAX_SMALL_MESSAGE
        assert protocol.shape_problem(json.loads(line)) is None


def test_two_alternating_calls_each_bin_every_tenth_of_their_own():
    """A GAN's discriminator and generator calls alternate: counted over the run, every
    tenth call would always be the discriminator's."""
    pytest.importorskip("tensorflow")
    from tapeviz.worker.capture.steps import StepLog
    log = StepLog()
    binned = {9: [], 12: []}
    for call in range(60):
        line = 9 if call % 2 == 0 else 12
        if log.histograms(("gan.py", line), [np.ones(3)]):
            binned[line].append(call)
    assert binned == {9: [0, 20, 40], 12: [1, 21, 41]}
