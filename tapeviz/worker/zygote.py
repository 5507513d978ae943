"""The zygote (local mode): imports TensorFlow once, never runs an op, and forks one fresh
worker per request, so a Run never waits for TensorFlow's import.

`python -m tapeviz.worker.zygote FD [--walls SECCOMP_FD]`: FD is a SOCK_SEQPACKET socket to
the server. A request is `{"workdir": ...}` with two file descriptors (the worker's stdin
and stdout); the reply is `{"type": "forked", "pid": ...}`, and `{"type": "exit", "pid",
"code"}` when a worker ends; `{"kill": pid}` kills a worker it forked.

With `--walls` (hosted mode: the zygote runs inside bwrap as root, without the seccomp
filter whose BPF it reads from SECCOMP_FD) a request also carries `{"uid", "disk_bytes"}`
and optionally a third descriptor, the worker's memory cgroup's `cgroup.procs`; each child
enters walls.py's walls before the job. At start it builds those walls once around a child
that runs nothing, and says in its ready message whether they held. The zygote never creates TensorFlow's eager context (its thread pools do
not survive a fork); each child creates its own, so every job starts from a process that
no user code has touched.
"""
from __future__ import annotations

import json
import os
import random
import select
import signal
import socket
import sys
from typing import Optional

from . import walls


def _child(request: dict, fds: list, sock: socket.socket, wakeup: tuple,
           seccomp_program: Optional[bytes]) -> None:
    """In the forked worker: become a fresh session with its own pipes (behind its walls in
    hosted mode), then serve one job."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        sock.close()
        for fd in wakeup:
            os.close(fd)
        os.setsid()                           # its own process group: killpg reaches all
        os.dup2(fds[0], 0)
        os.dup2(fds[1], 1)
        for fd in fds[:2]:
            os.close(fd)
        if seccomp_program is not None:
            walls.enter(int(request["uid"]), seccomp_program, int(request["disk_bytes"]),
                        request["workdir"], fds[2] if len(fds) > 2 else -1)
            os.closerange(3, 1 << 16)         # nothing of the zygote's reaches the job
        else:
            os.chdir(request["workdir"])
        sys.stdin = open(0, "r", encoding="utf-8", closefd=False)
        # A fresh process seeds these from the OS; a fork would share the zygote's state.
        random.seed()
        import numpy as np
        np.random.seed()
        import tensorflow as tf
        tf.constant(0.0)                      # the eager context, made here, after the fork
        from . import serve
        code = serve.main([])
    finally:
        sys.stdout.flush() if sys.stdout else None
        os._exit(code)


def _check_walls(seccomp_program: bytes, workdir: str) -> str:
    """Build the walls once around a child that runs nothing: "" when they held, else why
    not (the server then spawns its workers instead)."""
    pid = os.fork()
    if pid == 0:
        try:
            walls.enter(walls.PROBE_UID, seccomp_program, 2**20, workdir)
            os._exit(0 if walls.held() else 3)
        except BaseException as exc:          # noqa: BLE001 - reported by the exit code
            os.write(2, f"tapeviz zygote: {exc}\n".encode())
            os._exit(4)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    return "" if code == 0 else f"a probe child could not enter its walls (exit {code})"


# TensorFlow's C++ logging settings, read once as it loads.
TF_LOGGING = ("TF_CPP_MIN_LOG_LEVEL", "TF_CPP_MAX_VLOG_LEVEL", "TF_CPP_VMODULE")


def _as_given(given: dict) -> None:
    """TensorFlow's logging settings as the zygote was started with them, for every child's
    program: a module's import-time default (set after TensorFlow read the settings, so
    without effect on its logging) is not in a plain run's os.environ."""
    for name, value in given.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    sock = socket.socket(fileno=int(argv[0]))
    seccomp_program = None
    if "--walls" in argv:
        seccomp_program = _read_all(int(argv[argv.index("--walls") + 1]))
        workdir = os.getcwd()                # where the sandbox put its children's workdir
    given = {name: os.environ.get(name) for name in TF_LOGGING}   # as process.py chose
    import tensorflow  # noqa: F401  - the expensive import, shared by every child
    try:
        import keras  # noqa: F401
    except ImportError:
        pass
    from . import heap, recorder, serve, training  # noqa: F401
    _as_given(given)             # training.py's own logging default is not the programs'
    heap.settle()                # once for every child: the import's garbage collected
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)   # wakes select through the pipe
    ready = {"type": "ready", "pid": os.getpid()}
    if seccomp_program is not None:
        ready["walls"] = _check_walls(seccomp_program, workdir)
    sock.send(json.dumps(ready).encode())
    forked: set = set()
    while True:
        ready, _, _ = select.select([sock, wake_r], [], [])
        if wake_r in ready:
            os.read(wake_r, 4096)
        _reap(sock, forked)
        if sock not in ready:
            continue
        message, fds, _, _ = socket.recv_fds(sock, 65536, 3)
        if not message:                       # the server is gone; its workers are its own
            return 0
        request = json.loads(message)
        if "kill" in request:                 # its group: the job's namespace's pid 1 too
            if request["kill"] in forked:
                try:
                    os.killpg(request["kill"], signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            continue
        pid = os.fork()
        if pid == 0:
            _child(request, fds, sock, (wake_r, wake_w), seccomp_program)
        forked.add(pid)
        for fd in fds:
            os.close(fd)
        sock.send(json.dumps({"type": "forked", "pid": pid}).encode())


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


def _reap(sock, forked: set) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        forked.discard(pid)
        sock.send(json.dumps({"type": "exit", "pid": pid,
                              "code": os.waitstatus_to_exitcode(status)}).encode())


if __name__ == "__main__":
    sys.exit(main())
