"""The command line's side of a recorded program's output: two named pipes the worker
writes the program's stdout and stderr into as it runs (tapeviz/worker/terminal.py),
copied to this process's stdout and stderr, unbounded, so the terminal shows what
`python PROGRAM.py` shows. Local mode only: a hosted worker's sandbox cannot see them.
"""
from __future__ import annotations

import os
import select
import shutil
import sys
import tempfile
import threading

CHUNK = 65536


class LiveOutput:
    """`with LiveOutput() as live:` pass `live.paths` to the worker in program["terminal"];
    what it writes appears here until the block ends (then the rest is copied)."""

    def __init__(self):
        self.folder = tempfile.mkdtemp(prefix="tapeviz-out-")
        self.paths, self._fds = {}, []
        for name, target in (("stdout", sys.stdout), ("stderr", sys.stderr)):
            path = os.path.join(self.folder, name)
            os.mkfifo(path, 0o600)
            # Read and write: opening never waits for the worker, and the pipe never reads
            # as ended while it is open, so a worker that opens it late loses nothing.
            fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
            self.paths[name] = path
            self._fds.append((fd, target))
        self._stop_read, self._stop_write = os.pipe()
        self._thread = threading.Thread(target=self._copy, name="tapeviz-live-output",
                                        daemon=True)

    def __enter__(self) -> "LiveOutput":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        os.write(self._stop_write, b"x")
        self._thread.join()
        for fd, target in self._fds:       # what is left once the worker has ended
            while self._move(fd, target):
                pass
            os.close(fd)
        os.close(self._stop_read)
        os.close(self._stop_write)
        shutil.rmtree(self.folder, ignore_errors=True)

    def _copy(self) -> None:
        targets = dict(self._fds)
        while True:
            ready, _, _ = select.select([*targets, self._stop_read], [], [])
            if self._stop_read in ready:
                return
            for fd in ready:
                self._move(fd, targets[fd])

    @staticmethod
    def _move(fd: int, target) -> bool:
        try:
            data = os.read(fd, CHUNK)
        except BlockingIOError:
            return False
        if not data:
            return False
        buffer = getattr(target, "buffer", None)
        if buffer is not None:
            target.flush()
            buffer.write(data)
            buffer.flush()
        else:
            target.write(data.decode("utf-8", "replace"))
            target.flush()
        return True
