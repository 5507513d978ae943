"""Step summaries streamed to the server while the program runs: every STREAM_S, and once
more when it stops, a `steps` message carries the summaries made since the last one (as the
recording's `steps` entries) and the step sources they name first. The runner keeps them, so
a run that is killed still shows its every step (server/streamed.py).
"""
from __future__ import annotations

import contextlib
import os
import threading
from typing import Callable, Optional

from ..recording import _plain

STREAM_S = 0.5               # how often new summaries go to the server
# Per message, at most so many summaries and numbers (norms and histogram counts, a few
# bytes each in JSON): each message stays far below the small-message cap (protocol.py)
MESSAGE_STEPS = 2_000
MESSAGE_NUMBERS = 200_000


class StepStream:
    """Sends `session.steps`' fresh summaries through `emit` from a thread of its own: the
    program's thread only appends to a list (StepLog.take_fresh)."""

    def __init__(self, session, emit: Callable[[dict], None], every: float = STREAM_S,
                 on_first: Optional[Callable[[], None]] = None):
        self.session, self.emit, self.every, self.on_first = session, emit, every, on_first
        self.pid = os.getpid()
        self.sources_sent = 0
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="tapeviz-steps", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopped.wait(self.every):
            self.flush()

    def flush(self) -> None:
        with self.lock:
            if os.getpid() != self.pid:          # a forked child: not our channel
                return
            steps = self.session.steps
            fresh = steps.take_fresh()
            named = steps.named[self.sources_sent:]
            if not fresh and not named:
                return
            self.sources_sent += len(named)
            sources = [_plain(s) for s in named]
            tensors = self.session.tensors
            for source in sources:            # the name as known now (finish has the last)
                rec = tensors.get(source["tensor"])
                if source["name"] is None and rec is not None:
                    source["name"] = rec.name
            for n, part in enumerate(_messages(fresh) or [[]]):
                try:
                    self.emit({"type": "steps", "steps": [_plain(s) for s in part],
                               "step_sources": sources if n == 0 else []})
                except Exception:                 # the channel is gone: the run goes on
                    return
            if fresh and self.on_first is not None:   # the runner sees the same message
                first, self.on_first = self.on_first, None
                first()

    def stop(self) -> None:
        self.stopped.set()
        self.flush()


def _messages(summaries: list) -> list:
    """`summaries` in runs of at most MESSAGE_STEPS and MESSAGE_NUMBERS (one at least)."""
    out, part, numbers = [], [], 0
    for s in summaries:
        size = len(s.norms) + sum(len(h) for h in s.hist if h)
        if part and (len(part) >= MESSAGE_STEPS or numbers + size > MESSAGE_NUMBERS):
            out.append(part)
            part, numbers = [], 0
        part.append(s)
        numbers += size
    return out + [part] if part else out


@contextlib.contextmanager
def streamed_steps(session, emit: Optional[Callable[[dict], None]], on_first=None):
    """While the program runs, its step summaries stream through `emit` (None: not);
    `on_first()` is called once the first summaries were sent."""
    if emit is None:
        yield None
        return
    stream = StepStream(session, emit, on_first=on_first)
    try:
        yield stream
    finally:
        stream.stop()
