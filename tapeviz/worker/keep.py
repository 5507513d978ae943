"""Which of a loop's steps keep their full capture (the default keep policy). Every step
keeps its summary (capture/steps.py); of the steps one top-level `with` line opens, full
ops are kept for the first `first`, the newest `newest` of those sampled within a share of
the loop's time, and up to `anomalies` whose cheap check (StepLog.anomalous: a NaN/Inf or
None gradient, a non-finite loss, an error) fired. A step is recorded or not when its tape
is entered, so a step that is not recorded runs with the op callback off; an unrecorded
step whose check fires has the loop record its next step, kept if it shows the same.
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Optional

# Sampled steps (the candidates for the newest kept) are recorded while the time they took
# stays under this share of the loop's time: a recorded step costs about 1.5-2x a plain one,
# so sampling adds at most ~5-10% to the loop, however long it runs.
SAMPLE_SHARE = 0.08


@dataclass(frozen=True)
class Keep:
    """A keep policy: `first` steps of each loop whole (None: every step of the loop, the
    old "every op of every step"), the `newest` sampled ones, `anomalies` anomalous ones."""
    first: Optional[int] = 20
    newest: int = 5
    anomalies: int = 5

    @classmethod
    def from_job(cls, d) -> Optional["Keep"]:
        if not isinstance(d, dict):
            return None
        return cls(d.get("first"), int(d.get("newest") or 0), int(d.get("anomalies") or 0))

    def to_job(self) -> dict:
        return {"first": self.first, "newest": self.newest, "anomalies": self.anomalies}


@dataclass
class Span:
    """One recorded step: its number in its loop, the op, tape and tensor ids it took
    [first, end), why it was recorded ("first", "sample", "after"), what its check found."""
    number: int
    first_op: int
    first_tape: int
    first_tensor: int
    why: str
    started: float
    end_op: Optional[int] = None
    end_tape: Optional[int] = None
    end_tensor: Optional[int] = None
    anomalous: bool = False


class Loop:
    """What one top-level `with` line's steps did, and which it keeps."""

    def __init__(self, first_op: int, now: float):
        self.opened = 0
        self.first_op = first_op     # where its first step's ops began (the op bound's share)
        self.start = now
        self.recorded_s = 0.0        # time its sampled steps took, recorded
        self.step_ops = 0            # the most ops one of its recorded steps took
        self.kept: list = []         # step numbers kept whole: first and anomalous ones
        self.ring: deque = deque()   # Spans of the newest sampled steps, oldest first
        self.anomalous = 0           # anomalous steps kept
        self.follow = False          # an unrecorded step's check fired: record the next

    def kept_numbers(self) -> list:
        return sorted(self.kept + [s.number for s in self.ring])


class Policy:
    """Decides, for each step a loop opens, whether it is recorded, and when a recorded
    step ends whether its capture stays (session.drop_span takes it back otherwise)."""

    def __init__(self, session, keep: Keep, share: float):
        self.session, self.keep, self.share = session, keep, share
        self.loops: dict = {}        # (file, line) -> Loop
        self.step: Optional[tuple] = None   # (Loop, Span or None, calls before it): now running

    def begin(self, where: tuple) -> bool:
        """A top-level tape is entered at `where`: the step before it ended; whether this
        one is recorded."""
        self.end()
        session, now = self.session, time.perf_counter()
        loop = self.loops.get(where)
        if loop is None:
            loop = self.loops[where] = Loop(session.next_op, now)
        number = loop.opened
        loop.opened += 1
        why = self._why(loop, now)
        span = None if why is None else Span(number, session.next_op, session.next_tape,
                                            session.next_tensor, why, now)
        self.step = (loop, span, session.steps.calls)
        return span is not None

    def _why(self, loop: Loop, now: float) -> Optional[str]:
        keep, session = self.keep, self.session
        if keep.first is None:
            return "first"
        used = session.next_op - loop.first_op
        if len(loop.kept) < keep.first and not (
                loop.kept and used >= self.share * session.max_ops):
            return "first"
        # a step recorded past the first must fit beside what is kept, or the op bound
        # would push out the first steps
        if len(session.ops) + 2 * loop.step_ops > session.max_ops:
            return None
        if loop.follow and loop.anomalous < keep.anomalies:
            loop.follow = False
            return "after"
        if keep.newest and loop.recorded_s <= SAMPLE_SHARE * (now - loop.start):
            return "sample"
        return None

    def end(self) -> None:
        """The running step ended (the next top-level tape, or the program's end)."""
        if self.step is None:
            return
        loop, span, calls = self.step
        self.step = None
        steps = self.session.steps
        anomalous = steps.last_anomaly > calls
        if span is None:
            loop.follow = loop.follow or anomalous
            return
        session = self.session
        span.end_op, span.end_tape, span.anomalous = session.next_op, session.next_tape, anomalous
        span.end_tensor = session.next_tensor
        loop.step_ops = max(loop.step_ops, span.end_op - span.first_op)
        if span.why == "first":
            loop.kept.append(span.number)
            return
        loop.recorded_s += time.perf_counter() - span.started
        if anomalous and loop.anomalous < self.keep.anomalies:
            loop.anomalous += 1
            loop.kept.append(span.number)
            return
        loop.ring.append(span)
        while len(loop.ring) > self.keep.newest:
            old = loop.ring.popleft()
            session.drop_span(old)
