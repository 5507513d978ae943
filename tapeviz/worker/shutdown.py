"""What Python does when a program ends, done when a recorded program ends: wait for the
threads it started that are not daemons, then run what it registered with `atexit`,
newest first, as `python PROGRAM.py` does at exit, with the program's stdout, time limit
and op callback still in place.

Left to the worker's own exit, neither reached the recording: a local worker (a fork of
the zygote) ends with `os._exit`, which waits for no thread and runs no handler, and a
spawned one did both only after its recording had been sent. So a thread's late print
and `atexit.register(print, "bye")` lost their lines, and autograph's clean-up never
ran: every traced `tf.function` of every run left a `__autograph_generated_file*.py` in
/tmp.
"""
from __future__ import annotations

import atexit
import contextlib
import sys
import threading
import time
import traceback
from typing import Callable, Optional


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
def exit_handlers():
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


def program_threads(before: set) -> list:
    """The threads Python would wait for at exit that the program started: alive, not
    daemons, not there before it ran. A `concurrent.futures` pool's idle workers are left
    out: Python stops them at exit through the module's own shut-down flag, which would
    stop every later pool of this process too."""
    pools = sys.modules.get("concurrent.futures.thread")
    pool_workers = getattr(pools, "_threads_queues", {})
    return [t for t in threading.enumerate()
            if t not in before and not t.daemon and t.is_alive()
            and t is not threading.current_thread() and t not in pool_workers]


def join_threads(before: set, deadline: Optional[float],
                 on_overrun: Callable[[threading.Thread], None]) -> None:
    """Wait for the program's threads (program_threads) as Python does at exit: until they
    end, or until `deadline` (time.monotonic(); None waits as long as they run), when
    `on_overrun(thread)` is called for the first one still running (it raises)."""
    for thread in program_threads(before):
        thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            on_overrun(thread)
