"""`atexit` while a program runs: what it registers runs when it ends, newest first, as
`python PROGRAM.py` runs it at exit, with the program's stdout, time limit and op callback
still in place.

Left with the real `atexit`, such handlers printed nothing into the recording: a local
worker (a fork of the zygote) ends with `os._exit`, which runs none of them, and a
spawned one ran them after its recording had been sent. So `atexit.register(print, "bye")`
lost its line, and autograph's clean-up of its generated files never ran: every traced
`tf.function` of every run left a `__autograph_generated_file*.py` in /tmp.
"""
from __future__ import annotations

import atexit
import contextlib
import sys
import traceback


class ExitHandlers:
    """`atexit.register` and `atexit.unregister` for the run, and the handlers they hold."""

    def __init__(self, real_unregister):
        self.handlers: list = []          # (func, args, kwargs), in the order registered
        self._real_unregister = real_unregister

    def register(self, func, *args, **kwargs):
        if not callable(func):
            raise TypeError("the first argument must be callable")   # atexit's own words
        self.handlers.append((func, args, kwargs))
        return func

    def unregister(self, func) -> None:
        self.handlers = [h for h in self.handlers if h[0] != func]   # atexit compares with ==
        self._real_unregister(func)       # one registered before the run goes too, as plainly

    def run(self) -> None:
        """Each handler, newest first. An exception in one is printed to stderr, as Python
        prints it at exit, and the next runs; only the time limit's Timeout (a
        BaseException that is not SystemExit) ends them."""
        while self.handlers:
            func, args, kwargs = self.handlers.pop()
            try:
                func(*args, **kwargs)
            except (Exception, SystemExit):
                print(f"Exception ignored in atexit callback: {func!r}", file=sys.stderr)
                traceback.print_exc()


@contextlib.contextmanager
def captured():
    """While the block runs, `atexit.register` collects handlers here; the caller runs them
    (`.run()`) when the program ends. Libraries that imported `register` by name before the
    run keep the real one."""
    saved = atexit.register, atexit.unregister
    handlers = ExitHandlers(saved[1])
    atexit.register, atexit.unregister = handlers.register, handlers.unregister
    try:
        yield handlers
    finally:
        atexit.register, atexit.unregister = saved
