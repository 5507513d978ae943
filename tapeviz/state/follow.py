"""A recording file followed while the program that writes it still runs (`tapeviz view
--follow`, `tapeviz record --live`): each poll rereads it when it changed; while it says
`running`, its new step summaries go into a LiveSteps the run view charts live, and once it
no longer does, it is the page's recording. No Streamlit, no TensorFlow.
"""
from __future__ import annotations

import os
from typing import Optional

from .. import recording_gate
from ..recording import Recording, stop_path
from ..words.markdown import literal
from .live_steps import LiveSteps

FOLLOW_ENV = "TAPEVIZ_FOLLOW"      # set with TAPEVIZ_VIEW: follow that file as it is rewritten


class Follow:
    def __init__(self, path: str):
        self.path = path
        self.live = LiveSteps()
        self.stamp = None            # (mtime_ns, size) of the version read last
        self.calls = -1              # the newest summary's call number taken into `live`
        self.sources = 0             # step sources taken into `live`
        self.snapshot: Optional[Recording] = None   # the newest running version
        self.final: Optional[tuple] = None          # (Recording, dict) once it stops running
        self.problem: Optional[str] = None
        self.stop_sent = False

    @property
    def running(self) -> bool:
        return self.final is None

    def poll(self) -> bool:
        """Reread the file if it changed; True when something new came (steps or its end)."""
        try:
            st = os.stat(self.path)
        except OSError as exc:
            self.problem = literal(f"Cannot read {self.path}: {exc.strerror or exc}")
            return False
        stamp = (st.st_mtime_ns, st.st_size)
        if stamp == self.stamp or self.final is not None:
            return False
        try:
            with open(self.path, "rb") as f:
                rec, data = recording_gate.read(f.read(), os.path.basename(self.path))
        except (OSError, recording_gate.Unreadable) as exc:
            self.problem = literal(str(exc), 300)
            return False
        self.stamp, self.problem = stamp, None
        new = [s for s in data.get("steps") or [] if s["call"] > self.calls]
        if new:
            self.calls = new[-1]["call"]
        sources = (data.get("step_sources") or [])[self.sources:]
        self.sources += len(sources)
        self.live.take(new, sources)
        if rec.running:
            self.snapshot = rec
        else:
            self.final = (rec, data)
        return True

    def ask_stop(self) -> None:
        """The page's Stop: a file beside the recording that its writer looks for."""
        try:
            with open(stop_path(self.path), "w", encoding="utf-8") as f:
                f.write("stop\n")
            self.stop_sent = True
        except OSError as exc:
            self.problem = literal(f"Cannot ask the run to stop: {exc.strerror or exc}")

    def label(self) -> str:
        rec = self.snapshot
        steps = f"{self.live.seen:,} steps so far" if self.live.seen else "no step yet"
        name = os.path.basename(self.path)
        asked = "; stop asked, waiting for the program" if self.stop_sent else ""
        took = f", {rec.duration_s:.0f} s in" if rec is not None and rec.duration_s else ""
        return f"Following {name} while the program runs: {steps}{took}{asked}"
