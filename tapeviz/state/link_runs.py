"""One run per example link, shared by every page that opens it: when a class opens the
same link at once, one worker records the example and each page draws that recording,
instead of thirty runs queueing for two workers. No Streamlit and no TensorFlow here.

Only a page's first run of an unchanged example (the bare address, `?example=NAME`) comes
here; Run always records afresh. A recording is kept for `max_age_s`. One that the
machinery cut short (cancelled, timed out, a worker that failed) is not kept, and the pages
that waited for it run their own. Without a recent run, the example's recording made
earlier (server/example_cache.py) is drawn at once, without waiting for a worker.
"""
from __future__ import annotations

import threading
import time
from typing import Callable, Iterator, Optional

from ..server.example_cache import keepable
from ..server.jobs import Done, Phase, Recorded

SHARING = "sharing"     # the run phase of a page that waits for, or takes, a shared run
CACHED = "cached"       # ... that reads the example's recording made earlier


def nothing_cached(source: str) -> None:
    return None


class LinkRuns:
    """`cached(source)`: (Cached, Recorded) of the example's recording made earlier, or
    None (server/example_cache.py's lookup)."""

    def __init__(self, max_age_s: float, clock: Callable[[], float] = time.monotonic,
                 cached: Callable[[str], Optional[tuple]] = nothing_cached):
        self.max_age_s = max_age_s
        self._clock = clock
        self._cached = cached
        self._lock = threading.Lock()
        self._kept: dict = {}        # source -> (its Recorded event, when it was recorded)
        self._running: dict = {}     # source -> Event set when the run in flight ends

    def events(self, source: str, submit: Callable) -> Iterator:
        """The events a page follows for `source`'s link: those of its own job
        (`submit(source)`, the page's runner call) when no other page has one kept or in
        flight; else Phase(SHARING), then that run's Recorded and Done. Without a kept
        one, a recording made earlier comes first: Phase(CACHED), Cached, Recorded, Done."""
        if self.max_age_s <= 0:
            yield from submit(source).stream()
            return
        with self._lock:
            recent = self._fresh(source)
        earlier = self._cached(source) if recent is None else None
        if earlier is not None:
            yield Phase(CACHED)
            yield from earlier
            yield Done()
            return
        while True:
            with self._lock:
                kept = self._fresh(source)
                ending = self._running.get(source) if kept is None else None
                mine = kept is None and ending is None
                if mine:
                    ending = self._running[source] = threading.Event()
            if mine:
                yield from self._run_and_keep(source, submit, ending)
                return
            yield Phase(SHARING)
            if kept is not None:
                yield kept[0]
                yield Done()
                return
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

    def _run_and_keep(self, source, submit, ending) -> Iterator:
        recorded = None
        try:
            for event in submit(source).stream():
                if isinstance(event, Recorded):
                    recorded = event
                yield event
        finally:
            with self._lock:
                del self._running[source]
                if keepable(recorded):
                    # A page draws this Recording and never changes it, so every page
                    # may share the one object.
                    self._kept[source] = (recorded, self._clock())
            ending.set()
