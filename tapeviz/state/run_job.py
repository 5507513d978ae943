"""One debugger run in flight, for the page: its own thread follows the job's typed events
(server/jobs.py) and folds them into what the run waits for and how long each phase took,
as the training page folds its job's (training_run.py). No Streamlit and no TensorFlow
here: the page reads `label()`, and takes `recorded` once `done` is set.
"""
from __future__ import annotations

import threading
import time
from typing import Callable, Iterable, Optional

from ..server import outcome
from ..server.example_cache import Cached
from ..server.jobs import Phase, Recorded, Steps
from .live_steps import LiveSteps

WAITING_FOR = {
    "queued": "Waiting for a free worker: your run is number {place} in line",
    "starting": "Waiting for a worker to start (it imports TensorFlow)",
    "running": "Running your program in a worker",
    "finishing": "The program stopped; the worker is packing its recording",
    "drawing": "Drawing the graph",
    "sharing": "Waiting for the run of this link that another visitor started",
    "cached": "Reading this example's recording",
}


class RunJob:
    """Follows `events(source)` (a job's events: `Job.stream()`, or a link's shared run,
    link_runs.py) in a thread of its own; times each phase from Run on."""

    def __init__(self, source: str, events: Callable[[str], Iterable],
                 clock=time.perf_counter):
        self.source = source
        self.clock = clock
        self.started = clock()
        self.phase, self.place = "queued", None
        self.phases: dict = {}           # phase -> seconds spent in it, once it ended
        self._entered = self.started
        self.recorded: Optional[Recorded] = None
        self.live = LiveSteps()          # the step summaries streamed so far, bounded
        self.cached: Optional[Cached] = None    # the recording was made earlier (example_cache.py)
        self.done = threading.Event()
        self.cancelled = False
        self.stopped = False             # Stop: ended by the user, its recording kept
        self._thread = threading.Thread(target=self._follow, args=(events,), daemon=True,
                                        name="tapeviz-run")
        self._thread.start()

    def _follow(self, events) -> None:
        try:
            for event in events(self.source):
                self.take(event)
        except Exception as exc:   # noqa: BLE001 - the page stays up whatever the runner does
            self.recorded = outcome.failed(self.source, "RunnerError",
                                           f"{type(exc).__name__}: {exc}")
        finally:
            if self.recorded is None:
                self.recorded = outcome.failed(self.source, "RunnerError",
                                               "the run ended without a recording")
            self.enter("drawing")
            self.done.set()

    def take(self, event) -> None:
        """Fold in one event of the job (only this run's thread calls it, in order)."""
        if isinstance(event, Phase):
            if event.name == "queued":
                self.place = event.place
            self.enter(event.name)
        elif isinstance(event, Steps):
            self.live.take(event.steps, event.step_sources)
        elif isinstance(event, Recorded):
            self.recorded = event
        elif isinstance(event, Cached):
            self.cached = event

    def enter(self, phase: str) -> None:
        now = self.clock()
        if phase != self.phase:
            self.phases[self.phase] = self.phases.get(self.phase, 0.0) + now - self._entered
            self.phase, self._entered = phase, now

    def stop(self, interrupt: Callable[[str], None], owner: str) -> None:
        """End the program now but keep the run: `interrupt` (Runner.interrupt) stops it as
        Ctrl+C would, and its recording keeps every step (its cut_short says so); one that
        will not stop is cancelled, and keeps every step summary streamed until then."""
        self.stopped = True
        interrupt(owner)

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

    def summary(self, shared_age: Optional[float] = None, painted: Optional[float] = None,
                run_to_paint: Optional[float] = None) -> str:
        """Run -> drawn, and where the time went: said once the graph is on the page.
        `shared_age`: how old the shared recording of a link is, when `shared`. The
        browser's time, when it has reported it (ui/viewport.py), is said instead of the
        server's: `painted`, seconds from opening the page to this run's graph painted (the
        page's first run); `run_to_paint`, seconds from Run to the graph painted."""
        self.enter("done")
        if painted is not None:
            took = f"Painted {painted:.1f} s after the page opened"
        elif run_to_paint is not None:
            took = f"Run → painted in {run_to_paint:.1f} s"
        else:
            took = f"Drawn in {self.elapsed():.1f} s"
        if self.cached is not None:
            return (f"{took}, from this example's recording made earlier "
                    f"with TensorFlow {self.cached.tensorflow}; Run records your own")
        if self.shared:
            made = ("just now" if shared_age is None or shared_age < 60
                    else f"{shared_age / 60:.0f} min ago")
            return (f"{took}, from this link's recording made {made} "
                    "for everyone who opened the link; Run records your own")
        words = {"queued": "waiting in line", "starting": "a worker starting",
                 "running": "the program", "finishing": "packing the recording",
                 "drawing": "drawing"}
        parts = [f"{words[p]} {self.phases[p]:.1f} s" for p in words
                 if self.phases.get(p, 0.0) >= 0.05]
        if painted is not None:
            return took + (f" (the run: {', '.join(parts)})" if parts else "")
        if run_to_paint is None:
            took = f"Run → drawn in {self.elapsed():.1f} s"
        return took + (f" ({', '.join(parts)})" if parts else "")
