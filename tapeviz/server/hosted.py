"""Hosted mode's walls: what stands between strangers' programs and the machine (bubblewrap,
per-job user ids, memory cgroups), set up once per server or refused, and said to the page
(`warnings`) and the operator (`notes`, `rows`). Local mode has none of them.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Optional

from . import sandbox
from .cgroup import MemoryCgroups
from .config import Config, Limits

log = logging.getLogger("tapeviz.runner")


class SandboxUnavailable(RuntimeError):
    """Hosted mode cannot build its walls here and was not told to run without them."""


@dataclass
class Walls:
    """The walls this server put up; every field empty in local mode."""
    bwrap: Optional[str] = None                 # the bubblewrap binary each worker runs in
    uids: Optional[sandbox.UidPool] = None      # a user id per worker (the server is root)
    cgroups: Optional[MemoryCgroups] = None     # a memory cgroup per worker, when available
    warnings: list = field(default_factory=list)    # for the page, e.g. hosted without bwrap
    notes: list = field(default_factory=list)       # for the operator: a wall this machine cannot give

    @property
    def sandboxed(self) -> bool:
        return self.bwrap is not None

    def rows(self, limits: Limits, start: tuple) -> list:
        """(wall, on, detail) rows for the operator: what stands between programs and the
        machine on this instance. `start`: how workers start (pool.WarmPool.start_row)."""
        rows = [("sandbox (bubblewrap)", self.sandboxed,
                 "no network, read-only system, own process and IPC namespaces, only the "
                 "package of the app" if self.sandboxed else "off"),
                ("seccomp filter", self.sandboxed and sandbox.seccomp.program() is not None,
                 "no new namespaces, mount, ptrace, keyctl, bpf, io_uring, memfd, SysV shm"),
                ("own user id per worker", self.uids is not None, "when the server is root"),
                start,
                ("memory cgroup per worker", self.cgroups is not None and self.cgroups.available,
                 self.cgroups.describe() if self.cgroups is not None else "local mode")]
        if limits.address_space_bytes:
            rows.append(("resource limits", True,
                         f"{limits.timeout_s:g} s wall, {limits.cpu_s} s CPU, "
                         f"{limits.address_space_bytes / 2**30:g} GiB address space, "
                         f"{limits.processes} processes, {limits.open_files} open files"))
        return rows


def set_up(config: Config) -> Walls:
    """The walls, or a refusal: hosted mode never runs strangers' code unsandboxed unless
    the operator said so (TAPEVIZ_SANDBOX=none). Local mode: no walls."""
    walls = Walls()
    if not config.hosted:
        return walls
    root = sandbox.UidPool.available()
    if config.sandbox != "none":
        ok, why = sandbox.probe()
        if not ok:
            raise SandboxUnavailable(
                f"Hosted mode refuses to run programs unsandboxed: {why}. Install the "
                f"'bubblewrap' package and allow it namespaces (see README, Hosting), or "
                f"set TAPEVIZ_SANDBOX=none to run with resource limits only.")
        walls.bwrap = sandbox.find_bwrap()
    elif not root:
        # Workers would share the server's uid with nothing between them: one could
        # write a job into another's stdin through /proc. Refused rather than patched.
        raise SandboxUnavailable(
            "Hosted mode without a sandbox needs a server running as root (each worker "
            "then gets its own user id); without root it refuses. Use bubblewrap, or "
            "local mode for your own programs.")
    else:
        walls.warnings.append("Hosted mode with the sandbox turned off (TAPEVIZ_SANDBOX=none):"
                              " programs run with resource limits and their own user ids "
                              "only; they can read the machine's world-readable files and "
                              "open network connections.")
    _user_ids(walls, root)
    walls.cgroups = MemoryCgroups.find()
    walls.cgroups.remove_stale()
    if not walls.cgroups.available:
        walls.notes.append(f"Memory: {walls.cgroups.describe()}; each worker is bounded by "
                           f"its address-space limit, and memfd and SysV shared memory are "
                           f"refused; give the container a memory limit for the rest.")
    for text in walls.warnings:
        log.warning("tapeviz: %s", text)
    for text in walls.notes:
        log.info("tapeviz: %s", text)
    return walls


def _user_ids(walls: Walls, root: bool) -> None:
    """A user id per worker when the server is root; else the warning of what that costs."""
    if root and walls.bwrap is None and (hidden := sandbox.unsearchable_python_dir()):
        walls.warnings.append(
            f"Python lives under {hidden}, which other users cannot enter: with the "
            f"sandbox off, a worker running as its own user id fails to import modules "
            f"it had not loaded yet. Install Python under /usr/local or /opt, or use "
            f"the sandbox (it shows Python to every worker).")
    if root:
        walls.uids = sandbox.UidPool()
    else:
        walls.warnings.append(
            "The server does not run as root, so workers share its user id: the process "
            "limit counts all of them together, and one program's fork bomb can hold "
            "back the others until its time limit.")


def why_spawned(config: Config, walls: Walls) -> str:
    """"" when workers fork from a zygote, else why they are spawned."""
    if not config.zygote:
        return "TAPEVIZ_ZYGOTE=0"
    if not config.hosted:
        return ""
    if walls.bwrap is None:
        return "no sandbox to run the zygote in"
    if walls.uids is None:
        return "the server is not root, so no per-job user ids"
    if sandbox.seccomp.program() is None:
        return "no seccomp table for this machine"
    return ""
