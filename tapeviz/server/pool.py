"""The warm workers: processes that imported TensorFlow before a job came, forked from a
zygote (TF imported once) or, where the walls forbid it, spawned each into its own sandbox.
Each job takes one and the pool refills behind it.
"""
from __future__ import annotations

import logging
import os
import tempfile
import threading
import time
from typing import Optional

from . import process, sandbox
from .config import Config
from .hosted import Walls, why_spawned
from .process import Worker
from .zygote import Zygote

READY_TIMEOUT_S = 120.0      # a cold worker on a busy machine may take this long to import TF
log = logging.getLogger("tapeviz.runner")


class WarmPool:
    """`config.warm` idle workers ready for the next job, behind the `walls` of this server.

    Workers fork from a zygote: every Run finds a worker in milliseconds, each job still in
    a process of its own. Hosted mode's zygote runs in the sandbox and each child builds its
    own walls; where it cannot (no root, no seccomp table, walls that do not hold) each
    worker is spawned into its own bwrap (`spawned_why` says why)."""

    def __init__(self, config: Config, walls: Walls):
        self.config, self.walls = config, walls
        self._lock = threading.Lock()
        self._idle: list = []
        self._closed = False
        self.zygote: Optional[Zygote] = None
        self._zygote_lock = threading.Lock()
        self.spawned_why = why_spawned(config, walls)
        if not self.spawned_why:
            self.zygote = _start_zygote(config, walls.bwrap)
            threading.Thread(target=self.fill, daemon=True).start()
        else:
            self.fill()

    def _new_worker(self) -> Worker:
        zygote = self.zygote
        if zygote is not None:
            if not zygote.alive and not self._closed:
                with self._zygote_lock:
                    if self.zygote is zygote:
                        self.zygote = _start_zygote(self.config, self.walls.bwrap)
                    zygote = self.zygote
            zygote.ready.wait(READY_TIMEOUT_S)
            if zygote.walls_failed:
                self._give_up_forking(zygote)
                zygote = None
        walls = self.walls
        return Worker(self.config, walls.bwrap, walls.uids, walls.cgroups, zygote)

    def _give_up_forking(self, zygote: Zygote) -> None:
        """The sandboxed zygote's children could not enter their walls: spawn from now on."""
        with self._zygote_lock:
            if self.zygote is not zygote:
                return
            self.zygote = None
            self.spawned_why = f"the fork server's walls did not hold: {zygote.walls_failed}"
            self.walls.notes.append(f"Workers are spawned: {self.spawned_why}.")
            log.warning("tapeviz: %s", self.walls.notes[-1])
        zygote.close()

    def fill(self) -> None:
        """Top the idle workers up to `config.warm`, dropping any that died."""
        with self._lock:
            if self._closed:
                return
            dead = [w for w in self._idle if not _usable(w)]
            self._idle = [w for w in self._idle if _usable(w)]
            while len(self._idle) < self.config.warm:
                self._idle.append(self._new_worker())
        for w in dead:
            w.kill()

    def take(self) -> Worker:
        """A worker for one job (an idle one, else a new one); the pool refills meanwhile."""
        with self._lock:
            worker = self._idle.pop(0) if self._idle else None
        if worker is not None and not _usable(worker):
            worker.kill()
            worker = None
        if worker is None:
            worker = self._new_worker()
        threading.Thread(target=self.fill, daemon=True).start()
        return worker

    def warmed(self, timeout: float = READY_TIMEOUT_S) -> bool:
        """Wait until the warm workers are ready to take a job."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                idle = list(self._idle)
            if len(idle) >= self.config.warm and all(w.ready.is_set() for w in idle):
                return True
            time.sleep(0.1)
        return False

    def start_row(self) -> tuple:
        """How workers start, as a row of the walls: forked from the (sandboxed) zygote, or
        spawned, and why."""
        if self.zygote is None:
            return ("fork server", False,
                    f"each worker is spawned and imports TensorFlow ({self.spawned_why})")
        if not self.config.hosted:
            return ("fork server", True, "workers fork from a zygote that imported "
                    "TensorFlow; each job in a fresh process")
        return ("fork server", True, "workers fork from a zygote that imported TensorFlow "
                "inside the sandbox and never runs user code; each job then enters its own "
                "pid, mount, IPC and network namespaces, a private /tmp and /dev/shm, its "
                "memory cgroup and user id, and the seccomp filter")

    def close(self) -> None:
        """Stop the idle workers and the zygote; no new ones start."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for w in idle:
            w.kill()
        if self.zygote is not None:
            self.zygote.close()


def _usable(worker) -> bool:
    """An idle worker can take a job: it runs, and (if forked) its zygote still watches it."""
    return worker.proc.poll() is None and not getattr(worker.proc, "orphaned", False)


def _start_zygote(config: Config, bwrap: Optional[str] = None) -> Zygote:
    """Local mode's zygote, or with `bwrap` hosted mode's, inside the sandbox."""
    if bwrap is None:
        return Zygote(process.worker_env(config), tempfile.gettempdir(), start=process.spawn)
    env = process.worker_env(config, sandboxed=True)
    seccomp_fd = sandbox.seccomp_file()
    try:
        return Zygote(env, tempfile.gettempdir(), start=process.spawn,
                      wrap=sandbox.zygote_wrap(bwrap, env), seccomp_fd=seccomp_fd)
    finally:
        os.close(seccomp_fd)
