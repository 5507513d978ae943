"""Hosted mode's walls around a worker: the bubblewrap (`bwrap`) command line, the user id a
worker runs as, and the clean-up of everything a worker left running. No TensorFlow here.

Inside bwrap a worker has no network, a read-only view of the system and of Python, the
tapeviz package at a neutral path, its own process and IPC namespaces, and one writable
directory: its fresh temporary working directory. Nothing of the app's own files is there.
"""
from __future__ import annotations

import os
import shutil
import signal
import site
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterable, Optional

from . import seccomp

PACKAGE_DIR = Path(__file__).resolve().parent.parent   # the tapeviz package itself
APP_ROOT = PACKAGE_DIR.parent                        # the repository / app directory
SANDBOX_PACKAGE_ROOT = "/opt/tapeviz"                # where the package appears inside bwrap
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# Harmless system files some libraries look for (dynamic loader cache, Debian's alternatives).
SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives",
                "/etc/localtime")

# Each hosted worker runs as its own unprivileged uid (when the server is root), so that the
# kernel's per-user process limit bounds that worker alone, and a kill by uid reaches every
# process it started, even ones that left its process group.
UID_BASE = int(os.environ.get("TAPEVIZ_UID_BASE", 61000))
UID_COUNT = 1000


def _python_dirs() -> list:
    """The directories the interpreter and its packages live in (what a worker must read).

    A virtualenv inside the app's own directory (`.venv` in the checkout, the usual install)
    is shown too, at its own path: only it, not the rest of the app's directory."""
    prefixes = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    candidates = prefixes + [os.path.dirname(sys.executable),
                             os.path.dirname(os.path.realpath(sys.executable))]
    try:
        candidates += site.getsitepackages()
    except AttributeError:      # some virtualenvs' old site.py
        pass
    candidates += [p for p in sys.path if p]
    app = str(APP_ROOT)
    # Prefixes inside the app's directory (a virtualenv) may be shown; nothing else there.
    inside = [os.path.realpath(p) for p in prefixes]
    inside = [p for p in inside if p.startswith(app + os.sep)]
    out = []
    for path in candidates:
        path = os.path.realpath(path)
        if not os.path.isdir(path) or path == "/":
            continue
        # Never the app's own directory (or one above it): only the package is shown, below.
        if path == app or app.startswith(path + os.sep):
            continue
        if path.startswith(app + os.sep) and not any(
                path == p or path.startswith(p + os.sep) for p in inside):
            continue
        out.append(path)
    return _outermost(out)


def unsearchable_python_dir() -> Optional[str]:
    """A directory above Python (or its virtualenv) that other users cannot enter, such as
    /root (0700) for a Python under /root/.pyenv, or None. Inside bwrap it does not matter
    (`_dirs_for` makes the ancestors 0755); with the sandbox off, a worker that dropped to
    its own uid could not import what it had not imported yet."""
    for prefix in {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix)}:
        path = Path(prefix)
        for folder in [path, *path.parents]:
            try:
                if not folder.stat().st_mode & 0o001:
                    return str(folder)
            except OSError:
                return str(folder)
    return None


def _outermost(paths: Iterable[str]) -> list:
    """Drop paths inside another listed path, and the system dirs bound anyway."""
    keep = []
    for path in sorted(set(paths), key=len):
        roots = keep + [d for d in SYSTEM_DIRS if os.path.isdir(d) and not os.path.islink(d)]
        if any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots):
            continue
        keep.append(path)
    return keep


def _dirs_for(dest: str, made: set) -> list:
    """`--dir` arguments (mode 0755) for the ancestors of `dest` inside the sandbox. bwrap
    would otherwise copy the host's modes, and /root is 0700: an unprivileged worker could
    not reach a Python installed under it."""
    args = []
    parts = Path(dest).parts[1:-1]
    path = ""
    for part in parts:
        path += "/" + part
        if path in made or any(path == d for d in SYSTEM_DIRS):
            continue
        made.add(path)
        args += ["--perms", "0755", "--dir", path]
    return args


SANDBOX_MNIST_DIR = "/opt/mnist"
# Hosted mode's fork server: the zygote's bwrap has a small tmpfs here; each forked worker
# mounts its own (FORKED_DISK when no disk limit is set) over it and works in it. Like a
# spawned worker's, it is below a /tmp that only root may write.
FORKED_WORKDIR = "/tmp/tapeviz-run"
FORKED_DISK = 64 * 2**20


