"""`tapeviz.capture()`: record a block of the user's own process (a script, Jupyter, Colab)
into the same Recording the command line writes. Runs in the caller's process and thread.

Fine for one user: their own process, one block at a time. The app still runs programs in
workers (DESIGN.md): op callbacks swap a process-global hook, and a crash there would take
the server down.
"""
from __future__ import annotations

import io
import linecache
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Optional

import tensorflow as tf

from . import active
from .capture import DEFAULT_MAX_OPS, Session
from .instrumented import adopt_tapes, make_tape_class, user_tape_site
from .window import TapeWindow
from ..recording import Error, Recording


class _Tee(io.TextIOBase):
    """The block's printed output, still shown where it would have gone, and kept."""

    def __init__(self, shown, limit: int = 100_000):
        self.shown, self.kept, self.limit, self.dropped = shown, [], limit, 0

    def write(self, s):
        s = str(s)
        if sum(map(len, self.kept)) < self.limit:
            self.kept.append(s)
        else:
            self.dropped += len(s)
        return self.shown.write(s)

    def flush(self):
        self.shown.flush()

    def writable(self):
        return True

    def __getattr__(self, name):          # fileno, isatty, encoding: the real stream's
        return getattr(self.shown, name)

    def text(self) -> str:
        tail = f"\n[... {self.dropped} later characters dropped ...]\n" if self.dropped else ""
        return "".join(self.kept) + tail


class Capture:
    """`with tapeviz.capture() as rec:` records the block; then `rec.save("run.json")`,
    `rec.recording` (a Recording), `rec.to_dict()`, or `tapeviz.figure(rec)`.

    Inside the block `tf.GradientTape` is tapeviz's instrumented tape (a real subclass, so
    results are TensorFlow's own) for this thread; it is put back when the block ends. A
    tape class bound by name before the block (`from tensorflow import GradientTape`) is
    instrumented too when the block's files enter it (adopted at its `__enter__`)."""

    def __init__(self, max_ops: int = DEFAULT_MAX_OPS, tapes: Optional[tuple] = None):
        self.max_ops, self.tapes = max_ops, tapes
        self.recording: Optional[Recording] = None
        self._state = None

    # -- the block --------------------------------------------------------------------------
    def __enter__(self) -> "Capture":
        if self._state is not None:
            raise RuntimeError("this capture is already recording")
        frame = sys._getframe(1)
        filename = frame.f_code.co_filename
        source = "".join(linecache.getlines(filename, frame.f_globals))
        session = Session(source, filename, self.max_ops)
        owner = threading.get_ident()

        class GradientTape(make_tape_class(session)):
            def _tracked(self) -> bool:          # other threads' tapes are theirs alone
                return threading.get_ident() == owner and super()._tracked()

        GradientTape.__module__, GradientTape.__qualname__ = "tensorflow", "GradientTape"
        patched = [(tf, tf.GradientTape), (tf.autodiff, tf.autodiff.GradientTape)]
        for module, _ in patched:
            module.GradientTape = GradientTape
        # A tape made from TensorFlow's own class (`backprop.GradientTape`, a name bound
        # before the block) becomes the run's class when the caller's files enter it
        adopted = adopt_tapes(session, GradientTape, lambda code: threading.get_ident()
                              == owner and user_tape_site(session, code))
        adopted.__enter__()
        window = TapeWindow(session, self.tapes)
        creator = tf.variable_creator_scope(session.on_variable)
        creator.__enter__()
        tee = _Tee(sys.stdout)
        sys.stdout = tee
        window.open()
        running = active.recording(session)      # tapeviz.keras.Watch's steps join ours
        running.__enter__()
        self._state = (session, window, creator, patched, tee, frame, adopted, running,
                       time.perf_counter())
        return self

    def __exit__(self, typ, value, tb):
        session, window, creator, patched, tee, frame, adopted, running, started = self._state
        self._state = None
        running.__exit__(None, None, None)
        window.close()
        adopted.__exit__(None, None, None)
        if sys.stdout is tee:
            sys.stdout = tee.shown
        for module, original in patched:
            module.GradientTape = original
        creator.__exit__(None, None, None)
        session.quiet += 1
        try:
            session.scan_names(frame)
        finally:
            session.quiet -= 1
        error = _error(session, value) if value is not None else None
        self.recording = session.finish(tee.text(), error, time.perf_counter() - started)
        return False                         # the block's exception goes on, as without us

    # -- the result -------------------------------------------------------------------------
    def _done(self) -> Recording:
        if self.recording is None:
            raise RuntimeError("nothing recorded yet: use `with tapeviz.capture() as rec:` "
                               "and read `rec` after the block")
        return self.recording

    def to_dict(self) -> dict:
        return self._done().to_dict()

    def to_json(self, indent: Optional[int] = None) -> str:
        return self._done().to_json(indent)

    def save(self, path) -> Path:
        """Write the recording as JSON (the command line's contract); returns the path."""
        path = Path(path)
        path.write_text(self.to_json(), encoding="utf-8")
        return path

    def __repr__(self) -> str:
        rec = self.recording
        if rec is None:
            return "<tapeviz capture: recording>" if self._state else "<tapeviz capture: empty>"
        return (f"<tapeviz capture: {len(rec.ops)} ops, {len(rec.tensors)} tensors, "
                f"{len(rec.tapes)} tapes{', error ' + rec.error.type if rec.error else ''}>")


def _error(session: Session, exc: BaseException) -> Error:
    """The block's exception at its deepest line in the user's files."""
    line = file = None
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        name = session.files.name(frame.f_code.co_filename)
        if name is not None:
            line, file = lineno, name
    return Error(type(exc).__name__, str(exc) or type(exc).__name__, line, file=file)


def capture(max_ops: int = DEFAULT_MAX_OPS, tapes: Optional[tuple] = None) -> Capture:
    return Capture(max_ops, tapes)
