"""`tapeviz.capture()`: record a block of the user's own process (a script, Jupyter, Colab)
into the same Recording the command line writes. Runs in the caller's process and thread.

Fine for one user: their own process, one block at a time. The app still runs programs in
workers (DESIGN.md): op callbacks swap a process-global hook, and a crash there would take
the server down.
"""
from __future__ import annotations

import _thread
import io
import linecache
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Optional

import tensorflow as tf

from . import active, sink
from .keep import Keep
from .capture import DEFAULT_MAX_OPS, Session
from .instrumented import adopt_tapes, make_tape_class, user_tape_site
from .window import TapeWindow
from ..recording import Error, Recording, running_steps


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

    def __init__(self, max_ops: int = DEFAULT_MAX_OPS, tapes: Optional[tuple] = None,
                 keep: Optional[Keep] = None, path=None, every_s: float = 2.0):
        self.max_ops, self.tapes, self.keep = max_ops, tapes, keep
        self.path, self.every_s = path, every_s
        self.recording: Optional[Recording] = None
        self._state = None
        self._rewriter: Optional[sink.Rewriter] = None

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
        window = TapeWindow(session, self.tapes, keep=self.keep)
        creator = tf.variable_creator_scope(session.on_variable)
        creator.__enter__()
        tee = _Tee(sys.stdout)
        sys.stdout = tee
        window.open()
        running = active.recording(session)      # tapeviz.keras.Watch's steps join ours
        running.__enter__()
        started = time.perf_counter()
        self._state = (session, window, creator, patched, tee, frame, adopted, running, started)
        if self.path is not None:                # tapeviz.watch: the file, rewritten live
            self._rewriter = sink.Rewriter(self.path, lambda: _so_far(session, tee, started),
                                           self.every_s, _interrupter(owner))
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
        if self._rewriter is not None:
            self._rewriter.close(self.recording)
            self._rewriter = None
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


def _so_far(session: Session, tee: _Tee, started: float) -> Recording:
    """What a watched block has done so far, for its file: its steps and output. Read from
    the rewriter's thread: the block's thread only appends to these (copied whole)."""
    steps = session.steps
    rec = Recording(session.source, program=session.files.main, running=True,
                    stdout=tee.text(), duration_s=time.perf_counter() - started)
    rec.steps, rec.step_sources = running_steps(list(steps.kept)), list(steps.named)
    return rec


def _interrupter(owner: int):
    """Stop as Ctrl+C would: KeyboardInterrupt in the block, when it runs on the main thread
    (Python delivers it there alone); a block on another thread runs on to its end."""
    def interrupt():
        if owner == threading.main_thread().ident:
            _thread.interrupt_main()
    return interrupt


def capture(max_ops: int = DEFAULT_MAX_OPS, tapes: Optional[tuple] = None) -> Capture:
    return Capture(max_ops, tapes)


def watch(path, every_s: float = 2.0, max_ops: int = DEFAULT_MAX_OPS) -> Capture:
    """`capture()` as `record` does by default (every step summarized, a loop's first,
    newest and anomalous steps kept whole, the rest at close to plain speed), with `path`
    rewritten every `every_s` while the block runs, for `tapeviz view --follow`."""
    return Capture(max_ops, keep=Keep(), path=path, every_s=every_s)
