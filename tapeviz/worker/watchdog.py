"""A run whose program does not stop at its time limit (its main thread stuck in native code,
or the limit's Timeout lost in a library) keeps what it recorded: WATCHDOG_S past the limit,
a thread of the worker quiets the op callback, builds the recording so far and sends it,
with "stopped" first so the runner waits for it. The runner then kills the worker as before.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from typing import Callable, Optional

from .. import recording_gate
from ..recording import Error
from ..server import protocol
from . import byte_bound

WATCHDOG_S = 2.0             # past the time limit: the Timeout stops a program well within it
# A program still running may change the maps mid-build: build again until this long has
# passed, well inside the finishing time "stopped" gives (runner.FINISH_S, HOSTED_FINISH_S)
UNSENT_S = 10.0
RETRY_S = 0.2
EXIT_UNSENT = 70             # the worker's exit status when the watchdog had nothing to send


class Watchdog:
    """Armed for one run: `done()` when the program stopped on its own disarms it."""

    def __init__(self, session, timer, timeout: float, emit: Callable[[dict], None],
                 texts: Callable[[], tuple], started: float, max_ops: int):
        self.session, self.timer, self.timeout, self.emit = session, timer, timeout, emit
        self.texts, self.started, self.max_ops = texts, started, max_ops
        self.stopped = threading.Event()
        self.main = threading.main_thread()
        self.thread = threading.Thread(target=self._watch, name="tapeviz-watchdog", daemon=True)
        self.thread.start()

    def done(self) -> None:
        self.stopped.set()

    def _watch(self) -> None:
        while True:      # the limit may be lifted while it waits (a run charted live)
            wait = max(0.0, self.timer.deadline - time.monotonic()) + WATCHDOG_S
            if self.stopped.wait(wait):
                return
            if time.monotonic() >= self.timer.deadline + WATCHDOG_S:
                break
        self.session.quiet += 1000   # the op callback returns at once from now on
        frame = sys._current_frames().get(self.main.ident)
        user = self.session.user_frame(frame) if frame is not None else None
        limit = getattr(self.timer, "seconds", 0) or self.timeout   # lifted for a live run
        error = Error("Timeout", f"the program ran longer than its time limit of {limit:g} s "
                      "and did not stop when asked; what it recorded until then was sent "
                      "while it still ran, and its worker was killed",
                      user.f_lineno if user is not None else None, file=self.session.here)
        # "stopped" before the build: the runner's grace past the limit is short, and a
        # loaded machine was seen building a long run's recording for longer than that
        self.emit({"type": "stopped"})
        give_up = time.monotonic() + UNSENT_S
        while True:
            fitted = self._recording(error)
            # A program that got its Timeout late (a loaded machine) ends while this runs:
            # its own recording follows, whole, so this one is not sent
            if self.stopped.is_set():
                return
            if fitted is not None:
                try:
                    self.emit({"type": "recording", "recording": fitted})
                    return
                except Exception:    # noqa: BLE001 - the streamed summaries are kept anyway
                    break
            if time.monotonic() > give_up or self.stopped.wait(RETRY_S):
                break
        if self.stopped.is_set():
            return
        # Nothing sent: end the worker now, so the runner keeps what it streamed at once
        # instead of waiting out the finishing time that "stopped" gave it
        os._exit(EXIT_UNSENT)

    def _recording(self, error: Error) -> Optional[dict]:
        """The recording so far as the message's dict, fitted to the message size; None
        when the still-running program changed a map as it was read."""
        try:
            stdout, stderr = self.texts()
            rec = self.session.finish(stdout, error, time.perf_counter() - self.started)
            rec.stderr = stderr
            rec.cut_short = {"why": "timeout", "steps": len(rec.steps),
                             "note": "the program did not stop at its time limit; the "
                                     "recording so far was sent while it ran"}
            return byte_bound.fit(rec.to_dict(), protocol.MAX_MESSAGE - 2**20,
                                  recording_gate.bounds(self.max_ops)["tensors"])
        except Exception:            # noqa: BLE001 - a map changed as it was read: again
            return None


def watching(session, timer, timeout: Optional[float], emit, texts, started: float,
             max_ops: int) -> Optional[Watchdog]:
    """A Watchdog for a run with a time limit and a channel, else None."""
    if not timeout or emit is None or timer is None or timer.deadline is None:
        return None
    return Watchdog(session, timer, timeout, emit, texts, started, max_ops)
