"""The watchdog (worker/watchdog.py) past a run's time limit: it builds the recording so far
while the program may still run, so a build can meet a map the program is changing. It tries
again, gives way to a program that stops late, and ends the worker only when nothing could be
built in its time.

The program's concurrent change is stood in for by a real Session whose finish raises the
KeyError the race raised (a held tensor popped as it was settled) for a set time: the timing
is the test's own, where a real race is one run in three on a loaded machine."""
import time
import types

import pytest

pytest.importorskip("tensorflow")

from tapeviz.worker import watchdog  # noqa: E402
from tapeviz.worker.capture.session import Session  # noqa: E402


class Run:
    """One watched run: the messages the watchdog sent and whether it ended the worker."""

    def __init__(self, monkeypatch, fails_for: float):
        self.sent, self.exits = [], []
        monkeypatch.setattr(watchdog, "WATCHDOG_S", 0.0)
        monkeypatch.setattr(watchdog, "os", types.SimpleNamespace(_exit=self.exits.append))
        session = Session("x = 1\n", "program.py", 1000)
        finish = session.finish
        until = time.monotonic() + fails_for

        def racing_finish(*args):
            if time.monotonic() < until:
                raise KeyError(7)
            return finish(*args)

        session.finish = racing_finish
        timer = types.SimpleNamespace(deadline=time.monotonic())
        self.dog = watchdog.Watchdog(session, timer, 1.0, self.sent.append,
                                     lambda: ("printed\n", ""), time.perf_counter(), 1000)

    def messages(self):
        self.dog.thread.join(15)
        assert not self.dog.thread.is_alive()
        return [m["type"] for m in self.sent]


def test_a_program_that_stops_while_the_builds_fail_sends_its_own_recording(monkeypatch):
    run = Run(monkeypatch, fails_for=30.0)
    time.sleep(0.8)              # builds failing all the while; then the Timeout lands
    run.dog.done()
    assert run.messages() == ["stopped"], "the program's own recording follows, not this one"
    assert run.exits == [], "a worker about to send its recording is not ended"


def test_builds_that_fail_for_a_while_still_send_the_recording_so_far(monkeypatch):
    run = Run(monkeypatch, fails_for=1.0)
    assert run.messages() == ["stopped", "recording"]
    (rec,) = [m["recording"] for m in run.sent if m["type"] == "recording"]
    assert rec["error"]["type"] == "Timeout" and rec["cut_short"]["why"] == "timeout"
    assert rec["stdout"] == "printed\n"
    assert run.exits == []


def test_a_build_that_never_succeeds_ends_the_worker_after_its_time(monkeypatch):
    monkeypatch.setattr(watchdog, "UNSENT_S", 0.5)
    started = time.monotonic()
    run = Run(monkeypatch, fails_for=30.0)
    assert run.messages() == ["stopped"]
    assert run.exits == [watchdog.EXIT_UNSENT]
    assert time.monotonic() - started >= 0.5, "it tried for its whole time first"
