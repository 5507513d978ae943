"""Which tapes record: `--tapes A:B` records only the top-level tapes A to B-1 (counted from
0, in the order they are entered); a keep policy (keep.py) records a loop's first steps,
its newest sampled ones and its anomalous ones, and runs the rest uninstrumented;
`keep_steps` N alone records its first N. TensorFlow's op callback is off outside the
recorded tapes, so the rest of a long loop runs at close to plain eager speed; its gradient
calls still leave their summaries (capture/steps.py), so every step's loss and gradient
norms are charted.
"""
from __future__ import annotations

from typing import Optional

from tensorflow.python.framework import op_callbacks

from .keep import Keep, Policy

# A loop also stops recording its first steps once they took this share of the op bound: the
# bound keeps the newest ops, so recording more would only push out the first steps it holds.
KEEP_OPS_SHARE = 0.8
# ... and beside the newest steps kept (keep.py), less: they need room of their own
KEEP_OPS_SHARE_BESIDE_NEWEST = 0.6


class TapeWindow:
    """Switches a session's op callback on while a chosen top-level tape's step runs: from
    entering a recorded top-level tape until entering one that is not (or the program's
    end). `tapes` (A, B) chooses by number; else `keep` (keep.py's policy) or `keep_steps`
    (the first N steps of each top-level `with` line alone, fewer when they fill
    KEEP_OPS_SHARE of the op bound). Neither, or a policy keeping every step: all record."""

    def __init__(self, session, tapes: Optional[tuple] = None,
                 keep_steps: Optional[int] = None, keep: Optional[Keep] = None):
        self.session = session
        self.tapes = tapes
        self.start, self.stop = tapes if tapes else (0, None)
        if keep is None and keep_steps:
            keep = Keep(keep_steps, 0, 0)
        self.keep = None if tapes or keep is None or keep.first is None else keep
        self.keep_steps = self.keep.first if self.keep else None
        self.policy = None
        if self.keep is not None:
            share = KEEP_OPS_SHARE_BESIDE_NEWEST if self.keep.newest else KEEP_OPS_SHARE
            self.policy = Policy(session, self.keep, share)
        self.seen = 0            # top-level tapes entered so far
        self.depth = 0           # instrumented tapes open now, recorded or not
        self.current: Optional[int] = None   # number of the top-level tape now recorded
        self.on = False
        self.callback = session.on_op
        session.window = self if tapes or self.keep else None

    def open(self) -> None:
        self._switch(self.start == 0)

    def close(self) -> None:
        self._switch(False)
        if self.policy is not None:
            self.policy.end()            # the last step ended with the program

    def enter(self, tape, where: tuple) -> bool:
        """A tape is entered at `where` (file, line): whether it is recorded. A tape that is
        not gets an id of its own for its gradient calls' summaries."""
        tape.__dict__["_tapeviz_counted"] = True
        self.depth += 1
        if self.depth == 1:
            n = self.seen
            self.seen += 1
            inside = self.start <= n and (self.stop is None or n < self.stop)
            if inside and self.policy is not None:
                inside = self.policy.begin(where)
            self.current = n if inside else None
            self._switch(inside)
        if not self.on:
            tape.__dict__["_tapeviz_unrecorded"] = [self.session.new_tape_id(), 0]
        return self.on

    def exit(self, tape) -> None:
        if tape.__dict__.pop("_tapeviz_counted", False):
            self.depth -= 1

    def skipped(self) -> dict:
        """What ran uninstrumented, for Recording.skipped ({} when nothing did)."""
        if self.tapes:
            return self._skipped_by_number()
        loops = []
        for where, loop in self.policy.loops.items():
            kept = loop.kept_numbers()
            if loop.opened > len(kept):
                loops.append((where, loop.opened, kept))
        if not loops:
            return {}
        (file, line), opened, kept = max(loops, key=lambda loop: loop[1])
        said = "; ".join(f"{_ranges(_not_kept(kept_, opened_))} of the loop at "
                         f"{self._where_words(where)}" for where, opened_, kept_ in loops)
        later = self.keep.newest or self.keep.anomalies
        out = {"keep_steps": self.keep_steps, "file": file, "line": line,
               "loop_tapes": opened, "recorded": len(kept), "top_level_tapes": self.seen,
               "note": f"{said} ran uninstrumented{' or were dropped' if later else ''}: "
                       f"their losses and gradient norms are charted, their ops are not drawn"}
        if later:
            out.update(newest=self.keep.newest, anomalies=self.keep.anomalies,
                       kept=_ranges(kept, cap=30))
        return out

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


def _not_kept(kept: list, opened: int) -> list:
    """The step numbers (from 0) of a loop's `opened` that are not in `kept`."""
    kept = set(kept)
    return [n for n in range(opened) if n not in kept]


def _ranges(numbers: list, cap: int = 12) -> str:
    """Step numbers (from 0) as a reader counts them, from 1: "steps 4–10, 12 and 15", the
    first `cap` runs named; "no steps" for none (a loop ended by os._exit mid-step)."""
    if not numbers:
        return "no steps"
    runs: list = []
    for n in numbers:
        if runs and runs[-1][1] == n - 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    said = [f"{a + 1:,}" if a == b else f"{a + 1:,}–{b + 1:,}" for a, b in runs[:cap]]
    if len(runs) > cap:
        said.append(f"{len(runs) - cap:,} more runs")
    word = "step " if len(runs) == 1 and runs[0][0] == runs[0][1] else "steps "
    return word + (said[0] if len(said) == 1 else ", ".join(said[:-1]) + " and " + said[-1])
