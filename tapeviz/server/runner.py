"""Server side: the pool that hands programs and training jobs to worker processes, with a
time limit, fair queues, and warm workers (TensorFlow already imported) so that a run starts
at once. No TensorFlow here: the Streamlit process imports this module.
"""
from __future__ import annotations

import logging
import tempfile
import threading
from typing import Optional

from . import process, sandbox
from ..recording import SCHEMA
from .config import Config, Limits
from .process import Worker
from .queues import FairQueue, Job
from .training_job import TrainingJob
from .zygote import Zygote

READY_TIMEOUT_S = 120.0      # a cold worker on a busy machine may take this long to import TF
GRACE_S = 5.0                # past the program's own time limit, before the worker is killed
log = logging.getLogger("tapeviz.runner")

__all__ = ["Config", "Limits", "Runner", "TrainingJob", "error_recording"]


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
        self.bwrap: Optional[str] = None
        self.uids: Optional[sandbox.UidPool] = None
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
        if self.config.sandbox != "none":
            ok, why = sandbox.probe()
            if ok:
                self.bwrap = sandbox.find_bwrap()
            else:
                self.warnings.append(
                    f"Hosted mode without a sandbox: {why}. Programs run with resource "
                    f"limits and a clean environment only; they can read the machine's "
                    f"world-readable files and open network connections. Install the "
                    f"'bubblewrap' package (and allow it namespaces) to isolate them.")
        else:
            self.warnings.append("Hosted mode with the sandbox turned off (TAPEVIZ_SANDBOX=none):"
                                 " programs run with resource limits only.")
        if sandbox.UidPool.available():
            self.uids = sandbox.UidPool()
        else:
            self.warnings.append(
                "The server does not run as root, so workers share its user id: the process "
                "limit counts all of them together, and one program's fork bomb can hold "
                "back the others until its time limit.")
        for text in self.warnings:
            log.warning("tapeviz: %s", text)

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
        return Worker(self.config, self.bwrap, self.uids, zygote)

    def fill(self) -> None:
        with self._lock:
            if self._closed:
                return
            dead = [w for w in self._idle if w.proc.poll() is not None]
            self._idle = [w for w in self._idle if w.proc.poll() is None]
            while len(self._idle) < self.config.warm:
                self._idle.append(self._new_worker())
        for w in dead:
            w.kill()

    def _take(self) -> Worker:
        with self._lock:
            worker = self._idle.pop(0) if self._idle else None
        if worker is not None and worker.proc.poll() is not None:
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
                "runs": self._runs.busy, "trainings": self._trainings.busy,
                "waiting": self.waiting, "warnings": list(self.warnings)}

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
               timeout: Optional[float] = None, on_wait=None, owner=None) -> dict:
        """Run a program in a worker and return its recording as a plain dict.

        Never raises for a fault of the program or the worker: those come back in `error`.
        `on_wait(place)` is called while the run waits in the queue, each time its place
        changes; `owner` (e.g. a session id) lets `cancel(owner)` stop it."""
        job = self._register(owner)
        try:
            if not self._runs.acquire(on_wait, job.cancelled):
                return _cancelled(source)
            try:
                return self._record(job, source, filename, timeout)
            finally:
                self._runs.release()
        finally:
            self._unregister(job)

    def _record(self, job: Job, source: str, filename: str, timeout: Optional[float]) -> dict:
        limits = self.config.limits
        timeout = limits.timeout_s if timeout is None else timeout
        worker = job.worker = self._take()
        try:
            if job.cancelled.is_set():
                return _cancelled(source)
            if not worker.ready.wait(READY_TIMEOUT_S) and worker.proc.poll() is None:
                return error_recording(source, "WorkerError",
                                       "the worker did not start in time (the machine is busy)")
            if job.cancelled.is_set():
                return _cancelled(source)
            if worker.proc.poll() is not None:
                return error_recording(source, "WorkerError",
                                       f"{worker.exit_description()} before the program ran")
            try:
                worker.send({"kind": "record", "source": source, "filename": filename,
                             "timeout": timeout, "max_ops": limits.max_ops,
                             "max_stdout": limits.max_stdout, "limits": limits.rlimits()})
            except OSError:
                pass                 # it died: the reader reports the exit
            message = worker.next_message(timeout + GRACE_S)
            if job.cancelled.is_set():
                return _cancelled(source)
            if message is None:
                return error_recording(
                    source, "Timeout",
                    f"the program ran longer than its time limit of {timeout:g} s and did not "
                    f"stop when asked, so its worker was killed; nothing it recorded survived",
                    "Look for a loop that never ends, or a single huge operation.")
            if message.get("type") == "recording" and _looks_like_recording(
                    message.get("recording")):
                return message["recording"]
            if message.get("type") == "oversize":
                return error_recording(
                    source, "WorkerError", "the recording was too large to send back",
                    "Record fewer or smaller tensors, e.g. a single training step.")
            return error_recording(
                source, "WorkerCrash",
                f"{worker.exit_description()} while running this program; nothing it "
                f"recorded survived. Other runs are not affected.",
                "A program that exhausts memory, kills its own process or crashes native "
                "code ends like this. Make the tensors smaller or remove the offending call.")
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


def _start_zygote(config: Config) -> Zygote:
    return Zygote(process.worker_env(config), tempfile.gettempdir(), start=process.spawn)


def _cancelled(source: str) -> dict:
    return error_recording(source, "Cancelled", "the run was cancelled (its session ended)")


def _looks_like_recording(rec) -> bool:
    return (isinstance(rec, dict) and rec.get("schema") == SCHEMA
            and all(isinstance(rec.get(k), list) for k in ("ops", "tensors", "tapes")))
