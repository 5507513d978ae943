"""The server's side of the zygote: one long-lived process that has imported TensorFlow and
forks a fresh worker per request in milliseconds (worker/zygote.py). Local mode runs it
plainly; hosted mode runs it inside bwrap (`wrap`), and each child enters its own walls.

`Zygote.fork(workdir)` returns a `ForkedProc`, which answers the part of `Popen` that
`process.Worker` uses (pid, stdin, stdout, poll, wait, kill_group); exits come from the
zygote. A sandboxed zygote's pids are those of its own pid namespace, never signalled from
here: it kills its children on request.
"""
from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
from typing import Optional


class ForkedProc:
    """A worker forked by the zygote, seen as a Popen."""

    def __init__(self, pid: int, stdin_fd: int, stdout_fd: int, zygote: "Zygote"):
        self.pid = pid
        self._zygote = zygote
        self.args = ["tapeviz.worker.zygote", str(pid)]
        self.stdin = os.fdopen(stdin_fd, "wb")
        self.stdout = os.fdopen(stdout_fd, "rb")
        self.returncode: Optional[int] = None
        self._exited = threading.Event()

    def exited(self, code: int) -> None:
        self.returncode = code
        self._exited.set()

    def poll(self) -> Optional[int]:
        return self.returncode

    @property
    def orphaned(self) -> bool:
        """Its zygote is gone, so nobody will report its exit; the zygote's reader ends it
        soon, so a job must not be handed to it (the race a dead zygote leaves)."""
        return self.returncode is None and not self._zygote.alive

    def wait(self, timeout: Optional[float] = None) -> int:
        if not self._exited.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode

    def kill_group(self) -> None:
        """SIGKILL its process group (in a sandboxed zygote: the job's whole namespace)."""
        self._zygote.kill(self.pid)


class Zygote:
    def __init__(self, env: dict, cwd: str, start=subprocess.Popen, wrap=None,
                 seccomp_fd: Optional[int] = None):
        """`wrap(command)`: the sandbox's command line around the zygote's; `seccomp_fd`: the
        filter its children install (both for hosted mode, together)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        command = [sys.executable, "-m", "tapeviz.worker.zygote", str(theirs.fileno())]
        fds = (theirs.fileno(),)
        self.sandboxed = wrap is not None
        if self.sandboxed:
            command = wrap(command + ["--walls", str(seccomp_fd)])
            fds += (seccomp_fd,)
        self.proc = start(command, pass_fds=fds, stdin=subprocess.DEVNULL, env=env, cwd=cwd,
                          start_new_session=True,
                          stderr=subprocess.DEVNULL if self.sandboxed else None)
        theirs.close()
        self.sock = ours
        self.ready = threading.Event()         # set once TF is imported, or when it is gone
        self.walls_failed = ""                 # sandboxed: why its children's walls did not hold
        self.dead = False
        self._request = threading.Lock()       # one fork request (and its reply) at a time
        self._send = threading.Lock()          # one message on the socket at a time
        self._lock = threading.Lock()          # the maps below
        self._replies: queue.Queue = queue.Queue()
        self._procs: dict = {}                 # pid -> ForkedProc still running
        self._early: dict = {}                 # pid -> exit code that came before its proc
        threading.Thread(target=self._read, name="tapeviz-zygote", daemon=True).start()

    @property
    def alive(self) -> bool:
        return not self.dead and self.proc.poll() is None

    @property
    def usable(self) -> bool:
        return self.alive and self.ready.is_set() and not self.walls_failed

    def fork(self, workdir: str, uid: Optional[int] = None, disk_bytes: Optional[int] = None,
             cgroup_procs: Optional[str] = None) -> ForkedProc:
        """A fresh worker process in `workdir`; OSError when the zygote cannot make one. A
        sandboxed zygote's child gets `uid`, a tmpfs of `disk_bytes` at `workdir`, and
        joins the memory cgroup whose `cgroup.procs` file is `cgroup_procs`."""
        if not self.usable:
            raise OSError("the zygote is not ready")
        request = {"workdir": workdir}
        if self.sandboxed:
            request.update(uid=uid, disk_bytes=disk_bytes)
        cgroup_fd = os.open(cgroup_procs, os.O_WRONLY) if cgroup_procs else None
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        try:
            with self._request:
                with self._send:
                    socket.send_fds(self.sock, [json.dumps(request).encode()],
                                    [in_r, out_w] + ([cgroup_fd] if cgroup_fd is not None else []))
                pid = self._replies.get(timeout=30)
        except (OSError, queue.Empty) as e:
            for fd in (in_w, out_r):
                os.close(fd)
            raise OSError(f"the zygote did not fork: {e}") from e
        finally:
            os.close(in_r)
            os.close(out_w)
            if cgroup_fd is not None:
                os.close(cgroup_fd)
        if pid is None:
            os.close(in_w)
            os.close(out_r)
            raise OSError("the zygote is gone")
        proc = ForkedProc(pid, in_w, out_r, self)
        with self._lock:
            if pid in self._early:
                proc.exited(self._early.pop(pid))
            else:
                self._procs[pid] = proc
        return proc

    def _read(self) -> None:
        while True:
            try:
                data = self.sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                break
            message = json.loads(data)
            kind = message.get("type")
            if kind == "ready":
                self.walls_failed = str(message.get("walls") or "")
                self.ready.set()
            elif kind == "forked":
                self._replies.put(message["pid"])
            elif kind == "exit":
                with self._lock:
                    proc = self._procs.pop(message["pid"], None)
                    if proc is None:
                        self._early[message["pid"]] = message["code"]
                if proc is not None:
                    proc.exited(message["code"])
        # Gone: its workers live on without anyone to report their exits; end them.
        self.dead = True
        self.ready.set()
        self._replies.put(None)
        with self._lock:
            procs, self._procs = list(self._procs.values()), {}
        for proc in procs:
            if not self.sandboxed:        # a sandboxed one's namespace ended with it
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            proc.exited(-signal.SIGKILL)

    def kill(self, pid: int) -> None:
        """SIGKILL a child's process group: here, or (sandboxed) by the zygote, in whose pid
        namespace `pid` is."""
        if not self.sandboxed:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            return
        try:
            # Not behind a fork request's reply: a kill has none, and a job's end (and its
            # run slot) must not wait for another job's worker to be forked.
            with self._send:
                self.sock.send(json.dumps({"kill": pid}).encode())
        except OSError:
            pass                          # gone: its namespace, and every child, with it

    def close(self) -> None:
        self.dead = True
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.sock.close()
        except OSError:
            pass