def zygote_wrap(bwrap: str, env: dict):
    """The command line wrapper that starts the hosted zygote in the sandbox's view (no
    network, read-only system, own pid namespace) but without the seccomp filter: it needs
    unshare and mount to build each child's walls, and never runs user code itself."""
    return lambda command: bwrap_args(bwrap, FORKED_WORKDIR, env, command,
                                      mnist_dir=os.environ.get("TAPEVIZ_MNIST_DIR"),
                                      disk_bytes=2**20)


def bwrap_args(bwrap: str, workdir: str, env: dict, command: list,
               mnist_dir: Optional[str] = None, disk_bytes: Optional[int] = None,
               seccomp_fd: Optional[int] = None) -> list:
    """The full bwrap command line that runs `command` in the sandbox. `mnist_dir` (the
    server's $TAPEVIZ_MNIST_DIR) is shown read-only at /opt/mnist: a sandboxed training
    job has no network to download MNIST with. With `disk_bytes`, the working directory is
    a tmpfs of that size at the same path, so no program can fill the server's disk.
    `seccomp_fd` (see `seccomp_file`) is an open file holding the filter bwrap installs."""
    args = [bwrap, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", "--die-with-parent", "--new-session",
            "--hostname", "tapeviz"]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    made: set = set()
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
    for f in SYSTEM_FILES:
        if os.path.exists(f):
            args += _dirs_for(f, made) + ["--ro-bind", f, f]
    for d in _python_dirs():
        args += _dirs_for(d, made) + ["--ro-bind", d, d]
    package_dest = f"{SANDBOX_PACKAGE_ROOT}/tapeviz"
    args += _dirs_for(package_dest, made) + ["--ro-bind", str(PACKAGE_DIR), package_dest]
    if mnist_dir and os.path.exists(mnist_dir):
        args += _dirs_for(SANDBOX_MNIST_DIR, made) + [
            "--ro-bind", os.path.realpath(mnist_dir), SANDBOX_MNIST_DIR]
        env = dict(env, TAPEVIZ_MNIST_DIR=SANDBOX_MNIST_DIR)
    args += ["--proc", "/proc", "--dev", "/dev",
             "--perms", "1777", "--size", str(64 * 2**20), "--tmpfs", "/dev/shm"]
    args += _dirs_for(workdir, made)
    if disk_bytes:
        args += ["--perms", "1777", "--size", str(int(disk_bytes)), "--tmpfs", workdir]
    else:
        args += ["--bind", workdir, workdir]
    args += ["--chdir", workdir]
    args += ["--clearenv"]
    for key, value in env.items():
        args += ["--setenv", key, value]
    return args + ["--"] + list(command)


def seccomp_file() -> Optional[int]:
    """A read-only fd holding the seccomp filter (an unlinked temporary file), for one bwrap
    to read; None on an architecture without a table. The caller closes it after the start."""
    filter_program = seccomp.program()
    if filter_program is None:
        return None
    import tempfile
    fd, path = tempfile.mkstemp(prefix="tapeviz-seccomp-")
    try:
        os.unlink(path)
        os.write(fd, filter_program)
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        raise
    return fd


_probe_lock = threading.Lock()
_probe_result: dict = {}


def find_bwrap() -> Optional[str]:
    return shutil.which("bwrap")


def probe(bwrap: Optional[str] = None) -> tuple:
    """(True, "") when bwrap can build our sandbox on this machine, else (False, why).

    Run once per process: a container without the right privileges has bwrap installed
    and still cannot create namespaces."""
    bwrap = bwrap or find_bwrap()
    if not bwrap:
        return False, "bubblewrap (bwrap) is not installed"
    with _probe_lock:
        if bwrap not in _probe_result:
            import tempfile
            with tempfile.TemporaryDirectory(prefix="tapeviz-probe-") as tmp:
                fd = seccomp_file()
                cmd = bwrap_args(bwrap, tmp, {"PATH": "/usr/bin:/bin"},
                                 [sys.executable, "-c", "print('ok')"], seccomp_fd=fd)
                try:
                    done = subprocess.run(cmd, capture_output=True, text=True, timeout=30,
                                          pass_fds=() if fd is None else (fd,))
                    ok = done.returncode == 0 and done.stdout.strip() == "ok"
                    why = "" if ok else (done.stderr.strip().splitlines() or ["failed"])[-1]
                except (OSError, subprocess.SubprocessError) as e:
                    ok, why = False, f"{type(e).__name__}: {e}"
                finally:
                    if fd is not None:
                        os.close(fd)
            _probe_result[bwrap] = (ok, why and f"bwrap cannot run here ({why})")
        return _probe_result[bwrap]


