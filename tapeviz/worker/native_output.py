"""The program's writes to file descriptors 1 and 2 from below Python join its stdout and
its stderr.

`tf.print(..., output_stream=sys.stdout)` prints from C++ (inside a tf.function too, where
no op callback sees it), and so do a subprocess the program starts and `os.write(1, ...)`;
`tf.print(x)` itself, TensorFlow's warnings and C++ errors go to fd 2. Plainly all of that
is the program's output; a worker keeps its real stdout for messages and points fd 1 at
stderr, and an in-process recording would send it wherever the host's descriptors go.
While the program runs, each descriptor is a pipe instead. Each write of the program's
Python-level stream first moves in what waits in its pipe, so a sequential program's
output keeps its order within each stream; a thread moves it in too when Python writes
nothing, so a full pipe never blocks the program.
"""
from __future__ import annotations

import codecs
import contextlib
import io
import os
import select
import threading

CHUNK = 65536


class NativeStream(io.TextIOBase):
    """The stdout (fd 1) or stderr (fd 2) given to the program: `inner`, with the
    descriptor's bytes merged in, in order."""

    def __init__(self, inner, fd: int = 1):
        self.inner, self.fd = inner, fd
        self._lock = threading.Lock()
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._pid = os.getpid()
        self._released = False
        opened = []
        try:                 # everything that can fail comes before `fd` is touched
            self._saved = os.dup(fd)
            opened.append(self._saved)
            self._read, write = os.pipe()
            opened += [self._read, write]
            self._wake_read, self._wake_write = os.pipe()
            opened += [self._wake_read, self._wake_write]
            os.set_blocking(self._read, False)
            self._thread = threading.Thread(target=self._pump, name=f"tapeviz-fd{fd}",
                                            daemon=True)
            self._thread.start()
        except (OSError, RuntimeError):
            for opened_fd in opened:
                os.close(opened_fd)
            raise
        os.dup2(write, fd)
        os.close(write)

    def writable(self):
        return True

    def write(self, s):
        with self._lock:
            self._move_in()
            return self.inner.write(s)

    def flush(self) -> None:
        with self._lock:
            self._move_in()
        self.inner.flush()

    def release(self) -> None:
        """Give the descriptor back, move in what is left, stop the thread (once; in this
        process)."""
        if self._released or os.getpid() != self._pid:   # a forked child keeps the pipe
            return
        self._released = True
        os.dup2(self._saved, self.fd)     # closes our write end: the pipe drains to its end
        os.close(self._saved)
        os.write(self._wake_write, b"x")
        self._thread.join(timeout=5)
        with self._lock:
            self._move_in()
            tail = self._decoder.decode(b"", final=True)
            if tail:
                self.inner.write(tail)
        for fd in (self._read, self._wake_read, self._wake_write):
            os.close(fd)

    def _move_in(self) -> bool:
        """Called with the lock held: what the pipe holds now goes in before what follows.
        False once every writer has closed the pipe."""
        while True:
            try:
                data = os.read(self._read, CHUNK)
            except BlockingIOError:
                return True
            if not data:
                return False
            text = self._decoder.decode(data)
            if text:
                self.inner.write(text)

    def _pump(self) -> None:
        while True:
            ready, _, _ = select.select([self._read, self._wake_read], [], [])
            if self._wake_read in ready:
                return
            with self._lock:
                if not self._move_in():
                    return


@contextlib.contextmanager
def captured(inner, fd: int = 1):
    """While the program runs, its stdout (fd 1) or stderr (fd 2) is `inner` plus whatever
    reaches the descriptor. Without a free descriptor or thread, it is left as it was and
    the program runs regardless."""
    try:
        stream = NativeStream(inner, fd)
    except (OSError, RuntimeError):
        yield inner
        return
    try:
        yield stream
    finally:
        stream.release()
