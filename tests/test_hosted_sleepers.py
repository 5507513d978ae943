"""A run slot is for CPU (server/sleepers.py), through the real runner and sandboxed workers:
four tabs whose programs forge "stopped" and sleep do not hold a fifth student's small
program, while programs that compute keep their slots."""
import time

import pytest

from tapeviz.server import jobs, runner

from hosted_util import FORGES_STOPPED, SMALL, hosted_pool, one_start

pytestmark = pytest.mark.slow   # sandboxed workers

# Two slots, as on the 2-core machine a class shares; a short limit keeps the hogs short.
ENV = {"TAPEVIZ_MODE": "hosted", "TAPEVIZ_WORKERS": "2", "TAPEVIZ_WARM": "2",
       "TAPEVIZ_TIMEOUT_S": "8"}
HOG = "x = 0\nwhile True:\n    x += 1\n"


@pytest.fixture(scope="module")
def pool(request):
    pool = hosted_pool(ENV, request.param)
    yield pool
    pool.close()


def _running(job, timeout=120.0) -> bool:
    """Wait until `job` has reached its worker and runs (its phase; events stay unread)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if job.phase in ("running", "finishing"):
            return True
        time.sleep(0.1)
    return False


def _each_its_own(pool, source, n, name):
    return [pool.submit(runner.Record(source), owner=f"{name}-{i}", client=f"{name}-browser-{i}")
            for i in range(n)]


@one_start
def test_four_sleeping_tabs_do_not_hold_a_fifth_students_program(pool):
    sleepers = _each_its_own(pool, FORGES_STOPPED, 4, "sleeper")
    assert pool.config.sleepers >= 4 and pool.config.workers == 2
    for job in sleepers:             # all four run at once on two slots: each gave way
        assert _running(job), job.phase
    fifth = pool.submit(runner.Record(SMALL), owner="student", client="student-browser")
    rec = None
    for event in fifth.stream():
        if isinstance(event, jobs.Recorded):
            rec = event.data
    assert rec is not None and rec["error"] is None, fifth.result
    assert "285.0" in rec["stdout"]
    # It ran and came back while every sleeper still sat in its worker: they held no slot.
    assert not any(job.done for job in sleepers)
    for job in sleepers:             # and each still ends at its own fixed deadline
        job.wait()
        assert job.result["error"]["type"] == "Timeout", job.result["error"]
    assert pool._runs.busy == 0 and pool._runs.sleeping == 0


@one_start
def test_programs_that_compute_keep_their_slots(pool):
    hogs = _each_its_own(pool, HOG, 2, "hog")
    for job in hogs:
        assert _running(job)
    small = pool.submit(runner.Record(SMALL), owner="student", client="student-browser")
    small.wait()
    # The hogs used their slots' CPU to the end: the small program waited for one of them.
    assert any(job.done for job in hogs)
    assert small.result["error"] is None, small.result["error"]
    events = small.events()
    assert any(isinstance(e, jobs.Phase) and e.name == "queued" for e in events), events
    for job in hogs:
        job.wait()
        assert job.result["error"]["type"] == "Timeout"
