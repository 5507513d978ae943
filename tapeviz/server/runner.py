"""Server side: the pool that hands programs and training jobs to worker processes, with a
time limit, fair queues, and warm workers (TensorFlow already imported) so that a run starts
at once. No TensorFlow here: the Streamlit process imports this module.
"""
from __future__ import annotations

import logging
import os
import tempfile
import threading
import time
from typing import Callable, Optional

from . import process, protocol, sandbox
from .. import metrics
from ..recording import SCHEMA
from .cgroup import MemoryCgroups
from .config import Config, Limits
from .jobs import KEEP_STEPS, Done, Job, Metric, Output, Phase, Record, Train
from .process import Worker
from .queues import FairQueue, Shares, TooManyJobs
from .zygote import Zygote

READY_TIMEOUT_S = 120.0      # a cold worker on a busy machine may take this long to import TF
GRACE_S = 5.0                # past the program's own time limit, before the worker is killed
FINISH_S = 120.0             # once the program stopped: building and sending a large recording
HOSTED_FINISH_S = 15.0       # hosted mode: the recording's share of a deadline fixed at the start
log = logging.getLogger("tapeviz.runner")

__all__ = ["KEEP_STEPS", "Config", "Limits", "Record", "Runner", "SandboxUnavailable", "Train",
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
    jobs at once; the rest wait their fair turn (queues.py)."""

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
        # Runs and training runs share one ledger: fair shares and caps count both.
        self._shares = Shares(self.config.jobs_per_session, self.config.jobs_per_client)
        self._runs = FairQueue(self.config.workers, self._shares)
        self._trainings = FairQueue(self.config.training, self._shares)
        self._jobs: dict = {}
        self._closed = False
        # Workers fork from a zygote (TF imported once): every Run finds a worker in
        # milliseconds, each job still in a process of its own. Hosted mode's zygote runs in
        # the sandbox and each child builds its own walls; where it cannot (no root, no
        # seccomp table, walls that do not hold) each worker is spawned into its own bwrap.
        self.zygote: Optional[Zygote] = None
        self._zygote_lock = threading.Lock()
        self.spawned_why = self._why_spawned()
        if not self.spawned_why:
            self.zygote = _start_zygote(self.config, self.bwrap)
            threading.Thread(target=self.fill, daemon=True).start()
        else:
            self.fill()

    def _why_spawned(self) -> str:
        """"" when workers fork from a zygote, else why they are spawned."""
        if not self.config.zygote:
            return "TAPEVIZ_ZYGOTE=0"
        if not self.config.hosted:
            return ""
        if self.bwrap is None:
            return "no sandbox to run the zygote in"
        if self.uids is None:
            return "the server is not root, so no per-job user ids"
        if sandbox.seccomp.program() is None:
            return "no seccomp table for this machine"
        return ""

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
                self._start_row(),
                ("memory cgroup per worker", self.cgroups is not None and self.cgroups.available,
                 self.cgroups.describe() if self.cgroups is not None else "local mode")]
        if limits.address_space_bytes:
            rows.append(("resource limits", True,
                         f"{limits.timeout_s:g} s wall, {limits.cpu_s} s CPU, "
                         f"{limits.address_space_bytes / 2**30:g} GiB address space, "
                         f"{limits.processes} processes, {limits.open_files} open files"))
        return rows

    def _start_row(self) -> tuple:
        """How workers start: forked from the (sandboxed) zygote, or spawned, and why."""
        if self.zygote is None:
            return ("fork server", False,
                    f"each worker is spawned and imports TensorFlow ({self.spawned_why})")
        if not self.config.hosted:
            return ("fork server", True, "workers fork from a zygote that imported "
                    "TensorFlow; each job in a fresh process")
        return ("fork server", True, "workers fork from a zygote that imported TensorFlow "
                "inside the sandbox and never runs user code; each job then enters its own "
                "pid, mount, IPC and network namespaces, a private /tmp and /dev/shm, its "
                "memory cgroup and user id, and the seccomp filter")

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
                        self.zygote = _start_zygote(self.config, self.bwrap)
                    zygote = self.zygote
            zygote.ready.wait(READY_TIMEOUT_S)
            if zygote.walls_failed:
                self._give_up_forking(zygote)
                zygote = None
        return Worker(self.config, self.bwrap, self.uids, self.cgroups, zygote)

    def _give_up_forking(self, zygote: Zygote) -> None:
        """The sandboxed zygote's children could not enter their walls: spawn from now on."""
        with self._zygote_lock:
            if self.zygote is not zygote:
                return
            self.zygote = None
            self.spawned_why = f"the fork server's walls did not hold: {zygote.walls_failed}"
            self.notes.append(f"Workers are spawned: {self.spawned_why}.")
            log.warning("tapeviz: %s", self.notes[-1])
        zygote.close()

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

    def warmed(self, timeout: float = READY_TIMEOUT_S) -> bool:
        """Wait until the warm workers are ready to take a job (a server a class meets has
        been up a while: benches start their clocks here)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                idle = list(self._idle)
            if len(idle) >= self.config.warm and all(w.ready.is_set() for w in idle):
                return True
            time.sleep(0.1)
        return False

    @property
    def waiting(self) -> int:
        """How many jobs wait for a free worker slot right now."""
        return self._runs.waiting + self._trainings.waiting

    def status(self) -> dict:
        return {"mode": self.config.mode, "sandbox": "bwrap" if self.sandboxed else "none",
                "workers": "spawned" if self.zygote is None else "forked",
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
    def _register(self, job: Job) -> None:
        with self._lock:
            self._jobs.setdefault(job.owner, set()).add(job)

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
    def submit(self, spec, owner=None, client=None) -> Job:
        """Start a job (`jobs.Record` or `jobs.Train`) and return its handle at once. It waits
        its fair turn (per `owner`, e.g. a session, and per `client`, e.g. a browser), runs
        in a worker, and reports through the handle's events. Never raises for a fault of
        the program or the worker: those end the job with an error."""
        job = Job(spec, owner, client)
        try:
            ticket = self._shares.join(owner, client)
        except TooManyJobs as exc:
            _end(job, spec, "TooManyJobs", str(exc))
            return job
        self._register(job)
        threading.Thread(target=self._serve, args=(job, ticket), daemon=True,
                         name=f"tapeviz-{spec.kind}").start()
        return job

    def record(self, source: str, filename: str = "program.py",
               timeout: Optional[float] = None, on_wait=None, owner=None,
               program: Optional[dict] = None, tapes: Optional[tuple] = None,
               on_phase=None, client=None, eager: bool = False,
               keep_steps: Optional[int] = KEEP_STEPS) -> dict:
        """Run a program in a worker and return its recording as a plain dict: `submit` a
        `jobs.Record` and follow its events. `on_wait(place)` is called while it waits in
        line, each time its place changes; `on_phase(name)` as it moves on ("starting": a
        worker importing TensorFlow, "running", "finishing": the recording on its way).
        `keep_steps`: a loop's steps recorded whole (None: all; see jobs.KEEP_STEPS)."""
        job = self.submit(Record(source, filename, timeout, program,
                                 tuple(tapes) if tapes else None, eager, keep_steps),
                          owner, client)
        while True:
            event = job.next_event()
            if isinstance(event, Phase):
                if event.name == "queued":
                    if on_wait is not None:
                        on_wait(event.place)
                elif on_phase is not None:
                    on_phase(event.name)
            elif isinstance(event, Done):
                return job.result

    def _serve(self, job: Job, ticket) -> None:
        """A job's own thread: its turn in line, its worker, its end."""
        line = self._runs if job.spec.kind == "record" else self._trainings
        try:
            if not line.acquire(ticket, lambda place: job.emit(Phase("queued", place)),
                                job.cancelled):
                _end(job, job.spec, "Cancelled", "it was cancelled before it started")
                return
            free = _once(line.release)
            try:
                self._run(job, free)
            finally:
                free()
        except Exception as exc:   # noqa: BLE001 - the job ends with it; the server stays up
            log.exception("tapeviz: a job failed in the runner")
            _end(job, job.spec, "RunnerError", f"{type(exc).__name__}: {exc}")
        finally:
            self._shares.leave(ticket)
            self._unregister(job)
            _end(job, job.spec, "RunnerError", "the job ended without a result")

    def _run(self, job: Job, free: Callable[[], None]) -> None:
        """Run `job` in a worker; `free()` gives its run slot back."""
        spec = job.spec
        worker = job.worker = self._take()
        try:
            if job.cancelled.is_set():
                return _end(job, spec, "Cancelled", "it was cancelled before it started")
            if not worker.ready.is_set():
                job.emit(Phase("starting"))
            if not worker.ready.wait(READY_TIMEOUT_S) and worker.proc.poll() is None:
                return _end(job, spec, "WorkerError",
                            "the worker did not start in time (the machine is busy)")
            if job.cancelled.is_set():
                return _end(job, spec, "Cancelled", "it was cancelled before it started")
            if worker.proc.poll() is not None:
                return _end(job, spec, "WorkerError",
                            f"{worker.exit_description()} before the program ran")
            try:
                worker.send_job(self._message(spec))
            except OSError:
                pass                 # it died: the reader reports the exit
            job.sent = True
            job.emit(Phase("running"))
            last, printed = self._listen(job, worker)
            if spec.kind == "record":
                outcome = {"result": self._recording(job, worker, last, printed)}
            else:
                outcome = {"error": self._training_error(job, worker, last)}
            # The slot bounds programs running at once, and this one has stopped: the next
            # in line starts while this worker is killed (under a class's load the kill
            # waits for the zygote, up to a tenth of a second).
            free()
            # Everything the job started (a child that left its session, in its namespace,
            # cgroup and uid) is gone before its end is told; the next run never meets it.
            worker.kill()
            job.finish(**outcome)
        finally:
            worker.kill()

    def _message(self, spec) -> dict:
        limits = self.config.limits
        if spec.kind == "train":
            rl = limits.rlimits()
            rl["cpu_s"] = None       # training is long by design; the wall clock bounds it
            return {"kind": "train", "config": spec.config, "limits": rl}
        program = spec.program
        if program and self.config.hosted:
            program = {"argv": program.get("argv")}   # its sandbox has its own directory
        return {"kind": "record", "source": spec.source, "filename": spec.filename,
                "timeout": self._timeout(spec), "max_ops": limits.max_ops,
                "max_stdout": limits.max_stdout, "limits": limits.rlimits(),
                "program": program, "tapes": list(spec.tapes) if spec.tapes else None,
                "eager": spec.eager, "keep_steps": spec.keep_steps}

    def _timeout(self, spec) -> float:
        return self.config.limits.timeout_s if spec.timeout is None else spec.timeout

    def deadline_s(self, spec) -> Optional[float]:
        """How long after it is sent a job may take in all; None: no bound (local training).
        Hosted mode fixes it when the job starts: nothing the worker sends moves it."""
        if spec.kind == "train":
            return self.config.limits.training_s or None
        if self.config.hosted:
            return self._timeout(spec) + GRACE_S + HOSTED_FINISH_S
        return self._timeout(spec) + GRACE_S

    def _listen(self, job: Job, worker) -> tuple:
        """The one message loop of every job: streamed output and training records become
        events; the first other message (or None, past the deadline) ends it, returned with
        the printed output (the newest `max_stdout` characters).

        Only in local mode (the user's own programs) does the worker's "stopped" give the
        recording FINISH_S more; in hosted mode user code can forge any message, so the
        deadline stays where `deadline_s` put it."""
        limits = self.config.limits
        total = self.deadline_s(job.spec)
        deadline = None if total is None else time.monotonic() + total
        printed = ""
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            message = worker.next_message(left)
            if message is None:
                return None, printed
            kind = message.get("type")
            if kind == "stdout":
                text = str(message.get("text", ""))
                printed = (printed + text)[-limits.max_stdout:]
                job.emit(Output(text))
            elif kind == "stopped" and job.spec.kind == "record":
                job.emit(Phase("finishing"))   # the time limit was kept; a recording follows
                if not self.config.hosted:
                    deadline = time.monotonic() + FINISH_S
            elif kind == "metric" and job.spec.kind == "train":
                try:
                    job.emit(Metric(metrics.from_json(message.get("metric"))))
                except metrics.MetricsError as exc:
                    worker.kill()
                    return {"type": "protocol", "message": str(exc)}, printed
            else:
                return message, printed

    def _recording(self, job: Job, worker, message: Optional[dict], printed: str) -> dict:
        """What a record job's last message means, as a recording dict."""
        source, limits = job.spec.source, self.config.limits
        if job.cancelled.is_set():
            return _cancelled(source)
        if message is None:
            return dict(error_recording(
                source, "Timeout",
                f"the program ran longer than its time limit of {self._timeout(job.spec):g} s "
                f"and did not stop when asked, so its worker was killed; what it printed is "
                f"kept, nothing it recorded survived",
                "Look for a loop that never ends, or a single huge operation."),
                stdout=printed)
        kind = message.get("type")
        if kind == "recording":
            why = protocol.check_recording(message.get("recording"), source,
                                           limits.max_ops, limits.max_stdout)
            if why is None:
                return message["recording"]
            message, kind = {"type": "protocol", "message": why}, "protocol"
        if kind == "protocol":
            return error_recording(
                source, "ProtocolError",
                f"the worker sent back something no recording is ({message.get('message')}),"
                f" so it was dropped; nothing it recorded is shown",
                "A program that writes to the worker's message channel ends like this.")
        if kind == "oversize":
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

    def _training_error(self, job: Job, worker, message: Optional[dict]) -> Optional[str]:
        """What a training job's last message means: None when it ended well, else why not."""
        if job.cancelled.is_set():
            return "the training job was cancelled (its session ended)"
        if message is None:
            return f"training stopped at its time limit of {self.config.limits.training_s:g} s"
        kind = message.get("type")
        if kind == "done":
            return None
        if kind == "error":
            return str(message.get("message"))
        if kind == "protocol":
            return f"the worker broke the protocol: {message.get('message')}"
        return worker.exit_description()


def _once(fn: Callable[[], None]) -> Callable[[], None]:
    """`fn` on the first call, nothing on later ones."""
    called = []

    def call() -> None:
        if not called:
            called.append(True)
            fn()
    return call


def _usable(worker) -> bool:
    """An idle worker can take a job: it runs, and (if forked) its zygote still watches it."""
    return worker.proc.poll() is None and not getattr(worker.proc, "orphaned", False)


def _start_zygote(config: Config, bwrap: Optional[str] = None) -> Zygote:
    """Local mode's zygote, or with `bwrap` hosted mode's, inside the sandbox."""
    if bwrap is None:
        return Zygote(process.worker_env(config), tempfile.gettempdir(), start=process.spawn)
    env = process.worker_env(config, sandboxed=True)
    seccomp_fd = sandbox.seccomp_file()
    try:
        return Zygote(env, tempfile.gettempdir(), start=process.spawn,
                      wrap=sandbox.zygote_wrap(bwrap, env), seccomp_fd=seccomp_fd)
    finally:
        os.close(seccomp_fd)


def _cancelled(source: str) -> dict:
    return error_recording(source, "Cancelled", "the run was cancelled before it finished")


def _end(job: Job, spec, type_: str, message: str) -> None:
    """End a job that no worker answered for (no-op when it has ended already)."""
    if spec.kind == "record":
        hint = ("The app could not start a worker. Try again; if it persists, restart the app."
                if type_ == "RunnerError" else None)
        job.finish(result=error_recording(spec.source, type_, message, hint))
    else:
        job.finish(error=f"the training job could not run: {message}")
