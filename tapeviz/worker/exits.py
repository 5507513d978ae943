"""What a run keeps when its process ends abruptly: its printed output is streamed to the
server as it is written, and `os._exit` first sends the recording made so far.

A native crash (a segfault in a kernel) cannot run Python any more, so only what was
already streamed survives it; `os._exit` is a Python call, so it can be answered fully.
"""
from __future__ import annotations

import contextlib
import io
import os
import sys
import threading
import time
from typing import Callable, Optional

from .native_output import NativeStream

FLUSH_S = 0.02               # the flusher thread sends what waits this often
EAGER_GAP_S = 0.01           # a line is sent at once when nothing was sent this long before
STREAM_CHARS = 200_000       # the most text that waits (the server keeps only the newest)


class StreamedText(io.TextIOBase):
    """The program's stdout: written to the recorder's bounded text and sent to the server
    in chunks. A line written after a quiet spell is sent at once (a crash right after a
    print keeps it); lines in a burst, and partial lines, go with the next flush, at most
    FLUSH_S later, so that a loop of prints costs a few messages, not one per line."""

    def __init__(self, out, emit: Callable[[dict], None]):
        self.out, self.emit = out, emit
        self.pid = os.getpid()
        self.pending: list = []
        self.pending_chars = 0
        self.last_send = 0.0
        self.lock = threading.Lock()
        self.closed_ = threading.Event()
        self.thread = threading.Thread(target=self._flusher, name="tapeviz-stdout", daemon=True)
        self.thread.start()

    def writable(self):
        return True

    def write(self, s):
        n = self.out.write(s)
        s = str(s)
        with self.lock:
            self.pending.append(s)
            self.pending_chars += len(s)
            if self.pending_chars > STREAM_CHARS:   # the server keeps the newest; so do we
                text = "".join(self.pending)[-STREAM_CHARS:]
                self.pending, self.pending_chars = [text], len(text)
        if "\n" in s and time.monotonic() - self.last_send > EAGER_GAP_S:
            self.flush_now()
        return n

    def flush(self) -> None:                 # the program's sys.stdout.flush(): send now
        self.flush_now()

    def flush_now(self) -> None:
        with self.lock:
            if not self.pending or os.getpid() != self.pid:   # a forked child: not our channel
                return
            text = "".join(self.pending)
            self.pending, self.pending_chars = [], 0
            self.last_send = time.monotonic()
            try:
                self.emit({"type": "stdout", "text": text})
            except Exception:                # the channel is gone: the run goes on regardless
                pass

    def _flusher(self):
        while not self.closed_.wait(FLUSH_S):
            self.flush_now()

    def stop(self) -> None:
        self.closed_.set()
        self.flush_now()


@contextlib.contextmanager
def streamed(out, emit: Optional[Callable[[dict], None]]):
    """The stdout to give the program: `out` itself, or `out` streamed through `emit`."""
    if emit is None:
        yield out
        return
    stream = StreamedText(out, emit)
    try:
        yield stream
    finally:
        stream.stop()


@contextlib.contextmanager
def answer_os_exit(on_exit: Optional[Callable[[int, object], None]]):
    """While the program runs, `os._exit(code)` in the worker first calls
    `on_exit(code, caller frame)` (which sends the recording so far), then exits as asked.
    A forked child of the program exits at once, as it would plainly."""
    if on_exit is None:
        yield
        return
    real_exit = os._exit
    me = os.getpid()

    def _exit(code=0):
        if os.getpid() == me:
            try:
                on_exit(code, sys._getframe(1))
            except BaseException:            # noqa: BLE001 - the exit must happen regardless
                pass
        real_exit(code)

    os._exit = _exit
    try:
        yield
    finally:
        os._exit = real_exit


def send_recording_on_exit(session, out, started: float, emit: Callable[[dict], None],
                           err=None):
    """The `on_exit` for answer_os_exit: finish the session with what was printed (`out`,
    and `err`, the program's stderr) and send it as the run's recording (os._exit(0) is a
    clean end, as it is plainly)."""
    from ..recording import Error

    def on_exit(code, frame):
        session.quiet += 1                   # nothing tapeviz does now is the program's
        error = None
        if code != 0:
            user = session.user_frame(frame)
            error = Error("SystemExit", f"the program ended with os._exit({code})",
                          user.f_lineno if user is not None else None)
        rec = session.finish(_final_text(out), error, time.perf_counter() - started)
        if err is not None:
            rec.stderr = _final_text(err)
        emit({"type": "recording", "recording": rec.to_dict(), "exit_status": code})

    return on_exit


def _final_text(stream) -> str:
    """What a stream the program was given holds, once its descriptor's last bytes (a
    NativeStream's) have joined it and its streaming (a StreamedText's) has stopped."""
    if isinstance(stream, NativeStream):
        stream.release()
        stream = stream.inner
    if isinstance(stream, StreamedText):
        stream.stop()
        return stream.out.text()
    return stream.text()
