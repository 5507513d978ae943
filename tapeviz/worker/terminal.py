"""The user's terminal during `python -m tapeviz record`: everything the program writes to
stdout and stderr, unbounded and as it is written, and an uncaught exception's traceback as
`python PROGRAM.py` prints it. (What the recording stores stays bounded; it says so.)

The command line hands the worker two named pipes (`program["terminal"]`, see
tapeviz/live_output.py) that it copies to its own stdout and stderr: the worker's fd 1 is
its message channel, so the program's output cannot reach the terminal directly.
"""
from __future__ import annotations

import os
import sys
import types
from pathlib import Path
from typing import Optional

_TAPEVIZ_WORKER = str(Path(__file__).resolve().parent) + os.sep


class _PipeText:
    """A text stream onto one of the command line's pipes. A pipe that fails (the command
    line is gone) is dropped: the program runs on as it would with its terminal closed
    under it, minus the error."""

    def __init__(self, fd: int):
        self.fd = fd

    def write(self, s: str) -> None:
        if self.fd is None:
            return
        data = s.encode("utf-8", "replace")
        try:
            while data:
                data = data[os.write(self.fd, data):]
        except OSError:
            self.close()

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class Shown:
    """The program's stdout and stderr on the user's terminal (None where there is none)."""

    def __init__(self, stdout: Optional[_PipeText] = None, stderr: Optional[_PipeText] = None):
        self.stdout, self.stderr = stdout, stderr

    def close(self) -> None:
        for stream in (self.stdout, self.stderr):
            if stream is not None:
                stream.close()


def opened(program: Optional[dict]) -> Shown:
    """The pipes the command line named in `program["terminal"]`, opened for writing."""
    paths = (program or {}).get("terminal") or {}
    streams = []
    for key in ("stdout", "stderr"):
        path = paths.get(key)
        fd = None
        if isinstance(path, str):
            try:     # the command line holds the read end already: this never waits
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
                os.set_blocking(fd, True)   # a slow terminal slows the program, as plainly
            except OSError:
                fd = None
        streams.append(_PipeText(fd) if fd is not None else None)
    return Shown(*streams)


def print_uncaught(exc: BaseException, filename: str, stream) -> None:
    """What Python prints when the program ends with `exc` uncaught, written to `stream`
    (the program's stderr): its own sys.excepthook if it set one, else Python's own display
    given tracebacks without tapeviz's frames (the worker's `exec` of the program, the
    instrumented tape's methods), so that it reads as the plain run's does. Python 3.11's
    display, not the traceback module, adds "Did you mean: 'MeanSquaredError'?" to an
    AttributeError or NameError."""
    if isinstance(exc, SystemExit):
        code = exc.code
        if code is not None and not isinstance(code, int):
            stream.write(f"{code}\n")
        return
    try:
        if sys.excepthook is not sys.__excepthook__:
            sys.excepthook(type(exc), exc, exc.__traceback__)
            return
        chain = _chained(exc, [])
        held = [(e, e.__traceback__) for e in chain]
        shown, sys.stderr = sys.stderr, stream
        try:
            for e, tb in held:
                e.__traceback__ = _without_tapeviz(tb)
            sys.__excepthook__(type(exc), exc, exc.__traceback__)
        finally:     # the exceptions are the program's: their tracebacks are given back
            sys.stderr = shown
            for e, tb in held:
                e.__traceback__ = tb
    except Exception:               # the traceback is the program's; tapeviz's failure is not
        pass


def _chained(exc: BaseException, found: list) -> list:
    """`exc` and every exception Python's display prints with it (causes, contexts, a
    group's members), each once."""
    if any(e is exc for e in found):
        return found
    found.append(exc)
    for other in (exc.__cause__, exc.__context__, *(getattr(exc, "exceptions", None) or ())):
        if isinstance(other, BaseException):
            _chained(other, found)
    return found


def _without_tapeviz(tb: Optional[types.TracebackType]) -> Optional[types.TracebackType]:
    """A traceback of the same frames, lines and positions, less tapeviz's worker frames."""
    kept = []
    while tb is not None:
        if not tb.tb_frame.f_code.co_filename.startswith(_TAPEVIZ_WORKER):
            kept.append(tb)
        tb = tb.tb_next
    rebuilt = None
    for entry in reversed(kept):
        rebuilt = types.TracebackType(rebuilt, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return rebuilt
