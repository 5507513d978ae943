"""A run slot is for CPU: a program that sleeps (its CPU time not growing) while others wait
stops counting against the slots, keeps running to its own fixed deadline, and counts again
if it wakes and computes. Hosted mode's answer to tabs that forge "stopped" and sleep.

CPU time is read from /proc for the worker's processes: those of its memory cgroup, else
those of its own uid. Where neither can be read, nothing yields. No TensorFlow.
"""
from __future__ import annotations

import os
import threading
import time

IDLE_S = 2.0             # CPU time flat for this long: the program sleeps
POLL_S = 0.5             # how often a running program's CPU time is read
AWAKE_SHARE = 0.25       # of one core over a poll: a yielded program computes again
MAX_SLEEPER_BYTES = 2**30    # a program sleeping on more memory than this keeps its slot
_TICK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def worker_pids(worker) -> list:
    """The server-side pids of everything `worker` runs: its cgroup's, else its uid's."""
    cgroup = getattr(worker, "cgroup", None)
    if cgroup is not None:
        return cgroup.pids()
    uid = getattr(worker, "uid", None)
    if uid is None:
        return []
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.stat(f"/proc/{name}").st_uid == uid:   # a stat, not a read of status
                    pids.append(int(name))
            except OSError:
                pass
    return pids


def usage(pids: list) -> tuple:
    """(CPU seconds, resident bytes) of `pids`, children they reaped included."""
    cpu = rss = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/statm") as f:
                rss += int(f.read().split()[1]) * _PAGE
        except (OSError, IndexError, ValueError):
            continue
        # utime, stime, cutime, cstime: fields 14-17 of stat(5), 12-15 after the name
        cpu += sum(int(v) for v in fields[11:15])
    return cpu / _TICK, rss


class Watch:
    """One running program's CPU time, read every POLL_S on a thread of its own, telling
    its slot (queues.Slot) to yield while it sleeps and to count again once it computes."""

    def __init__(self, slot, worker, pids=worker_pids):
        self.slot, self.worker, self._pids = slot, worker, pids
        self.stopped = threading.Event()
        threading.Thread(target=self._run, daemon=True, name="tapeviz-sleep-watch").start()

    def stop(self) -> None:
        self.stopped.set()

    def _run(self) -> None:
        last_cpu, flat_since = None, time.monotonic()
        while not self.stopped.wait(POLL_S) and not self.slot.done:
            pids = self._pids(self.worker)
            if not pids:
                if last_cpu is None:
                    continue         # not started yet (or no way to read it: never yields)
                return
            cpu, rss = usage(pids)
            now = time.monotonic()
            grew = 0.0 if last_cpu is None else cpu - last_cpu
            last_cpu = cpu if last_cpu is None else max(cpu, last_cpu)
            if grew > AWAKE_SHARE * POLL_S:
                flat_since = now
                self.slot.reclaim()
            elif now - flat_since >= IDLE_S and rss <= MAX_SLEEPER_BYTES:
                self.slot.give_way()

