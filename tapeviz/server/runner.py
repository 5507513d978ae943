"""Server side: the pool that hands programs and training jobs to worker processes, with a
time limit, fair queues, and warm workers (TensorFlow already imported) so that a run starts
at once. No TensorFlow here: the Streamlit process imports this module.
"""
from __future__ import annotations

import logging
import tempfile
import threading
import time
from typing import Optional

from . import process, protocol, sandbox
from ..recording import SCHEMA
from .cgroup import MemoryCgroups
from .config import Config, Limits
from .process import Worker
from .queues import FairQueue, Job
from .training_job import TrainingJob
from .zygote import Zygote

READY_TIMEOUT_S = 120.0      # a cold worker on a busy machine may take this long to import TF
GRACE_S = 5.0                # past the program's own time limit, before the worker is killed
FINISH_S = 120.0             # once the program stopped: building and sending a large recording
log = logging.getLogger("tapeviz.runner")

__all__ = ["Config", "Limits", "Runner", "SandboxUnavailable", "TrainingJob",
           "error_recording"]


class SandboxUnavailable(RuntimeError):
    """Hosted mode cannot build its walls here and was not told to run without them."""


def error_recording(source: str, type_: str, message: str, hint: Optional[str] = None) -> dict:
    """A recording that holds only an error, for runs that produced nothing better."""
    return {"schema": SCHEMA, "source": source, "stdout": "",
            "error": {"type": type_, "message": message, "line": None, "hint": hint},
            "ops": [], "tensors": [], "tapes": [], "alerts": [], "warnings": [],
            "dropped": {}, "duration_s": None}


