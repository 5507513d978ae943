"""`--tapes A:B`: record only the top-level tapes A to B-1 (counted from 0, in the order
they are entered); TensorFlow's op callback is off outside them, so the rest of a long loop
runs at full speed.
"""
from __future__ import annotations

from typing import Optional

from tensorflow.python.framework import op_callbacks


class TapeWindow:
    """Switches a session's op callback on while a chosen top-level tape's step runs: from
    entering top-level tape A until entering top-level tape B (or the program's end)."""

    def __init__(self, session, tapes: Optional[tuple]):
        self.session = session
        self.start, self.stop = tapes if tapes else (0, None)
        self.seen = 0            # top-level tapes entered so far
        self.depth = 0           # instrumented tapes open now, recorded or not
        self.current: Optional[int] = None   # number of the top-level tape now recorded
        self.on = False
        self.callback = session.on_op
        session.window = self if tapes else None

    def open(self) -> None:
        self._switch(self.start == 0)

    def close(self) -> None:
        self._switch(False)

    def enter(self, tape) -> bool:
        """A tape is entered: whether it is recorded."""
        tape.__dict__["_tapeviz_counted"] = True
        self.depth += 1
        if self.depth == 1:
            n = self.seen
            self.seen += 1
            inside = self.start <= n and (self.stop is None or n < self.stop)
            self.current = n if inside else None
            self._switch(inside)
        return self.on

    def exit(self, tape) -> None:
        if tape.__dict__.pop("_tapeviz_counted", False):
            self.depth -= 1

    def skipped(self) -> dict:
        stop = "" if self.stop is None else self.stop
        before = min(self.seen, self.start)
        after = max(0, self.seen - self.stop) if self.stop is not None else 0
        return {"tapes": f"{self.start}:{stop}", "top_level_tapes": self.seen,
                "before": before, "after": after,
                "note": f"only top-level tapes {self.start}:{stop} (counted from 0) and the ops "
                        f"until the next top-level tape were recorded; {before + after} of "
                        f"{self.seen} top-level tapes ran without instrumentation"}

    def _switch(self, on: bool) -> None:
        if on and not self.on:
            op_callbacks.add_op_callback(self.callback)
        elif self.on and not on:
            op_callbacks.remove_op_callback(self.callback)
        self.on = on
