"""One worker process as the server sees it: started (from one long-lived thread, in the
sandbox when there is one), its JSON-lines messages read into a queue, killed with all it
started, and its death described in words.
"""
from __future__ import annotations

import json
import os
import queue
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from typing import Optional

from . import protocol, sandbox
from .cgroup import MemoryCgroups
from .config import Config

PACKAGE_ROOT = sandbox.APP_ROOT    # the folder that holds the tapeviz package
MAX_MESSAGE = protocol.MAX_MESSAGE


class _Spawner:
    """Starts worker processes from one thread that lives as long as the server.

    bwrap's --die-with-parent is PR_SET_PDEATHSIG, which fires when the *thread* that
    started it exits: a worker started from a short-lived thread (a Streamlit script run,
    the pool-filling thread) would be SIGKILLed at a random moment."""

    def __init__(self):
        self._requests: queue.Queue = queue.Queue()
        self._thread: Optional[threading.Thread] = None
        self._lock = threading.Lock()

    def call(self, fn):
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, name="tapeviz-spawner",
                                                daemon=True)
                self._thread.start()
        done, box = threading.Event(), {}
        self._requests.put((fn, box, done))
        done.wait()
        if "error" in box:
            raise box["error"]
        return box["value"]

    def _serve(self):
        while True:
            fn, box, done = self._requests.get()
            try:
                box["value"] = fn()
            except BaseException as e:  # noqa: BLE001 - handed back to the caller
                box["error"] = e
            finally:
                done.set()


_spawner = _Spawner()


