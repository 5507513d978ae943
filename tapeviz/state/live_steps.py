"""A running program's step summaries, folded from its job's `Steps` events (server/jobs.py)
into a bounded live run the run view can chart while the program goes on. No Streamlit and
no TensorFlow here.

Bounded however long the run: every step is kept up to `keep_all`; past that the newest
`keep_all // 2` stay whole and the older ones are thinned to every other kept step, again
each time the count doubles back to `keep_all`. So a 100,000-step run holds at most
`keep_all` summaries, its first steps and its newest steps always among them, and `thinned`
says how many were let go (the chart's title says so).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

from ..recording import CallSummary, StepSource

KEEP_ALL = 4_000      # summaries kept in memory per live run (a summary is ~0.5 KiB)
FIRST = 200           # the run's first steps, never thinned: where a loop starts to learn
MAX_SOURCES = 10_000  # named sources: a loop reuses the same few; a runaway one is capped


def _summary(d: dict) -> CallSummary:
    known = CallSummary.__dataclass_fields__
    return CallSummary(**{k: v for k, v in d.items() if k in known})


def _source(d: dict) -> StepSource:
    known = StepSource.__dataclass_fields__
    return StepSource(**{k: v for k, v in d.items() if k in known})


@dataclass
class LiveRun:
    """What the run view needs of a recording (`steps`, `step_sources`, `dropped`), filled
    while the program runs. `seen` counts every summary streamed, kept or thinned."""
    steps: list = field(default_factory=list)
    step_sources: list = field(default_factory=list)
    dropped: dict = field(default_factory=dict)


class LiveSteps:
    """Folds `Steps` events in order (one writer: the run's thread); `snapshot()` gives the
    page a consistent copy to chart (another thread)."""

    def __init__(self, keep_all: int = KEEP_ALL, first: int = FIRST):
        if keep_all < 2 * first + 2:
            raise ValueError(f"keep_all ({keep_all}) must exceed twice first ({first})")
        self.keep_all, self.first = keep_all, first
        self._steps: list = []
        self._sources: list = []
        self.seen = 0
        self.thinned = 0
        self.version = 0          # bumped by each event that brought a summary
        self._lock = threading.Lock()

    def take(self, steps: list, step_sources: list) -> None:
        with self._lock:
            room = MAX_SOURCES - len(self._sources)
            self._sources += [_source(s) for s in step_sources[:max(room, 0)]]
            for d in steps:
                self._steps.append(_summary(d))
            self.seen += len(steps)
            if len(self._steps) > self.keep_all:
                self._thin()
            if steps:
                self.version += 1

    def _thin(self) -> None:
        """Keep the first steps and the newest half whole; every other step between them."""
        newest = self.keep_all // 2
        head, middle, tail = (self._steps[:self.first], self._steps[self.first:-newest],
                              self._steps[-newest:])
        kept = middle[::2]
        self.thinned += len(middle) - len(kept)
        self._steps = head + kept + tail

    def __len__(self) -> int:
        return len(self._steps)

    def snapshot(self) -> LiveRun:
        with self._lock:
            dropped = {"steps": self.thinned} if self.thinned else {}
            return LiveRun(list(self._steps), list(self._sources), dropped)
