"""Waiting for a worker, fairly: every live job (queued or running, runs and training runs
alike) holds a ticket of its owner (a session) and its client (a browser). A ticket's turn
is how many jobs its owner (or its client, the larger) started since it last had none live;
a free slot goes to the lowest turn, then the earliest. So the line is round-robin: one
session's or browser's fourth job never runs before another's first. Each owner and client
may hold only so many live jobs. A slot is for CPU: a held `Slot` whose program sleeps gives
way to the next in line (sleepers.py), up to `sleepers` such programs at once. No
TensorFlow, no Streamlit.
"""
from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass
from typing import Optional

from .sleepers import Watch


class TooManyJobs(RuntimeError):
    """An owner or client already holds its cap of queued and running jobs."""


@dataclass(frozen=True)
class Ticket:
    seq: int                  # arrival order: the tie-break among equal turns
    owner: object = None      # None: counted for nobody (the command line, a test)
    client: object = None
    turn: int = 0


class Shares:
    """The live tickets of every queue, under one lock that the queues wait on."""

    def __init__(self, per_owner: Optional[int] = None, per_client: Optional[int] = None):
        self.per_owner, self.per_client = per_owner, per_client
        self.cond = threading.Condition()
        self.live: list = []
        self._turns: dict = {}               # (owner|client, id) -> the turn of its next job
        self._seq = itertools.count()

    def join(self, owner=None, client=None) -> Ticket:
        """A ticket for a new job; TooManyJobs (saying which cap) when it would pass one."""
        with self.cond:
            for key, value, cap, who in (("owner", owner, self.per_owner, "this session"),
                                         ("client", client, self.per_client, "this browser")):
                held = sum(1 for t in self.live if value is not None and getattr(t, key) == value)
                if cap is not None and value is not None and held >= cap:
                    raise TooManyJobs(
                        f"{who.capitalize()} already has {held} runs or training runs waiting "
                        f"or running, the most one may have on this server: wait for one to "
                        f"end, or cancel one")
            turn = max(self._turns.get(("owner", owner), 0) if owner is not None else 0,
                       self._turns.get(("client", client), 0) if client is not None else 0)
            for key in (("owner", owner), ("client", client)):
                if key[1] is not None:
                    self._turns[key] = self._turns.get(key, 0) + 1
            ticket = Ticket(next(self._seq), owner, client, turn)
            self.live.append(ticket)
            return ticket

    def leave(self, ticket: Ticket) -> None:
        with self.cond:
            if ticket in self.live:
                self.live.remove(ticket)
            for key in ("owner", "client"):       # idle again: its next job starts at turn 0
                value = getattr(ticket, key)
                if value is not None and not any(getattr(t, key) == value for t in self.live):
                    self._turns.pop((key, value), None)
            self.cond.notify_all()

    def rank(self, ticket: Ticket) -> int:
        return ticket.turn

    def order(self, tickets) -> list:
        return sorted(tickets, key=lambda t: (self.rank(t), t.seq))


class FairQueue:
    """`slots` jobs at once; the rest wait in the fair order of `shares` and learn their
    place (which can improve when a job of a busier owner arrives behind them, too)."""

    def __init__(self, slots: int, shares: Optional[Shares] = None, sleepers: int = 0):
        self.slots = max(1, int(slots))
        self.shares = shares or Shares()
        self.busy = 0
        self.sleepers = max(0, int(sleepers))    # programs that gave their slot way, at most
        self.sleeping = 0
        self.tickets: list = []

    def acquire(self, ticket: Ticket, tell_place=None,
                cancelled: Optional[threading.Event] = None) -> bool:
        """True with a slot held; False when cancelled while waiting. `tell_place(place)`
        each time its place in line changes (the runner makes it the job's queued event)."""
        cond = self.shares.cond
        with cond:
            self.tickets.append(ticket)
            told = None
            try:
                while True:
                    if cancelled is not None and cancelled.is_set():
                        return False
                    place = self.shares.order(self.tickets).index(ticket) + 1
                    if place == 1 and self.busy < self.slots:
                        self.busy += 1
                        return True
                    if tell_place is not None and place != told:
                        told = place
                        cond.release()      # not locked while the job is told
                        try:
                            tell_place(place)
                        finally:
                            cond.acquire()
                        continue
                    cond.wait(0.5)
            finally:
                self.tickets.remove(ticket)
                cond.notify_all()

    def release(self) -> None:
        with self.shares.cond:
            self.busy -= 1
            self.shares.cond.notify_all()

    def slot(self) -> "Slot":
        """The slot `acquire` just gave, as a handle: call it to give the slot back."""
        return Slot(self)

    @property
    def waiting(self) -> int:
        return len(self.tickets)


class Slot:
    """One held slot of a FairQueue. Called (once; later calls do nothing) it gives the
    slot back. `give_way()` stops it counting while its program sleeps and someone waits;
    `reclaim()` counts it again, past `slots` if need be, so that the next in line waits
    until the CPU is free again."""

    def __init__(self, line: FairQueue):
        self.line, self.counted, self.done = line, True, False
        self.watch = None                      # its sleepers.Watch, once the program runs

    def __call__(self) -> None:
        with self.line.shares.cond:
            if self.done:
                return
            self.done = True
            if self.counted:
                self.line.busy -= 1
            else:
                self.line.sleeping -= 1
            self.line.shares.cond.notify_all()
        if self.watch is not None:
            self.watch.stop()

    def watch_cpu(self, worker) -> None:
        """Let `worker`'s program give way while it sleeps (when this line allows any)."""
        if self.line.sleepers:
            self.watch = Watch(self, worker)

    def give_way(self) -> bool:
        line = self.line
        with line.shares.cond:
            if self.done or not self.counted or not line.tickets \
                    or line.sleeping >= line.sleepers:
                return False
            self.counted = False
            line.busy -= 1
            line.sleeping += 1
            line.shares.cond.notify_all()
            return True

    def reclaim(self) -> None:
        line = self.line
        with line.shares.cond:
            if self.done or self.counted:
                return
            self.counted = True
            line.busy += 1
            line.sleeping -= 1