class Worker:
    """One worker process and the reader thread that turns its messages into a queue."""

    def __init__(self, config: Config, bwrap: Optional[str] = None,
                 uids: Optional[sandbox.UidPool] = None,
                 cgroups: Optional[MemoryCgroups] = None, zygote=None):
        self.uids = uids
        self.uid = uids.take() if uids is not None else None
        if uids is not None and self.uid is None:
            raise RuntimeError("no free user id for a worker (all of TAPEVIZ_UID_BASE's in use)")
        self.max_ops = config.limits.max_ops
        # Echoed in every message after the job: what another process writes into this
        # worker's pipes (it would need the job to know it) is a protocol breach.
        self.secret = secrets.token_hex(16)
        self.protocol_error: Optional[str] = None
        self.inbox = protocol.Inbox(self.max_ops)    # every message's budget and shape
        self.workdir = tempfile.mkdtemp(prefix="tapeviz-")
        if self.uid is not None:
            os.chown(self.workdir, self.uid, self.uid)
        memory = config.limits.memory_bytes or config.limits.address_space_bytes
        self.cgroup = cgroups.make(memory) if cgroups is not None and memory else None
        try:
            self.proc = self._fork(config, zygote, bwrap) or self._spawn(config, bwrap)
            # forked into walls: its job ran in a pid namespace of its own
            self.own_pid_namespace = not isinstance(self.proc, subprocess.Popen) and zygote.sandboxed
        except BaseException:
            if self.cgroup is not None:
                self.cgroup.remove()
            if uids is not None:
                uids.give_back(self.uid)
            shutil.rmtree(self.workdir, ignore_errors=True)
            raise
        self.messages: queue.Queue = queue.Queue()
        self.ready = threading.Event()   # set by its "ready" message, or when it is gone
        self._job_sent = False
        self._killed = False
        self._kill_lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _fork(self, config: Config, zygote, bwrap: Optional[str]):
        """A worker forked from the zygote (TF already imported), or None: local mode's
        plain zygote when no wall is asked for, or hosted mode's sandboxed one, whose child
        builds its own walls (its uid, its cgroup, a tmpfs at the sandbox's workdir)."""
        if zygote is None:
            return None
        try:
            if zygote.sandboxed:
                return zygote.fork(sandbox.FORKED_WORKDIR, uid=self.uid,
                                   disk_bytes=config.limits.disk_bytes or sandbox.FORKED_DISK,
                                   cgroup_procs=self.cgroup and self.cgroup.procs_file)
            if not bwrap and self.uid is None and self.cgroup is None:
                return zygote.fork(self.workdir)
        except OSError:
            pass                   # the zygote is gone or not ready: spawn this one
        return None

    def _spawn(self, config: Config, bwrap: Optional[str]) -> subprocess.Popen:
        """A worker started as a new process (in its own bwrap when there is one)."""
        env = _worker_env(config, self.workdir, sandboxed=bool(bwrap))
        command = [sys.executable, "-m", "tapeviz.worker"]
        if self.uid is not None:
            command += ["--uid", str(self.uid)]
        seccomp_fd = None
        if bwrap:
            seccomp_fd = sandbox.seccomp_file()
            command = sandbox.bwrap_args(bwrap, self.workdir, env, command,
                                         mnist_dir=os.environ.get("TAPEVIZ_MNIST_DIR"),
                                         disk_bytes=config.limits.disk_bytes,
                                         seccomp_fd=seccomp_fd)
        if self.cgroup is not None:
            # The first process puts itself in the cgroup before it execs the worker, so
            # nothing the worker ever starts is outside it.
            command = ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"',
                       self.cgroup.procs_file] + command
        try:
            return _spawner.call(lambda: subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL if config.hosted else None,
                cwd=self.workdir, env=env, start_new_session=True,  # killpg reaches children
                pass_fds=() if seccomp_fd is None else (seccomp_fd,)))
        finally:
            if seccomp_fd is not None:
                os.close(seccomp_fd)

    def _read(self):
        stream = self.proc.stdout
        while True:
            line = stream.readline(MAX_MESSAGE + 1)
            if not line:
                break
            if len(line) > MAX_MESSAGE:
                # Too large for any recording within the bounds: said as such, and dropped.
                del line
                self.messages.put({"type": "oversize"})
                self.kill()
                break
            if not line.endswith(b"\n"):
                break                # cut short by the worker's death: the exit says why
            try:
                message = self.inbox.parse(line)
                del line
                if message.get("type") == "ready" and not self._job_sent:
                    self.ready.set()
                    continue
                if message.pop("secret", None) != self.secret:
                    raise protocol.ProtocolError("a message without the job's secret")
            except protocol.ProtocolError as exc:
                # Only user code sharing the worker's process writes these: drop the worker.
                self.protocol_error = str(exc)
                self.messages.put({"type": "protocol", "message": str(exc)})
                self.kill()
                break
            self.messages.put(message)
        self.messages.put({"type": "exit"})
        self.ready.set()             # "ready or gone": nobody waits on a dead worker

    def send_job(self, job: dict) -> None:
        """The one job this worker runs, with the secret its answers must carry."""
        self._job_sent = True
        self.send(dict(job, secret=self.secret))

    def send(self, message) -> None:
        text = message if isinstance(message, str) else json.dumps(message)
        self.proc.stdin.write((text + "\n").encode("utf-8"))
        self.proc.stdin.flush()

    def next_message(self, timeout: Optional[float]) -> Optional[dict]:
        try:
            return self.messages.get(timeout=timeout)
        except queue.Empty:
            return None

    @property
    def killed(self) -> bool:
        return self._killed

    def kill(self) -> None:
        with self._kill_lock:
            if self._killed:
                return
            self._killed = True
        if isinstance(self.proc, subprocess.Popen):
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        else:
            self.proc.kill_group()           # forked: its zygote knows its group
        if self.cgroup is not None:
            self.cgroup.kill()               # everything it started, whatever its session
        try:
            self.proc.wait(timeout=5)
            # Forked into its walls, the job ran in its own pid namespace, which ends
            # (every process in it reaped) before the first process's exit is seen.
            gone = self.own_pid_namespace
        except subprocess.TimeoutExpired:
            gone = False
        if self.uids is not None:
            self.uids.give_back(self.uid, gone)   # else kills whatever of its uid escaped the group
        if self.cgroup is not None:
            self.cgroup.remove()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def exit_description(self) -> str:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "the worker process stopped answering"
        if self.cgroup is not None and self.cgroup.oom_killed():
            return ("the worker process was killed at its memory limit "
                    f"({self._memory_text()})")
        if code < 0:
            return Worker._describe_signal(-code)
        if code > 128 and code - 128 in signal.valid_signals():   # bwrap reports it so
            return Worker._describe_signal(code - 128)
        return f"the worker process exited with status {code}"

    def _memory_text(self) -> str:
        peak = self.cgroup.peak_bytes() if self.cgroup is not None else None
        return f"it held {peak / 2**30:.1f} GiB" if peak else "all memory of its processes"

    @staticmethod
    def _describe_signal(number: int) -> str:
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        why = {"SIGKILL": " (killed: out of memory, or a limit)",
               "SIGSEGV": " (a crash inside native code)",
               "SIGABRT": " (aborted: often an allocation TensorFlow could not make)",
               "SIGXCPU": " (its CPU-time limit)",
               "SIGXFSZ": " (its file-size limit)"}.get(name, "")
        return f"the worker process died from {name}{why}"


