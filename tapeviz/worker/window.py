"""Which tapes record: `--tapes A:B` records only the top-level tapes A to B-1 (counted from
0, in the order they are entered); `keep_steps` records a loop's first steps and runs the
rest uninstrumented. TensorFlow's op callback is off outside the recorded tapes, so the rest
of a long loop runs at close to plain eager speed; its gradient calls still leave their
summaries (capture/steps.py), so every step's loss and gradient norms are charted.
"""
from __future__ import annotations

from typing import Optional

from tensorflow.python.framework import op_callbacks

# A loop also stops recording once its steps took this share of the op bound: the bound keeps
# the newest ops, so recording more would only push out the first steps it already holds.
KEEP_OPS_SHARE = 0.8


class TapeWindow:
    """Switches a session's op callback on while a chosen top-level tape's step runs: from
    entering a recorded top-level tape until entering one that is not (or the program's
    end). `tapes` (A, B) chooses by number; else `keep_steps` records, of the tapes one
    top-level `with` line opens, the first `keep_steps` (fewer when they fill
    KEEP_OPS_SHARE of the op bound)."""

    def __init__(self, session, tapes: Optional[tuple] = None,
                 keep_steps: Optional[int] = None):
        self.session = session
        self.tapes = tapes
        self.start, self.stop = tapes if tapes else (0, None)
        self.keep_steps = None if tapes else keep_steps
        self.seen = 0            # top-level tapes entered so far
        self.depth = 0           # instrumented tapes open now, recorded or not
        self.current: Optional[int] = None   # number of the top-level tape now recorded
        self.on = False
        self.callback = session.on_op
        # (file, line) of a top-level `with` -> [tapes it opened, tapes recorded, first op id]
        self.lines: dict = {}
        session.window = self if tapes or self.keep_steps else None

    def open(self) -> None:
        self._switch(self.start == 0)

    def close(self) -> None:
        self._switch(False)

    def enter(self, tape, where: tuple) -> bool:
        """A tape is entered at `where` (file, line): whether it is recorded. A tape that is
        not gets an id of its own for its gradient calls' summaries."""
        tape.__dict__["_tapeviz_counted"] = True
        self.depth += 1
        if self.depth == 1:
            n = self.seen
            self.seen += 1
            inside = self.start <= n and (self.stop is None or n < self.stop)
            if inside and self.keep_steps:
                inside = self._keeps(where)
            self.current = n if inside else None
            self._switch(inside)
        if not self.on:
            tape.__dict__["_tapeviz_unrecorded"] = [self.session.new_tape_id(), 0]
        return self.on

    def _keeps(self, where: tuple) -> bool:
        """Whether the `with` at `where` still records: it has recorded fewer than
        keep_steps tapes, and (past its first) they took less than KEEP_OPS_SHARE of the op
        bound. Its later tapes are counted, so a loop's whole count is known."""
        line = self.lines.get(where)
        if line is None:
            line = self.lines[where] = [0, 0, self.session.next_op]
        line[0] += 1
        used = self.session.next_op - line[2]
        if line[1] >= self.keep_steps or (
                line[1] and used >= KEEP_OPS_SHARE * self.session.max_ops):
            return False
        line[1] += 1
        return True

    def exit(self, tape) -> None:
        if tape.__dict__.pop("_tapeviz_counted", False):
            self.depth -= 1

    def skipped(self) -> dict:
        """What ran uninstrumented, for Recording.skipped ({} when nothing did)."""
        if self.tapes:
            return self._skipped_by_number()
        loops = [(where, opened, recorded) for where, (opened, recorded, _) in self.lines.items()
                 if opened > recorded]
        if not loops:
            return {}
        (file, line), opened, recorded = max(loops, key=lambda loop: loop[1])
        said = "; ".join(f"steps {recorded + 1:,}–{opened:,} of the loop at "
                         f"{self._where_words(where)}" for where, opened, recorded in loops)
        return {"keep_steps": self.keep_steps, "file": file, "line": line,
                "loop_tapes": opened, "recorded": recorded, "top_level_tapes": self.seen,
                "note": f"{said} ran uninstrumented: their losses and gradient norms are "
                        f"charted, their ops are not drawn"}

    def _where_words(self, where: tuple) -> str:
        file, line = where
        return f"line {line}" if file in (None, self.session.files.main) \
            else f"line {line} of {file}"

    def _skipped_by_number(self) -> dict:
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
