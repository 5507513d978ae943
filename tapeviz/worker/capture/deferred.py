"""Numeric work on big tensors done beside the program: a FIFO of (tensor, job) that one
background thread empties while the user's program runs, bounded in the bytes it holds.

NumPy's reductions release the GIL, so a big tensor's stats cost the program little
when a core is free; when the held bytes pass the budget, the op callback does the
oldest jobs itself, so memory stays bounded. `drain` finishes everything still queued.
"""
from __future__ import annotations

import os
import threading
from collections import deque

DEFAULT_BUDGET = 256 * 2**20       # bytes of tensors held for jobs not yet done


class Deferred:
    def __init__(self, budget: int = DEFAULT_BUDGET):
        self.budget = budget
        self._jobs: deque = deque()     # (fn, tensor, nbytes)
        self._held = 0
        self._lock = threading.Condition()
        self._thread = None
        self._pid = None
        self._closed = False

    def submit(self, fn, tensor, nbytes: int) -> None:
        """Run `fn(tensor)` later, in order with the other jobs; `tensor` is held meanwhile."""
        if self._closed:
            fn(tensor)
            return
        with self._lock:
            self._jobs.append((fn, tensor, nbytes))
            self._held += nbytes
            over = self._held > self.budget
            self._lock.notify()
        self._start()
        while over:                       # back-pressure: bounded memory beats speed
            over = self._run_one() and self._held > self.budget

    @property
    def held(self) -> int:
        """Bytes of tensors held now for jobs not yet done."""
        return self._held

    def idle(self) -> bool:
        """No job queued, and none running (its tensor released)."""
        with self._lock:
            return not self._jobs and not self._held

    def drain(self) -> None:
        """Finish every queued job (in this thread, helped by the background one), and let
        the background thread end."""
        while self._run_one():
            pass
        with self._lock:                  # a job the background thread is still running
            while self._held and self._alive():
                self._lock.wait(0.05)
            self._closed = True
            self._lock.notify_all()

    def _alive(self) -> bool:
        # A program that forked leaves its child without our thread: the child drains alone.
        return (self._thread is not None and self._pid == os.getpid()
                and self._thread.is_alive())

    def _start(self) -> None:
        if not self._alive() and not self._closed:
            self._pid = os.getpid()
            self._thread = threading.Thread(target=self._serve, name="tapeviz-stats",
                                            daemon=True)
            self._thread.start()

    def _run_one(self) -> bool:
        with self._lock:
            if not self._jobs:
                return False
            fn, tensor, nbytes = self._jobs.popleft()
        try:
            fn(tensor)
        except Exception:                 # a description we could not make stays empty
            pass
        finally:
            with self._lock:
                self._held -= nbytes
                self._lock.notify_all()
        return True

    def _serve(self) -> None:
        # The lowest priority: the stats use a core only when the program leaves it idle
        # (eager Python between ops leaves TensorFlow's threads idle often); when they fall
        # behind, the byte budget's back-pressure makes the op callback do them instead.
        # Linux takes a thread id here, so this thread alone is lowered.
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        except (OSError, AttributeError):
            pass
        while True:
            with self._lock:
                while not self._jobs and not self._closed:
                    self._lock.wait()
                if self._closed:
                    return
            self._run_one()
