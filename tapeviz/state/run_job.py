"""One debugger run in flight, for the page: the run goes on in a thread while the page
polls, so the status can say what it waits for and a Cancel click reaches the worker.
No Streamlit and no TensorFlow here: the page reads `label()` and calls `cancel()`.
"""
from __future__ import annotations

import threading
import time
from typing import Callable, Optional

WAITING_FOR = {
    "queued": "Waiting for a free worker: your run is number {place} in line",
    "starting": "Waiting for a worker to start (it imports TensorFlow)",
    "running": "Running your program in a worker",
    "finishing": "The program stopped; the worker is packing its recording",
    "drawing": "Drawing the graph",
    "sharing": "Waiting for the run of this link that another visitor started",
}


class RunJob:
    """`run(source, on_wait=, on_phase=)` in a thread; times each phase from Run on."""

    def __init__(self, source: str, run: Callable[..., dict], clock=time.perf_counter):
        self.source = source
        self.clock = clock
        self.started = clock()
        self.phase, self.place = "queued", None
        self.phases: dict = {}           # phase -> seconds spent in it, once it ended
        self._entered = self.started
        self.result: Optional[dict] = None
        self.done = threading.Event()
        self.cancelled = False
        self._thread = threading.Thread(target=self._work, args=(run,), daemon=True,
                                        name="tapeviz-run")
        self._thread.start()

    def _work(self, run) -> None:
        try:
            self.result = run(self.source, on_wait=self._on_wait, on_phase=self.enter)
        finally:
            self.enter("drawing")
            self.done.set()

    def _on_wait(self, place: int) -> None:
        self.place = place
        self.enter("queued")

    def enter(self, phase: str) -> None:
        now = self.clock()
        if phase != self.phase:
            self.phases[self.phase] = self.phases.get(self.phase, 0.0) + now - self._entered
            self.phase, self._entered = phase, now

    @property
    def shared(self) -> bool:
        """The recording came from another page's run of the same link (link_runs.py)."""
        return (self.phase == "sharing" or "sharing" in self.phases) and \
            "running" not in self.phases

    def elapsed(self) -> float:
        return self.clock() - self.started

    def label(self) -> str:
        what = WAITING_FOR.get(self.phase, self.phase).format(place=self.place or 1)
        return f"{what}… {self.elapsed():.1f} s since Run"

    def summary(self, shared_age: Optional[float] = None) -> str:
        """Run -> drawn, and where the time went: said once the graph is on the page.
        `shared_age`: how old the shared recording of a link is, when `shared`."""
        self.enter("done")
        if self.shared:
            made = ("just now" if shared_age is None or shared_age < 60
                    else f"{shared_age / 60:.0f} min ago")
            return (f"Drawn in {self.elapsed():.1f} s from this link's recording, made {made} "
                    "for everyone who opened the link; Run records your own")
        words = {"queued": "waiting in line", "starting": "a worker starting",
                 "running": "the program", "finishing": "packing the recording",
                 "drawing": "drawing"}
        parts = [f"{words[p]} {self.phases[p]:.1f} s" for p in words
                 if self.phases.get(p, 0.0) >= 0.05]
        return f"Run → drawn in {self.elapsed():.1f} s" + (f" ({', '.join(parts)})" if parts else "")
