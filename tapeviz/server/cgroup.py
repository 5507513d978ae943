"""A memory cgroup per hosted worker, where the machine lets the server make one: a hard
bound on everything the worker's processes hold (heap, memfd and tmpfs pages, page cache),
which the address-space rlimit cannot see, and a kill that reaches every process in it.

cgroup v2 (`memory.max`, `memory.swap.max`, `memory.oom.group`, `cgroup.kill`) is used when
the server's cgroup delegates the memory controller; the v1 memory hierarchy otherwise.
`MemoryCgroups.find()` says why neither works, for the page to show.
"""
from __future__ import annotations

import errno
import itertools
import os
import time
from pathlib import Path
from typing import Optional

from . import sandbox

_counter = itertools.count()


def _own_cgroups() -> dict:
    """{controller or "" (v2): path} from /proc/self/cgroup."""
    out = {}
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for c in controllers.split(",") if controllers else [""]:
                out[c] = path
    except (OSError, ValueError):
        pass
    return out


def _mounts(fstype: str) -> list:
    """(mount point, super options) of the mounts of `fstype`, from /proc/self/mountinfo."""
    out = []
    try:
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            left, _, right = line.partition(" - ")
            fields = right.split()
            if fields and fields[0] == fstype:
                out.append((left.split()[4], fields[-1]))
    except OSError:
        pass
    return out


def _write(path: Path, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


class MemoryCgroups:
    """Where worker cgroups are made (`parent`), in which version; `why` when nowhere."""

    def __init__(self, parent: Optional[Path], version: int, why: str = ""):
        self.parent, self.version, self.why = parent, version, why

    @property
    def available(self) -> bool:
        return self.parent is not None

    def describe(self) -> str:
        if not self.available:
            return f"no per-worker memory cgroup ({self.why})"
        return f"cgroup v{self.version} memory limit per worker"

    @classmethod
    def find(cls) -> "MemoryCgroups":
        if os.geteuid() != 0:
            return cls(None, 0, "the server is not root")
        own = _own_cgroups()
        reasons = []
        for mount, _ in _mounts("cgroup2"):
            parent = Path(mount + own.get("", "/"))
            if cls._delegate_v2(parent):
                return cls(parent, 2)
            reasons.append(f"cgroup v2 at {mount} does not delegate the memory controller")
        for mount, options in _mounts("cgroup"):
            if "memory" in options.split(",") and "memory" in own:
                parent = Path(mount + own["memory"])
                if cls._can_make(parent, "memory.limit_in_bytes"):
                    return cls(parent, 1)
                reasons.append(f"the v1 memory cgroup {parent} is not writable")
        return cls(None, 0, "; ".join(reasons) or "no cgroup filesystem is mounted")

    @staticmethod
    def _can_make(parent: Path, limit_file: str) -> bool:
        probe = parent / f"tapeviz-probe-{os.getpid()}"
        try:
            probe.mkdir()
        except OSError:
            return False
        try:
            return (probe / limit_file).exists()
        finally:
            try:
                probe.rmdir()
            except OSError:
                pass

    @classmethod
    def _delegate_v2(cls, parent: Path) -> bool:
        try:
            if "memory" not in (parent / "cgroup.controllers").read_text().split():
                return False
            if "memory" not in (parent / "cgroup.subtree_control").read_text().split():
                try:
                    _write(parent / "cgroup.subtree_control", "+memory")
                except OSError as exc:
                    if exc.errno != errno.EBUSY:
                        raise
                    # cgroup v2 hands controllers only to children of a cgroup without
                    # processes: the server (a container's only process, as in the
                    # Dockerfile) moves into a leaf of its own first.
                    leaf = parent / "tapeviz-server"
                    leaf.mkdir(exist_ok=True)
                    for pid in (parent / "cgroup.procs").read_text().split():
                        _write(leaf / "cgroup.procs", pid)
                    _write(parent / "cgroup.subtree_control", "+memory")
        except OSError:
            return False
        return cls._can_make(parent, "memory.max")

    def remove_stale(self) -> None:
        """Remove the cgroups of tapeviz servers that died without cleaning up (a killed
        server cannot): named tapeviz-<server pid>-<n>, that pid gone."""
        if not self.available:
            return
        for path in self.parent.glob("tapeviz-*-*"):
            pid = path.name.split("-")[1]
            if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                WorkerCgroup(path, self.version).remove()

    def make(self, limit_bytes: int) -> Optional["WorkerCgroup"]:
        """A fresh cgroup bounded at `limit_bytes`, or None when that fails."""
        if not self.available:
            return None
        path = self.parent / f"tapeviz-{os.getpid()}-{next(_counter)}"
        try:
            path.mkdir()
            if self.version == 2:
                _write(path / "memory.max", str(int(limit_bytes)))
                for name, value in (("memory.swap.max", "0"), ("memory.oom.group", "1")):
                    if (path / name).exists():
                        _write(path / name, value)
            else:
                _write(path / "memory.limit_in_bytes", str(int(limit_bytes)))
                if (path / "memory.memsw.limit_in_bytes").exists():   # no escape into swap
                    _write(path / "memory.memsw.limit_in_bytes", str(int(limit_bytes)))
        except OSError:
            WorkerCgroup(path, self.version).remove()
            return None
        return WorkerCgroup(path, self.version)


class WorkerCgroup:
    """One worker's cgroup: the file its first process writes itself into, a kill of all it
    holds, and its removal."""

    def __init__(self, path: Path, version: int):
        self.path, self.version = path, version

    @property
    def procs_file(self) -> str:
        return str(self.path / "cgroup.procs")

    def pids(self) -> list:
        try:
            return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return []

    def peak_bytes(self) -> Optional[int]:
        name = "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"
        try:
            return int((self.path / name).read_text())
        except (OSError, ValueError):
            return None

    def oom_killed(self) -> bool:
        """Whether the kernel killed something here for going over the limit."""
        try:
            if self.version == 2:
                for line in (self.path / "memory.events").read_text().splitlines():
                    key, value = line.split()
                    if key == "oom_kill" and int(value) > 0:
                        return True
                return False
            for line in (self.path / "memory.oom_control").read_text().splitlines():
                key, value = line.split()
                if key == "oom_kill" and int(value) > 0:
                    return True
            return False
        except (OSError, ValueError):
            return False

    def kill(self) -> None:
        """SIGKILL every process in the cgroup, however it left its process group."""
        if self.version == 2 and (self.path / "cgroup.kill").exists():
            try:
                _write(self.path / "cgroup.kill", "1")
            except OSError:
                pass
        sandbox.kill_all(self.pids, rounds=20, pause=0.02)   # v1, or a fork racing the kill

    def remove(self) -> None:
        self.kill()
        for _ in range(50):                   # rmdir waits for the last process to be reaped
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.05)
