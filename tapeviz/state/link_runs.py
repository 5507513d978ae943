"""One run per example link, shared by every page that opens it: when a class opens the
same link at once, one worker records the example and each page draws that recording,
instead of thirty runs queueing for two workers. No Streamlit and no TensorFlow here.

Only a page's first run of an unchanged example (the bare address, `?example=NAME`) comes
here; Run always records afresh. A recording is kept for `max_age_s`. One that the
machinery cut short (cancelled, timed out, a worker that failed) is not kept, and the pages
that waited for it run their own.
"""
from __future__ import annotations

import threading
import time
from typing import Callable, Optional

# Error types the runner gives a recording it cut short: a fault of that run, not of the
# program, so never shown to anyone but the page that met it.
CUT_SHORT = frozenset({"Cancelled", "Timeout", "WorkerError", "WorkerCrash", "RunnerError",
                       "ProtocolError", "TooManyJobs"})
SHARING = "sharing"     # the run phase of a page that waits for, or takes, a shared run


def keepable(recorded) -> bool:
    if not isinstance(recorded, dict):
        return False
    error = recorded.get("error")
    return error is None or error.get("type") not in CUT_SHORT


class LinkRuns:
    def __init__(self, max_age_s: float, clock: Callable[[], float] = time.monotonic):
        self.max_age_s = max_age_s
        self._clock = clock
        self._lock = threading.Lock()
        self._kept: dict = {}        # source -> (recording dict, when it was recorded)
        self._running: dict = {}     # source -> Event set when the run in flight ends

    def run(self, source: str, run: Callable[..., dict], on_wait=None, on_phase=None) -> dict:
        """The recording of `source`: a kept one, the one another page is making, or
        `run(source, on_wait=, on_phase=)`'s (the page's own runner call)."""
        if self.max_age_s <= 0:
            return run(source, on_wait=on_wait, on_phase=on_phase)
        while True:
            with self._lock:
                kept = self._fresh(source)
                ending = self._running.get(source) if kept is None else None
                mine = kept is None and ending is None
                if mine:
                    ending = self._running[source] = threading.Event()
            if mine:
                return self._run_and_keep(source, run, ending, on_wait, on_phase)
            if on_phase is not None:
                on_phase(SHARING)
            if kept is not None:
                return kept[0]
            ending.wait()
            # kept now; or cut short, and this page runs its own on the next turn

    def age(self, source: str) -> Optional[float]:
        """Seconds since the kept recording of `source` was made (None: none kept)."""
        with self._lock:
            kept = self._fresh(source)
        return None if kept is None else self._clock() - kept[1]

    def _fresh(self, source: str):
        kept = self._kept.get(source)
        if kept is not None and self._clock() - kept[1] > self.max_age_s:
            del self._kept[source]
            kept = None
        return kept

    def _run_and_keep(self, source, run, ending, on_wait, on_phase) -> dict:
        recorded = None
        try:
            recorded = run(source, on_wait=on_wait, on_phase=on_phase)
            return recorded
        finally:
            with self._lock:
                del self._running[source]
                if keepable(recorded):
                    # A page's Recording is built from this dict and never changes it, so
                    # every page may share the one object.
                    self._kept[source] = (recorded, self._clock())
            ending.set()
