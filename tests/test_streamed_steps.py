"""Step summaries stream from the worker while the program runs (Steps events), and a run
cut short keeps every one: a real worker, a real loop, checked against plain TensorFlow."""
import pytest

from tapeviz.recording import as_float
from tapeviz.server import jobs, protocol, runner


@pytest.fixture(scope="module")
def pool():
    pool = runner.Runner(runner.Config(workers=1, warm=1))
    yield pool
    pool.close()


# A loop that catches the time limit's Timeout (a BaseException) and goes on: the worker is
# killed past the grace period, with no recording of its own.
STUBBORN = """
import time
import tensorflow as tf
w = tf.Variable(2.0)
losses = []
step = 0
while True:
    try:
        with tf.GradientTape() as tape:
            loss = (w * float(step % 7)) ** 2
        grad = tape.gradient(loss, w)
        losses.append(float(loss))
        step += 1
        time.sleep(0.002)
    except BaseException:
        pass
"""


@pytest.mark.slow   # a real worker
def test_summaries_stream_as_steps_events_and_a_killed_run_keeps_them(pool):
    job = pool.submit(jobs.Record(STUBBORN, timeout=3))
    events = list(job.stream())
    kinds = [type(e).__name__ for e in events]
    assert kinds[-2:] == ["Recorded", "Done"]
    streamed = [e for e in events if isinstance(e, jobs.Steps)]
    # streamed while it ran, not only at the end: several messages, each before Recorded
    assert len(streamed) >= 3
    assert kinds.index("Steps") < kinds.index("Recorded")
    steps = [s for e in streamed for s in e.steps]
    assert [s["call"] for s in steps] == list(range(len(steps)))   # none twice, none lost
    sources = [src for e in streamed for src in e.step_sources]
    assert len(sources) == 1                                      # w, named once
    # each summary is the step's loss and d loss / d w = 2 w x^2 ... as plain arithmetic
    for s in steps[:50]:
        x = float(s["call"] % 7)
        assert as_float(s["target"]) == pytest.approx((2.0 * x) ** 2)
        assert s["norms"][0] == pytest.approx(abs(2 * 2.0 * x * x), rel=1e-6)
    rec = job.result
    # past the limit the worker's watchdog sent the recording so far: every summary, the
    # steps kept whole among them (the first ones and the newest sampled)
    assert rec["error"]["type"] == "Timeout"
    assert "did not stop when asked; what it recorded until then was sent" in rec["error"]["message"]
    # the program ran on while the recording was built, so either may hold the newest few
    n = min(len(steps), len(rec["steps"]))
    assert n > len(steps) - 10 and rec["steps"][:n] == steps[:n]
    assert rec["step_sources"] == sources
    assert rec["cut_short"]["why"] == "timeout"
    kept = {t["id"] for t in rec["tapes"]}
    assert len(kept) > runner.KEEP_STEPS, "the first steps and newer ones, kept whole"
    assert {s["tape"] for s in rec["steps"][:runner.KEEP_STEPS]} <= kept


# A loop that kills its own worker (as a native crash would): nothing of it can answer, so
# only what the worker streamed survives
CRASH = """
import os, signal, time
import tensorflow as tf
w = tf.Variable(1.5)
for step in range(100_000):
    with tf.GradientTape() as tape:
        loss = w * w * float(step)
    tape.gradient(loss, w)
    time.sleep(0.001)
    if step == 1500:
        os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.slow   # a real worker
def test_a_worker_killed_outright_keeps_every_summary_it_streamed(pool):
    job = pool.submit(jobs.Record(CRASH, timeout=60))
    events = list(job.stream())
    streamed = [s for e in events if isinstance(e, jobs.Steps) for s in e.steps]
    rec = job.result
    assert rec["error"]["type"] == "WorkerCrash"
    assert rec["steps"] == streamed and rec["cut_short"]["why"] == "crashed"
    # all but the last half second's, at most, every one the plain arithmetic of its step
    assert 1000 < len(streamed) <= 1501
    assert [s["call"] for s in streamed] == list(range(len(streamed)))
    assert all(s["norms"][0] == pytest.approx(2 * 1.5 * s["call"]) for s in streamed)
    assert "step summaries streamed while it ran are kept" in rec["error"]["message"]


@pytest.mark.slow   # a real worker
def test_a_cancelled_run_keeps_its_summaries(pool):
    job = pool.submit(jobs.Record(STUBBORN, timeout=30))
    seen = []
    for event in job.stream():
        if isinstance(event, jobs.Steps):
            seen.extend(event.steps)
            if len(seen) >= 20:
                job.cancel()
    rec = job.result
    assert rec["error"]["type"] == "Cancelled"
    assert rec["cut_short"]["why"] == "cancelled"
    assert rec["steps"][:len(seen)] == seen and len(rec["steps"]) >= 20


@pytest.mark.slow   # a real worker
def test_a_run_that_ends_streams_its_last_summaries_before_its_recording(pool):
    source = ("import tensorflow as tf\nw = tf.Variable(3.0)\n"
              "for i in range(5):\n    with tf.GradientTape() as t:\n        y = w * w\n"
              "    g = t.gradient(y, w)\n")
    events = list(pool.submit(jobs.Record(source)).stream())
    steps = [s for e in events if isinstance(e, jobs.Steps) for s in e.steps]
    rec = [e for e in events if isinstance(e, jobs.Recorded)][0].data
    assert rec["error"] is None and not rec["cut_short"]
    assert steps == rec["steps"] and len(steps) == 5
    assert all(s["norms"] == [6.0] and as_float(s["target"]) == 9.0 for s in steps)


def test_the_channel_holds_a_steps_message_to_its_shape():
    good = {"type": "steps", "steps": [{"call": 0, "tape": 1, "index": 0, "kind": "gradient",
                                        "norms": [1.5], "sources": [0]}],
            "step_sources": [{"tensor": 3, "name": "w"}]}
    assert protocol.shape_problem(good) is None
    assert protocol.shape_problem(dict(good, steps=[{"call": "x"}])) is not None
    assert protocol.shape_problem(dict(good, steps={"call": 0})) is not None
    assert protocol.shape_problem({"type": "steps", "steps": []}) is not None
