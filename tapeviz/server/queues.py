"""Waiting for a worker: a fair first-come queue that tells each job its place, and the
handle by which `Runner.cancel(owner)` reaches a queued or running job.
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:     # annotations only: those modules import this one
    from .process import Worker
    from .training_job import TrainingJob



class FairQueue:
    """`slots` jobs at once; the rest wait first come, first served, and learn their place."""

    def __init__(self, slots: int):
        self.slots = max(1, int(slots))
        self.busy = 0
        self.tickets: list = []
        self.cond = threading.Condition()

    def acquire(self, on_wait=None, cancelled: Optional[threading.Event] = None) -> bool:
        """True with a slot held; False when cancelled while waiting."""
        with self.cond:
            if self.busy < self.slots and not self.tickets:
                self.busy += 1
                return True
            ticket = object()
            self.tickets.append(ticket)
            told = None
            try:
                while True:
                    if cancelled is not None and cancelled.is_set():
                        return False
                    place = self.tickets.index(ticket) + 1
                    if place == 1 and self.busy < self.slots:
                        self.busy += 1
                        return True
                    if on_wait is not None and place != told:
                        told = place
                        self.cond.release()      # the callback may draw on a page: not locked
                        try:
                            on_wait(place)
                        finally:
                            self.cond.acquire()
                        continue
                    self.cond.wait(0.5)
            finally:
                self.tickets.remove(ticket)
                self.cond.notify_all()

    def release(self) -> None:
        with self.cond:
            self.busy -= 1
            self.cond.notify_all()

    @property
    def waiting(self) -> int:
        return len(self.tickets)


class Job:
    """What `Runner.cancel` needs to reach one run or training job of an owner."""

    def __init__(self, owner):
        self.owner = owner
        self.cancelled = threading.Event()
        self.worker: Optional[Worker] = None
        self.training: Optional[TrainingJob] = None

    def cancel(self) -> None:
        self.cancelled.set()
        if self.training is not None:
            self.training.cancel()
        elif self.worker is not None:
            self.worker.kill()