class Runner:
    """Hands jobs to workers: at most `config.workers` runs and `config.training` training
    jobs at once; the rest wait their turn in first-come order."""

    def __init__(self, config: Optional[Config] = None):
        self.config = config or Config.from_env()
        self.warnings: list = []          # for the page to show, e.g. hosted without bwrap
        self.notes: list = []             # for the operator: a wall this machine cannot give
        self.bwrap: Optional[str] = None
        self.uids: Optional[sandbox.UidPool] = None
        self.cgroups: Optional[MemoryCgroups] = None
        if self.config.hosted:
            self._set_up_hosted()
        self._lock = threading.Lock()
        self._idle: list = []
        self._runs = FairQueue(self.config.workers)
        self._trainings = FairQueue(self.config.training)
        self._jobs: dict = {}
        self._closed = False
        # Local mode forks workers from a zygote (TF imported once): every Run finds a worker
        # in milliseconds, each job still in a process of its own. Hosted mode spawns each
        # worker into its own sandbox, so it keeps a warm pool of spawned workers.
        self.zygote: Optional[Zygote] = None
        self._zygote_lock = threading.Lock()
        if not self.config.hosted and self.config.zygote:
            self.zygote = _start_zygote(self.config)
            threading.Thread(target=self.fill, daemon=True).start()
        else:
            self.fill()

    def _set_up_hosted(self) -> None:
        """The walls, or a refusal: hosted mode never runs strangers' code unsandboxed
        unless the operator said so (TAPEVIZ_SANDBOX=none)."""
        root = sandbox.UidPool.available()
        if self.config.sandbox != "none":
            ok, why = sandbox.probe()
            if not ok:
                raise SandboxUnavailable(
                    f"Hosted mode refuses to run programs unsandboxed: {why}. Install the "
                    f"'bubblewrap' package and allow it namespaces (see README, Hosting), or "
                    f"set TAPEVIZ_SANDBOX=none to run with resource limits only.")
            self.bwrap = sandbox.find_bwrap()
        elif not root:
            # Workers would share the server's uid with nothing between them: one could
            # write a job into another's stdin through /proc. Refused rather than patched.
            raise SandboxUnavailable(
                "Hosted mode without a sandbox needs a server running as root (each worker "
                "then gets its own user id); without root it refuses. Use bubblewrap, or "
                "local mode for your own programs.")
        else:
            self.warnings.append("Hosted mode with the sandbox turned off (TAPEVIZ_SANDBOX=none):"
                                 " programs run with resource limits and their own user ids "
                                 "only; they can read the machine's world-readable files and "
                                 "open network connections.")
        if root and self.bwrap is None and (hidden := sandbox.unsearchable_python_dir()):
            self.warnings.append(
                f"Python lives under {hidden}, which other users cannot enter: with the "
                f"sandbox off, a worker running as its own user id fails to import modules "
                f"it had not loaded yet. Install Python under /usr/local or /opt, or use "
                f"the sandbox (it shows Python to every worker).")
        if root:
            self.uids = sandbox.UidPool()
        else:
            self.warnings.append(
                "The server does not run as root, so workers share its user id: the process "
                "limit counts all of them together, and one program's fork bomb can hold "
                "back the others until its time limit.")
        self.cgroups = MemoryCgroups.find()
        self.cgroups.remove_stale()
        if not self.cgroups.available:
            self.notes.append(f"Memory: {self.cgroups.describe()}; each worker is bounded by "
                              f"its address-space limit, and memfd and SysV shared memory are "
                              f"refused; give the container a memory limit for the rest.")
        for text in self.warnings:
            log.warning("tapeviz: %s", text)
        for text in self.notes:
            log.info("tapeviz: %s", text)

    def walls(self) -> list:
        """(wall, on, detail) rows for the operator: what stands between programs and the
        machine on this instance."""
        limits = self.config.limits
        rows = [("sandbox (bubblewrap)", self.sandboxed,
                 "no network, read-only system, own process and IPC namespaces, only the "
                 "package of the app" if self.sandboxed else "off"),
                ("seccomp filter", self.sandboxed and sandbox.seccomp.program() is not None,
                 "no new namespaces, mount, ptrace, keyctl, bpf, io_uring, memfd, SysV shm"),
                ("own user id per worker", self.uids is not None, "when the server is root"),
                ("memory cgroup per worker", self.cgroups is not None and self.cgroups.available,
                 self.cgroups.describe() if self.cgroups is not None else "local mode")]
        if limits.address_space_bytes:
            rows.append(("resource limits", True,
                         f"{limits.timeout_s:g} s wall, {limits.cpu_s} s CPU, "
                         f"{limits.address_space_bytes / 2**30:g} GiB address space, "
                         f"{limits.processes} processes, {limits.open_files} open files"))
        return rows

    @property
    def sandboxed(self) -> bool:
        return self.bwrap is not None

    # -- the warm pool -----------------------------------------------------------------------
    def _new_worker(self) -> Worker:
        zygote = self.zygote
        if zygote is not None:
            if not zygote.alive and not self._closed:
                with self._zygote_lock:
                    if self.zygote is zygote:
                        self.zygote = _start_zygote(self.config)
                    zygote = self.zygote
            zygote.ready.wait(READY_TIMEOUT_S)
        return Worker(self.config, self.bwrap, self.uids, self.cgroups, zygote)

    def fill(self) -> None:
        with self._lock:
            if self._closed:
                return
            dead = [w for w in self._idle if not _usable(w)]
            self._idle = [w for w in self._idle if _usable(w)]
            while len(self._idle) < self.config.warm:
                self._idle.append(self._new_worker())
        for w in dead:
            w.kill()

    def _take(self) -> Worker:
        with self._lock:
            worker = self._idle.pop(0) if self._idle else None
        if worker is not None and not _usable(worker):
            worker.kill()
            worker = None
        if worker is None:
            worker = self._new_worker()
        threading.Thread(target=self.fill, daemon=True).start()
        return worker

    @property
    def waiting(self) -> int:
        """How many jobs wait for a free worker slot right now."""
        return self._runs.waiting + self._trainings.waiting

    def status(self) -> dict:
        return {"mode": self.config.mode, "sandbox": "bwrap" if self.sandboxed else "none",
                "isolated": self.sandboxed,
                "runs": self._runs.busy, "trainings": self._trainings.busy,
                "waiting": self.waiting, "warnings": list(self.warnings),
                "notes": list(self.notes),
                "walls": [{"wall": w, "on": on, "detail": d} for w, on, d in self.walls()]}

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            jobs = [j for js in self._jobs.values() for j in js]
        for job in jobs:
            job.cancel()
        for w in idle:
            w.kill()
        if self.zygote is not None:
            self.zygote.close()

    # -- owners -------------------------------------------------------------------------------
    def _register(self, owner) -> Job:
        job = Job(owner)
        with self._lock:
            self._jobs.setdefault(owner, set()).add(job)
        return job

    def _unregister(self, job: Job) -> None:
        with self._lock:
            jobs = self._jobs.get(job.owner)
            if jobs is not None:
                jobs.discard(job)
                if not jobs:
                    del self._jobs[job.owner]

    def cancel(self, owner) -> int:
        """Cancel every run and training job of `owner` (e.g. a session that ended): waiting
        ones leave the queue, running ones have their workers killed. Returns how many."""
        with self._lock:
            jobs = list(self._jobs.get(owner, ()))
        for job in jobs:
            job.cancel()
        return len(jobs)

    # -- jobs ---------------------------------------------------------------------------------
    def record(self, source: str, filename: str = "program.py",
               timeout: Optional[float] = None, on_wait=None, owner=None,
               program: Optional[dict] = None, tapes: Optional[tuple] = None,
               on_phase=None) -> dict:
        """Run a program in a worker and return its recording as a plain dict.

        Never raises for a fault of the program or the worker: those come back in `error`.
        `on_wait(place)` is called while the run waits in the queue, each time its place
        changes; `owner` (e.g. a session id) lets `cancel(owner)` stop it. `program`
        ({argv, cwd, path}) runs it as `python PROGRAM.py ARGS...` would; hosted mode keeps
        only argv (its sandbox has its own directory). `tapes` (A, B): see worker/window.py.
        `on_phase(name)` says what the run waits for next: "starting" (a worker importing
        TensorFlow), "running" (the program), "finishing" (the worker builds and sends the
        recording)."""
        if program and self.config.hosted:
            program = {"argv": program.get("argv")}
        job = self._register(owner)
        try:
            if not self._runs.acquire(on_wait, job.cancelled):
                return _cancelled(source)
            try:
                return self._record(job, source, filename, timeout, program, tapes, on_phase)
            finally:
                self._runs.release()
        finally:
            self._unregister(job)

    def _record(self, job: Job, source: str, filename: str, timeout: Optional[float],
                program: Optional[dict] = None, tapes: Optional[tuple] = None,
                on_phase=None) -> dict:
        on_phase = on_phase or _ignore
        limits = self.config.limits
        timeout = limits.timeout_s if timeout is None else timeout
        worker = job.worker = self._take()
        try:
            if job.cancelled.is_set():
                return _cancelled(source)
            if not worker.ready.is_set():
                on_phase("starting")
            if not worker.ready.wait(READY_TIMEOUT_S) and worker.proc.poll() is None:
                return error_recording(source, "WorkerError",
                                       "the worker did not start in time (the machine is busy)")
            if job.cancelled.is_set():
                return _cancelled(source)
            if worker.proc.poll() is not None:
                return error_recording(source, "WorkerError",
                                       f"{worker.exit_description()} before the program ran")
            try:
                worker.send_job({"kind": "record", "source": source, "filename": filename,
                             "timeout": timeout, "max_ops": limits.max_ops,
                             "max_stdout": limits.max_stdout, "limits": limits.rlimits(),
                             "program": program, "tapes": list(tapes) if tapes else None})
            except OSError:
                pass                 # it died: the reader reports the exit
            on_phase("running")
            message, printed = _next_result(worker, timeout + GRACE_S, limits.max_stdout)
            if message is not None and message.get("type") == "stopped":
                on_phase("finishing")    # the time limit was kept; a big recording takes a while
                message, more = _next_result(worker, FINISH_S, limits.max_stdout)
                printed = (printed + more)[-limits.max_stdout:]
            if job.cancelled.is_set():
                return _cancelled(source)
            if message is None:
                return dict(error_recording(
                    source, "Timeout",
                    f"the program ran longer than its time limit of {timeout:g} s and did not "
                    f"stop when asked, so its worker was killed; what it printed is kept, "
                    f"nothing it recorded survived",
                    "Look for a loop that never ends, or a single huge operation."),
                    stdout=printed)
            if message.get("type") == "recording":
                why = protocol.check_recording(message.get("recording"), source,
                                               limits.max_ops, limits.max_stdout)
                if why is None:
                    return message["recording"]
                message = {"type": "protocol", "message": why}
            if message.get("type") == "protocol":
                return error_recording(
                    source, "ProtocolError",
                    f"the worker sent back something no recording is ({message.get('message')}),"
                    f" so it was dropped; nothing it recorded is shown",
                    "A program that writes to the worker's message channel ends like this.")
            if message.get("type") == "oversize":
                return error_recording(
                    source, "WorkerError", "the recording was too large to send back (over "
                    f"{protocol.MAX_MESSAGE // 2**20} MiB), so the worker was dropped",
                    "Record fewer or smaller tensors, e.g. a single training step.")
            return dict(error_recording(
                source, "WorkerCrash",
                f"{worker.exit_description()} while running this program; what it printed "
                f"is kept, nothing it recorded survived. Other runs are not affected.",
                "A program that exhausts memory, kills its own process or crashes native "
                "code ends like this. Make the tensors smaller or remove the offending call."),
                stdout=printed)
        finally:
            worker.kill()

    def start_training(self, config: dict, on_wait=None, owner=None) -> TrainingJob:
        """A training job in a worker, once a training slot is free (`on_wait(place)` tells
        the place in the queue meanwhile). Cancelled while waiting, it comes back done with
        `error` set."""
        job = self._register(owner)
        if not self._trainings.acquire(on_wait, job.cancelled):
            self._unregister(job)
            return TrainingJob.cancelled_job()
        try:
            worker = self._take()
            training = TrainingJob(worker, config, self._trainings, self.config.limits,
                                   on_done=lambda: self._unregister(job))
            job.training = training
            if job.cancelled.is_set():
                training.cancel()
            return training
        except BaseException:
            self._trainings.release()
            self._unregister(job)
            raise


def _next_result(worker, timeout: float, max_stdout: int) -> tuple:
    """The worker's next message other than the printed output it streams ("stdout"
    chunks, kept for a run whose worker dies before it sends its recording), and that
    output (the newest `max_stdout` characters)."""
    deadline = time.monotonic() + timeout
    printed = ""
    while True:
        message = worker.next_message(max(0.0, deadline - time.monotonic()))
        if message is None or message.get("type") != "stdout":
            return message, printed
        printed = (printed + str(message.get("text", "")))[-max_stdout:]


def _usable(worker) -> bool:
    """An idle worker can take a job: it runs, and (if forked) its zygote still watches it."""
    return worker.proc.poll() is None and not getattr(worker.proc, "orphaned", False)


def _ignore(*args) -> None:
    pass


def _start_zygote(config: Config) -> Zygote:
    return Zygote(process.worker_env(config), tempfile.gettempdir(), start=process.spawn)


def _cancelled(source: str) -> dict:
    return error_recording(source, "Cancelled", "the run was cancelled before it finished")