class UidPool:
    """Unprivileged uids handed to workers one each; only when the server runs as root.

    A uid is claimed with an flock on a file named after it, so that two Runners, in this
    process or in another tapeviz server on the machine, never hand out the same uid (and
    never kill each other's workers when they clean a uid up)."""

    LOCK_DIR = Path(os.environ.get("TAPEVIZ_UID_LOCK_DIR", "/run/tapeviz-uids"))

    def __init__(self, base: int = UID_BASE, count: int = UID_COUNT):
        self.base, self.count = base, count
        self._held: dict = {}
        self._lock = threading.Lock()
        self._next = 0
        # Uids known to run nothing. A sweep reads every process's status under the GIL of
        # a server busy drawing for a class, which took up to 0.4 s each; so the whole range
        # is swept once, here, and a uid again only when it may hold something.
        self._clean: set = set()
        if self.available():
            busy = {uid for _, uid in _process_uids()}
            self._clean = set(range(base, base + count)) - busy
        self._me = str(os.getpid()).encode()

    @staticmethod
    def available() -> bool:
        return os.geteuid() == 0

    def _lock_dir(self) -> Path:
        try:
            self.LOCK_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
            return self.LOCK_DIR
        except OSError:
            import tempfile
            fallback = Path(tempfile.gettempdir()) / "tapeviz-uids"
            fallback.mkdir(mode=0o700, exist_ok=True)
            return fallback

    def take(self) -> Optional[int]:
        if not self.available():
            return None
        import fcntl
        folder = self._lock_dir()
        with self._lock:
            for i in range(self.count):
                uid = self.base + (self._next + i) % self.count
                if uid in self._held:
                    continue
                fd = os.open(folder / str(uid), os.O_RDWR | os.O_CREAT, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    os.close(fd)
                    continue
                self._held[uid] = fd
                self._next = (self._next + i + 1) % self.count
                # The lock file names the server that last held the uid: another one (which
                # may have crashed with its workers running) or none we know clean -> sweep.
                if uid not in self._clean or os.pread(fd, 32, 0) not in (b"", self._me):
                    kill_uid(uid)
                os.ftruncate(fd, 0)
                os.pwrite(fd, self._me, 0)
                self._clean.discard(uid)
                return uid
            return None

    def give_back(self, uid: Optional[int], gone: bool = False) -> None:
        """`gone`: the caller saw everything of the uid end (a forked job's pid namespace
        is over once its first process was reaped), so no sweep is needed."""
        if uid is None:
            return
        if not gone:
            kill_uid(uid)
        with self._lock:
            fd = self._held.pop(uid, None)
            self._clean.add(uid)
        if fd is not None:
            os.close(fd)              # releases the flock


def _process_uids():
    """(pid, real uid) of every live process (read from /proc; no psutil needed)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", "rb") as f:
                for line in f:
                    if line.startswith(b"State:") and line.split()[1] in (b"Z", b"X"):
                        break            # already dead, waiting to be reaped
                    if line.startswith(b"Uid:"):
                        yield int(entry), int(line.split()[1])
                        break
        except OSError:
            continue


def processes_of(uid: int) -> list:
    """Pids whose real uid is `uid`."""
    return [pid for pid, owner in _process_uids() if owner == uid]


def kill_uid(uid: int, rounds: int = 20) -> None:
    """SIGKILL every process of `uid`; repeat while a fork bomb still makes new ones."""
    if uid is None or uid < 1000:
        return
    kill_all(lambda: processes_of(uid), rounds)


def kill_all(list_pids, rounds: int = 20, pause: float = 0.0) -> None:
    """SIGKILL the processes `list_pids()` names, again and again while new ones appear
    (a fork racing the kill), at most `rounds` times."""
    for _ in range(rounds):
        pids = list_pids()
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if pause:
            time.sleep(pause)
