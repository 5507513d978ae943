"""Pages that open one example's link share one run of it (tapeviz/state/link_runs.py).

The jobs here are stand-ins whose events block until released, so that the tests decide
the order in which pages arrive; the page-level test with real workers is
tests/test_app.py::test_pages_opening_one_link_share_its_run."""
import threading

import pytest

from tapeviz import recording_gate as gate
from tapeviz.server.jobs import Done, Phase, Recorded
from tapeviz.state.link_runs import SHARING, LinkRuns

SOURCE = "import tensorflow as tf\nprint(tf.constant(1.0))\n"


class Job:
    """A job handle as the runner gives one: its events stream until `release`."""

    def __init__(self, runs, result):
        self.runs, self.result = runs, result

    def stream(self):
        yield Phase("running")
        self.runs.release.wait(10)
        yield Recorded(gate.read(self.result).recording, self.result)
        yield Done()


class Runs:
    """submit(source) as the page's runner call: each call gives a job whose events end
    at `release` with the recording it was told to; or raises, if told an exception."""

    def __init__(self, *results):
        self.results = list(results)
        self.calls = 0
        self.started = threading.Semaphore(0)
        self.release = threading.Event()

    def __call__(self, source):
        self.calls += 1
        result = self.results[min(self.calls, len(self.results)) - 1]
        self.started.release()
        if isinstance(result, BaseException):
            self.release.wait(10)
            raise result
        return Job(self, result)


def recording(error_type=None):
    error = {"type": error_type, "message": "", "line": None} if error_type else None
    return {"schema": "tapeviz.recording/1", "source": SOURCE, "error": error}


def follow(links, runs, phases=None):
    """A page's run of the link: the recording dict it gets, noting its phases."""
    recorded = None
    for event in links.events(SOURCE, submit=runs):
        if isinstance(event, Phase) and phases is not None:
            phases.append(event.name)
        elif isinstance(event, Recorded):
            recorded = event.data
    return recorded


def pages(links, runs, n):
    """n pages opening the link at once; returns [(recording, phases)] in page order."""
    out = [None] * n

    def page(i):
        phases = []
        try:
            out[i] = (follow(links, runs, phases), phases)
        except Exception as exc:       # the page's own run raised: it gets the exception
            out[i] = (exc, phases)
    threads = [threading.Thread(target=page, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    return threads, out


def let_them_finish(threads, runs):
    """Release the run in flight once it has started, and wait for every page."""
    assert runs.started.acquire(timeout=10)
    runs.release.set()
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads)


def test_a_class_opening_one_link_at_once_gets_one_run():
    links, runs = LinkRuns(max_age_s=900), Runs(recording())
    threads, out = pages(links, runs, 6)
    let_them_finish(threads, runs)
    assert runs.calls == 1
    assert all(rec is out[0][0] for rec, _ in out)
    # five pages waited for the run the sixth made, and say so
    assert sorted(SHARING in phases for _, phases in out) == [False] + [True] * 5


def test_a_later_page_takes_the_kept_run_until_it_is_too_old():
    now = [0.0]
    links, runs = LinkRuns(max_age_s=900, clock=lambda: now[0]), Runs(recording())
    runs.release.set()
    first = follow(links, runs)
    now[0] = 600.0
    phases = []
    assert follow(links, runs, phases) is first
    assert phases == [SHARING] and links.age(SOURCE) == 600.0 and runs.calls == 1
    now[0] = 901.0
    assert links.age(SOURCE) is None
    follow(links, runs)
    assert runs.calls == 2


@pytest.mark.parametrize("cut_short", ["Cancelled", "Timeout", "WorkerCrash", "RunnerError"])
def test_a_run_cut_short_is_not_shared_and_the_waiting_pages_run_their_own(cut_short):
    links = LinkRuns(max_age_s=900)
    runs = Runs(recording(cut_short), recording())
    threads, out = pages(links, runs, 3)
    let_them_finish(threads, runs)
    # the first run's page sees its own failure; one waiting page ran again, and the other
    # took that second run
    assert runs.calls == 2
    errors = sorted(str((rec["error"] or {}).get("type")) for rec, _ in out)
    assert errors == sorted([cut_short, "None", "None"])
    assert links.age(SOURCE) is not None


def test_the_programs_own_error_is_shared_like_any_result():
    # nonpersistent_error raises on purpose: that is the lesson, and the same for everyone
    links, runs = LinkRuns(max_age_s=900), Runs(recording("RuntimeError"))
    runs.release.set()
    first = follow(links, runs)
    assert follow(links, runs) is first and runs.calls == 1


def test_a_run_that_raises_leaves_no_page_waiting():
    links = LinkRuns(max_age_s=900)
    runs = Runs(RuntimeError("the runner broke"), recording())
    threads, out = pages(links, runs, 2)
    let_them_finish(threads, runs)
    assert runs.calls == 2
    results = [rec for rec, _ in out]
    assert sum(isinstance(r, RuntimeError) for r in results) == 1
    assert [r["error"] for r in results if isinstance(r, dict)] == [None]


def test_a_zero_age_shares_nothing():
    links, runs = LinkRuns(max_age_s=0), Runs(recording())
    runs.release.set()
    follow(links, runs)
    follow(links, runs)
    assert runs.calls == 2 and links.age(SOURCE) is None