def spawn(*args, **kwargs) -> subprocess.Popen:
    """Popen from the long-lived spawner thread (see _Spawner)."""
    return _spawner.call(lambda: subprocess.Popen(*args, **kwargs))


# TensorFlow's C++ logging, read once when it loads (TF_CPP_MAX_VLOG_LEVEL and
# TF_CPP_VMODULE are the other two it reads): in a hosted worker, whose environment is
# built from nothing, these; locally the user's own, none set where they set none.
HOSTED_TF_LOGGING = {"TF_CPP_MIN_LOG_LEVEL": "2"}


def worker_env(config: Config, sandboxed: bool = False) -> dict:
    """The environment of the zygote, which its children inherit: a local worker's, or in
    the sandbox a hosted worker's whose working directory is FORKED_WORKDIR."""
    if sandboxed:
        return _worker_env(config, sandbox.FORKED_WORKDIR, sandboxed=True)
    return _worker_env(config, tempfile.gettempdir())


def _worker_env(config: Config, workdir: str, sandboxed: bool = False) -> dict:
    if config.hosted:
        # Nothing of the server's environment (secrets) reaches user code.
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": workdir, "TMPDIR": workdir,
               "LANG": "C.UTF-8", "MPLCONFIGDIR": workdir,
               # glibc keeps a 64 MiB arena per thread; TensorFlow's threads would spend
               # the address-space limit on arenas they never fill.
               "MALLOC_ARENA_MAX": "2"}
        if os.environ.get("TAPEVIZ_MNIST_DIR") and not sandboxed:
            env["TAPEVIZ_MNIST_DIR"] = os.environ["TAPEVIZ_MNIST_DIR"]
    else:
        env = dict(os.environ)
    if env.get("TAPEVIZ_MNIST_DIR") and not sandboxed:   # workers run in their own temp dir
        env["TAPEVIZ_MNIST_DIR"] = os.path.abspath(os.path.expanduser(env["TAPEVIZ_MNIST_DIR"]))
    env["PYTHONPATH"] = sandbox.SANDBOX_PACKAGE_ROOT if sandboxed else str(PACKAGE_ROOT)
    if not config.hosted and os.environ.get("PYTHONPATH"):    # the user's own, as python sees it
        env["PYTHONPATH"] += os.pathsep + os.environ["PYTHONPATH"]
    if config.hosted:
        # A hosted user has no shell to set them in: TensorFlow's C++ INFO and WARNING lines
        # stay out of the program's stderr. Locally they are the user's own (above), as
        # plain Python runs the program in the same shell.
        env.update(HOSTED_TF_LOGGING)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env
