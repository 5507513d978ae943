"""A page's run that charts its steps live runs on past the time limit in local mode (the
user watches it and has Stop), to the live limit; one that charts nothing keeps the limit,
and hosted mode keeps it always. A real worker, real loops."""
import time

import pytest

from tapeviz.server import jobs, runner

pytestmark = pytest.mark.slow   # real workers

TRAINING = """
import time
import tensorflow as tf
started = time.monotonic()
w = tf.Variable(1.0)
for step in range(STEPS):
    with tf.GradientTape() as tape:
        loss = (w - 3.0) ** 2
    w.assign_sub(0.01 * tape.gradient(loss, w))
    time.sleep(0.01)
print("trained", STEPS, "in", time.monotonic() - started)
"""

SPINNING = """
import time
while True:
    time.sleep(0.01)
"""


@pytest.fixture(scope="module")
def pool():
    limits = runner.Limits(timeout_s=2.0, live_timeout_s=10.0)
    pool = runner.Runner(runner.Config(workers=2, warm=2, limits=limits))
    yield pool
    pool.close()


def run(pool, source: str) -> tuple:
    started = time.monotonic()
    job = pool.submit(jobs.Record(source, "program.py"))    # a page's run: the config's limit
    job.wait(120)
    return job.result, time.monotonic() - started


def test_a_loop_charted_live_runs_past_the_limit_to_its_end(pool):
    rec, _ = run(pool, TRAINING.replace("STEPS", "300"))   # 3 s of sleeps: past 2, inside 10
    assert rec["error"] is None, rec["error"]
    words = rec["stdout"].split()
    assert words[:2] == ["trained", "300"] and float(words[-1]) > 2.0   # ran past the limit
    assert len(rec["steps"]) == 300


def test_a_loop_charted_live_stops_at_the_live_limit_with_its_steps(pool):
    rec, took = run(pool, TRAINING.replace("STEPS", "100000"))
    assert rec["error"]["type"] == "Timeout" and "time limit of 10 s" in rec["error"]["message"]
    assert 9.0 < took < 60.0
    calls = [s["call"] for s in rec["steps"]]
    assert calls == list(range(len(calls))) and len(calls) > 500


def test_a_program_that_charts_nothing_keeps_the_limit(pool):
    rec, took = run(pool, SPINNING)
    assert rec["error"]["type"] == "Timeout" and "time limit of 2 s" in rec["error"]["message"]
    assert took < 9.0


def test_hosted_mode_never_lifts_the_limit():
    limits = runner.Limits(timeout_s=2.0, live_timeout_s=10.0)
    config = runner.Config(mode="hosted", workers=1, warm=0, limits=limits, sandbox="none",
                           zygote=False)
    pool = runner.Runner(config)
    try:
        assert pool._live_timeout(jobs.Record("x = 1")) is None
    finally:
        pool.close()
