"""The zygote (local mode): imports TensorFlow once, never runs an op, and forks one fresh
worker per request, so a Run never waits for TensorFlow's import.

`python -m tapeviz.worker.zygote FD`: FD is a SOCK_SEQPACKET socket to the server. A
request is `{"workdir": ...}` with two file descriptors (the worker's stdin and stdout);
the reply is `{"type": "forked", "pid": ...}`, and `{"type": "exit", "pid", "code"}` when
a worker ends. The zygote never creates TensorFlow's eager context (its thread pools do
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


def _child(request: dict, fds: list, sock: socket.socket, wakeup: tuple) -> None:
    """In the forked worker: become a fresh session with its own pipes, then serve one job."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        sock.close()
        for fd in wakeup:
            os.close(fd)
        os.setsid()                           # its own process group: killpg reaches all
        os.chdir(request["workdir"])
        os.dup2(fds[0], 0)
        os.dup2(fds[1], 1)
        for fd in fds:
            os.close(fd)
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


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    sock = socket.socket(fileno=int(argv[0]))
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow  # noqa: F401  - the expensive import, shared by every child
    try:
        import keras  # noqa: F401
    except ImportError:
        pass
    from . import recorder, serve, training  # noqa: F401
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)   # wakes select through the pipe
    sock.send(json.dumps({"type": "ready", "pid": os.getpid()}).encode())
    while True:
        ready, _, _ = select.select([sock, wake_r], [], [])
        if wake_r in ready:
            os.read(wake_r, 4096)
        _reap(sock)
        if sock not in ready:
            continue
        message, fds, _, _ = socket.recv_fds(sock, 65536, 2)
        if not message:                       # the server is gone; its workers are its own
            return 0
        request = json.loads(message)
        pid = os.fork()
        if pid == 0:
            _child(request, fds, sock, (wake_r, wake_w))
        for fd in fds:
            os.close(fd)
        sock.send(json.dumps({"type": "forked", "pid": pid}).encode())


def _reap(sock) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        sock.send(json.dumps({"type": "exit", "pid": pid,
                              "code": os.waitstatus_to_exitcode(status)}).encode())


if __name__ == "__main__":
    sys.exit(main())
