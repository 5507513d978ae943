"""The worker process: imports TensorFlow once, says it is ready, runs one job, exits.

Started by the runner as `python -m tapeviz.worker`. It speaks JSON lines: the job arrives
on stdin; messages leave on the process's original stdout, which is kept for them alone
(anything the user's code writes at the OS level goes to stderr instead).
"""
from __future__ import annotations

import json
import os
import queue
import resource
import sys
import threading
from typing import Optional

from .. import recording_gate
from ..server import protocol
from . import byte_bound
from .keep import Keep

# The recording's bytes when sent: the server's message cap less room for the message's
# other fields (usage, secret) and JSON's escapes of stdout
RECORDING_BYTES = protocol.MAX_MESSAGE - 2**20

# rlimit names the job may set, and what they bound
_LIMITS = {
    "cpu_s": resource.RLIMIT_CPU,
    "address_space_bytes": resource.RLIMIT_AS,
    "file_size_bytes": resource.RLIMIT_FSIZE,
    "processes": resource.RLIMIT_NPROC,
    "open_files": resource.RLIMIT_NOFILE,
}
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_DUMPABLE = 4


class Channel:
    """The message side of the original stdout; fd 1 itself is pointed at stderr."""

    def __init__(self):
        self._out = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
        os.dup2(2, 1)
        sys.stdout = os.fdopen(1, "w", buffering=1, encoding="utf-8", closefd=False)
        self._lock = threading.Lock()
        self.secret: Optional[str] = None    # the job's; every message after it carries it

    def send(self, message: dict) -> None:
        if self.secret is not None:
            message = dict(message, secret=self.secret)
        text = json.dumps(message, allow_nan=False)
        with self._lock:
            self._out.write(text + "\n")
            self._out.flush()


class Commands:
    """Commands for a running job, read from stdin: a training job's ("pause", "resume",
    "stop") queued for its loop; a record job's ("interrupt") acted on at once by `now`."""

    def __init__(self, stream, now: Optional[dict] = None):
        self._queue: queue.Queue = queue.Queue()
        self._now = now or {}
        threading.Thread(target=self._read, args=(stream,), daemon=True,
                         name="tapeviz-commands").start()

    def _read(self, stream):
        for line in stream:
            word = line.strip()
            if word in self._now:
                self._now[word]()
            else:
                self._queue.put(word)
        self._queue.put("stop")          # the server went away: stop rather than run on

    def poll(self) -> Optional[str]:
        try:
            return self._queue.get_nowait()
        except queue.Empty:
            return None

    def wait(self) -> str:
        return self._queue.get()


def apply_limits(limits: dict) -> None:
    for key, value in (limits or {}).items():
        which = _LIMITS.get(key)
        if which is not None and value:
            value = int(value)
            soft, hard = resource.getrlimit(which)
            cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(which, (cap, cap))


def give_home(uid: int) -> None:
    """Hand HOME (the worker's own directory) to `uid`, with what TensorFlow's import made
    in it as root (~/.keras): the program it runs can then write there, as on a laptop."""
    home = os.environ.get("HOME")
    if not home or not os.path.isdir(home):
        return
    for folder, dirs, files in os.walk(home):
        for name in [folder, *(os.path.join(folder, n) for n in dirs + files)]:
            try:
                os.chown(name, uid, uid, follow_symlinks=False)
            except OSError:
                pass          # not ours to give (a read-only bind): left as it is


def drop_privileges(uid: int) -> None:
    """Become `uid` (hosted mode, when started as root): the kernel's process limit then
    counts this worker's processes alone, and it can neither signal the server nor write
    the server's files. glibc applies setuid to every thread TensorFlow has started."""
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    _prctl(_PR_SET_NO_NEW_PRIVS, 1)   # no set-uid program can give the privileges back
    _prctl(_PR_SET_DUMPABLE, 0)       # setuid reset it; other workers' uids stay out


def _prctl(option: int, value: int) -> None:
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def usage() -> dict:
    """Peak address space and resident memory, and threads: what the limits are set from."""
    out = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmPeak", "VmHWM", "Threads"):
                    out[key] = int(value.split()[0])
    except OSError:
        pass
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    uid = int(argv[argv.index("--uid") + 1]) if "--uid" in argv else None
    _prctl(_PR_SET_DUMPABLE, 0)   # /proc/<pid>/fd, environ, mem: closed to other processes
    channel = Channel()
    forked = f"{__package__}.recorder" in sys.modules   # a zygote's child: imported, settled
    from . import recorder        # the expensive part: TensorFlow's import, done before any job
    from . import heap
    if not forked:
        heap.settle()             # the import's garbage, collected before the program runs
    if uid is not None and os.getuid() == 0:
        give_home(uid)
        drop_privileges(uid)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))   # no core files from a crash
    me = os.getpid()
    channel.send({"type": "ready", "pid": me})
    line = sys.stdin.readline()
    if not line:
        return 0
    job = json.loads(line)
    channel.secret = job.get("secret")
    apply_limits(job.get("limits"))
    if job["kind"] == "record":
        # The program's fd 0 is /dev/null while it runs (recorder._stdin_at_end): the
        # channel's commands are read from a copy of it
        Commands(os.fdopen(os.dup(0), "r", encoding="utf-8"),
                 {"interrupt": recorder.interrupt})
        rec = recorder.record(job["source"], filename=job.get("filename", "program.py"),
                              timeout=job.get("timeout"),
                              max_ops=job.get("max_ops", recorder.DEFAULT_MAX_OPS),
                              max_stdout=job.get("max_stdout", recorder.DEFAULT_MAX_STDOUT),
                              program=job.get("program"),
                              tapes=tuple(job["tapes"]) if job.get("tapes") else None,
                              eager=bool(job.get("eager")),
                              keep_steps=job.get("keep_steps"),
                              keep=Keep.from_job(job.get("keep")),
                              live_timeout=job.get("live_timeout"),
                              emit=channel.send,
                              on_stopped=lambda: channel.send({"type": "stopped"}))
        if os.getpid() != me:     # a child the program forked ran to here: it says nothing
            os._exit(0)
        max_ops = job.get("max_ops", recorder.DEFAULT_MAX_OPS)
        with heap.paused():       # the program has ended; the worker exits after this
            # cut to what the server accepts, oldest first, rather than lose the run to its size
            fitted = byte_bound.fit(rec.to_dict(), RECORDING_BYTES,
                                    recording_gate.bounds(max_ops)["tensors"])
            channel.send({"type": "recording", "recording": fitted, "usage": usage()})
    elif job["kind"] == "train":
        from . import training
        from .. import metrics
        training.run(job["config"],
                     emit=lambda m: channel.send({"type": "metric", "metric": metrics.to_json(m)}),
                     commands=Commands(sys.stdin))
        channel.send({"type": "done", "usage": usage()})
    else:
        channel.send({"type": "error", "message": f"unknown job kind {job['kind']!r}"})
        return 2
    return 0

