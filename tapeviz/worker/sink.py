"""Where the summaries of a helper the program calls itself (keras_watch.py) go.

Under tapeviz (`tapeviz record`, the app's worker, `tapeviz.capture()`) they join the
run's own step summaries (`SessionSink`): streamed to the page live, kept in its recording.
In a plain `python` run they make a recording of their own (`FileSink`): steps only, no
ops, rewritten to its file every few seconds so that `tapeviz view --follow` draws it live.
"""
from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path
from typing import Optional

import tensorflow as tf

from ..recording import Recording, running_steps, stop_path, write_whole
from . import active
from .capture.steps import StepLog
from .frames import UserFiles
from .traced import traced_line


class Sink:
    passive = False

    def __init__(self, where: tuple):
        self.where = where                 # (file, line) of the user's fit() call
        self.keys: dict = {}               # id(variable) -> its key for the summaries

    def key(self, variable) -> int:
        return self.keys.setdefault(id(variable), -(len(self.keys) + 1))

    def where_of(self, frame) -> tuple:
        """(file, line) of the user's line nearest `frame` outward, as the recording names
        files (autograph's converted copy of a train_step mapped back to its line); fit()'s
        line when the call came from Keras's own train_step."""
        name, line, _ = traced_line(frame, self.files, self.lines)
        return (name, line) if name is not None and (name, line) != self.where[:2] else self.where

    def note_once(self, message: str) -> None:
        if message not in self._noted:
            self._noted.add(message)
            self.note(message)

    _noted: set


class SessionSink(Sink):
    """Into the session now recording this program: its StepLog and its warnings."""

    def __init__(self, session, frame):
        self.session, self._noted = session, set()
        self.files, self.lines = session.files, session.traced_lines_cache
        name = self.files.name(frame.f_code.co_filename) if frame is not None else None
        super().__init__((name, frame.f_lineno if name is not None else None))

    def key(self, variable) -> int:
        """The variable's recording id when the recording met it, so its series is the one
        the recorder's own summaries name; else a key of its own."""
        handle = getattr(getattr(variable, "value", variable), "handle", None)
        rid = self.session.tid.get(getattr(handle, "_id", None))
        return rid if rid is not None else super().key(variable)

    @contextlib.contextmanager
    def quiet(self):
        """tapeviz's own reads of its variables are not the program's ops: unrecorded."""
        self.session.quiet += 1
        try:
            yield
        finally:
            self.session.quiet -= 1

    def recorded_eagerly(self, model) -> bool:
        self.passive = bool(getattr(model, "run_eagerly", False)
                            or tf.config.functions_run_eagerly())
        return self.passive

    def new_tape(self) -> int:
        return self.session.new_tape_id()

    def add(self, tape, where, loss, variables, norms, hist) -> None:
        self.session.steps.add_watched(tape, where, loss, variables, norms, hist)

    def stop_asked(self) -> bool:
        return False             # the page stops the whole run (`record --live`)

    def note(self, message: str) -> None:
        file, line = self.where
        self.session.warnings.append({"line": line, "file": file, "message": message})

    def close(self):
        return None               # the run's own recording holds them


class FileSink(Sink):
    """A recording of its own: the steps, the calling file's source, and notes."""

    def __init__(self, path, frame, every_s: float):
        filename = frame.f_code.co_filename if frame is not None else "<unknown>"
        self.files, self.lines = UserFiles(filename), {}
        super().__init__((self.files.main, frame.f_lineno if frame is not None else None))
        self.path = Path(path) if path is not None else None
        self.every_s, self.started = every_s, time.perf_counter()
        self.written = self.started
        self.steps, self.warnings, self._noted, self.tapes = StepLog(), [], set(), 0
        try:
            self.source = Path(filename).read_text(encoding="utf-8", errors="replace")
        except OSError:
            self.source = ""

    def quiet(self):
        return contextlib.nullcontext()     # nothing records this process's ops

    def recorded_eagerly(self, model) -> bool:
        return False             # nothing else summarizes these steps

    def new_tape(self) -> int:
        self.tapes += 1
        return self.tapes - 1

    def add(self, tape, where, loss, variables, norms, hist) -> None:
        self.steps.add_watched(tape, where, loss, variables, norms, hist)
        if self.path is not None and time.perf_counter() - self.written >= self.every_s:
            self.write()

    def note(self, message: str) -> None:
        file, line = self.where
        self.warnings.append({"line": line, "file": file, "message": message})

    def stop_asked(self) -> bool:
        """Has the page following the file asked for a stop (recording.stop_path)? One
        stat a step: microseconds beside a train step's milliseconds."""
        return self.path is not None and os.path.exists(stop_path(self.path))

    def recording(self, running: bool = False) -> Recording:
        rec = Recording(self.source, program=self.files.main, running=running,
                        duration_s=time.perf_counter() - self.started)
        kept = list(self.steps.kept)
        rec.steps = running_steps(kept) if running else kept
        rec.step_sources = list(self.steps.named)
        rec.warnings = list(self.warnings)
        if self.steps.dropped:
            rec.dropped["steps"] = self.steps.dropped
        return rec

    def write(self, running: bool = True) -> Recording:
        """The recording so far, replacing the file whole (a reader never sees half)."""
        rec = self.recording(running)
        self.written = time.perf_counter()
        if self.path is not None:
            write_whole(self.path, rec.to_json())
        return rec

    def close(self) -> Recording:
        rec = self.write(running=False)
        if self.path is not None:
            with contextlib.suppress(OSError):     # a stop asked of this run is answered
                os.remove(stop_path(self.path))
        return rec


def open_sink(path, frame, every_s: float) -> Sink:
    session = active.session()
    return SessionSink(session, frame) if session is not None else FileSink(path, frame, every_s)


class Rewriter:
    """A thread that rewrites `path` with `snapshot()` (a running Recording) every `every_s`
    while a block runs (`tapeviz.watch`), and calls `on_stop()` once when the page following
    the file asks for a stop. The block's thread only appends summaries to its StepLog."""

    def __init__(self, path, snapshot, every_s: float, on_stop):
        self.path, self.snapshot, self.every_s, self.on_stop = str(path), snapshot, every_s, on_stop
        self.done = threading.Event()
        self.asked = False
        self.thread = threading.Thread(target=self._run, name="tapeviz-rewrite", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.done.wait(self.every_s):
            try:
                write_whole(self.path, self.snapshot().to_json())
            except Exception:        # noqa: BLE001 - a full disk must not end the program
                pass
            if not self.asked and os.path.exists(stop_path(self.path)):
                self.asked = True
                self.on_stop()

    def close(self, final: Recording) -> None:
        """The block ended: its whole recording, the file's last write."""
        self.done.set()
        self.thread.join()
        write_whole(self.path, final.to_json())
        with contextlib.suppress(OSError):
            os.remove(stop_path(self.path))
