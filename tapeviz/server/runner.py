"""Server side: the runner hands programs and training jobs to worker processes, with a
time limit and fair queues (queues.py), from warm workers (pool.py) behind hosted mode's
walls (hosted.py); each job's end is told in outcome.py. No TensorFlow here: the Streamlit
process imports this module.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Optional

from . import outcome
from .. import metrics
from .config import Config, Limits
from .hosted import Walls, set_up
from .jobs import ANOMALY_STEPS, KEEP_STEPS, NEWEST_STEPS, Job, Metric, Output, Phase, Record, Recorded, Steps, Train
from .pool import READY_TIMEOUT_S, WarmPool
from .queues import FairQueue, Shares, TooManyJobs
from .streamed import Streamed

GRACE_S = 5.0                # past the program's own time limit, before the worker is killed
FINISH_S = 120.0             # once the program stopped: building and sending a large recording
HOSTED_FINISH_S = 15.0       # hosted mode: the recording's share of a deadline fixed at the start
log = logging.getLogger("tapeviz.runner")

__all__ = ["ANOMALY_STEPS", "KEEP_STEPS", "NEWEST_STEPS", "Config", "Limits", "Record", "Runner", "Train"]


class Runner:
    """Hands jobs to workers: at most `config.workers` runs and `config.training` training
    jobs at once; the rest wait their fair turn (queues.py)."""

    def __init__(self, config: Optional[Config] = None):
        self.config = config or Config.from_env()
        self.walls: Walls = set_up(self.config)   # raises SandboxUnavailable
        self._lock = threading.Lock()
        # Runs and training runs share one ledger: fair shares and caps count both.
        self._shares = Shares(self.config.jobs_per_session, self.config.jobs_per_client)
        self._runs = FairQueue(self.config.workers, self._shares, self.config.sleepers)
        self._trainings = FairQueue(self.config.training, self._shares)
        self._jobs: dict = {}
        self.workers = WarmPool(self.config, self.walls)

    @property
    def sandboxed(self) -> bool:
        return self.walls.sandboxed

    @property
    def warnings(self) -> list:
        """For the page to show, e.g. hosted without bwrap."""
        return self.walls.warnings

    @property
    def zygote(self):
        """The zygote workers fork from; None when they are spawned."""
        return self.workers.zygote

    def warmed(self, timeout: float = READY_TIMEOUT_S) -> bool:
        """Wait until the warm workers are ready to take a job (a server a class meets has
        been up a while: benches start their clocks here)."""
        return self.workers.warmed(timeout)

    @property
    def waiting(self) -> int:
        """How many jobs wait for a free worker slot right now."""
        return self._runs.waiting + self._trainings.waiting

    def status(self) -> dict:
        walls = self.walls.rows(self.config.limits, self.workers.start_row())
        return {"mode": self.config.mode, "sandbox": "bwrap" if self.sandboxed else "none",
                "workers": "spawned" if self.zygote is None else "forked",
                "isolated": self.sandboxed,
                "runs": self._runs.busy, "trainings": self._trainings.busy,
                "waiting": self.waiting, "warnings": list(self.walls.warnings),
                "notes": list(self.walls.notes),
                "walls": [{"wall": w, "on": on, "detail": d} for w, on, d in walls]}

    def close(self) -> None:
        with self._lock:
            jobs = [j for js in self._jobs.values() for j in js]
        for job in jobs:
            job.cancel()
        self.workers.close()

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

    def interrupt(self, owner) -> int:
        """Ask every run of `owner` to stop as Ctrl+C would (Job.interrupt): its recording
        keeps every step; one that does not stop within the grace is cancelled."""
        with self._lock:
            jobs = list(self._jobs.get(owner, ()))
        for job in jobs:
            if job.spec.kind == "record":
                job.interrupt()
            else:
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
            outcome.end(job, "TooManyJobs", str(exc))
            return job
        self._register(job)
        threading.Thread(target=self._serve, args=(job, ticket), daemon=True,
                         name=f"tapeviz-{spec.kind}").start()
        return job

    def record(self, source: str, filename: str = "program.py",
               timeout: Optional[float] = None, owner=None,
               program: Optional[dict] = None, tapes: Optional[tuple] = None,
               client=None, eager: bool = False,
               keep_steps: Optional[int] = KEEP_STEPS, newest: int = NEWEST_STEPS,
               anomalies: int = ANOMALY_STEPS) -> dict:
        """Run a program in a worker and return its recording as a plain dict: `submit` a
        `jobs.Record` and follow its events to the `Recorded` one (the command line's way;
        the page folds every event, state/run_job.py). `keep_steps`: a loop's steps
        recorded whole (None: every op of every step), `newest` and `anomalies` the steps
        kept whole besides (see jobs.KEEP_STEPS)."""
        job = self.submit(Record(source, filename, timeout, program,
                                 tuple(tapes) if tapes else None, eager, keep_steps,
                                 newest, anomalies),
                          owner, client)
        for event in job.stream():
            if isinstance(event, Recorded):
                return event.data
        return job.result

    def _serve(self, job: Job, ticket) -> None:
        """A job's own thread: its turn in line, its worker, its end."""
        line = self._runs if job.spec.kind == "record" else self._trainings
        try:
            if not line.acquire(ticket, lambda place: job.emit(Phase("queued", place)),
                                job.cancelled):
                outcome.end(job, "Cancelled", "it was cancelled before it started")
                return
            free = line.slot()       # a sleeping run's slot gives way (sleepers.py)
            try:
                self._run(job, free)
            finally:
                free()
        except Exception as exc:   # noqa: BLE001 - the job ends with it; the server stays up
            log.exception("tapeviz: a job failed in the runner")
            outcome.end(job, "RunnerError", f"{type(exc).__name__}: {exc}")
        finally:
            self._shares.leave(ticket)
            self._unregister(job)
            outcome.end(job, "RunnerError", "the job ended without a result")

    def _run(self, job: Job, free: Callable[[], None]) -> None:
        """Run `job` in a worker; `free()` gives its run slot (queues.Slot) back."""
        spec = job.spec
        worker = job.worker = self.workers.take()
        try:
            if job.cancelled.is_set():
                return outcome.end(job, "Cancelled", "it was cancelled before it started")
            if not worker.ready.is_set():
                job.emit(Phase("starting"))
            if not worker.ready.wait(READY_TIMEOUT_S) and worker.proc.poll() is None:
                return outcome.end(job, "WorkerError",
                                   "the worker did not start in time (the machine is busy)")
            if job.cancelled.is_set():
                return outcome.end(job, "Cancelled", "it was cancelled before it started")
            if worker.proc.poll() is not None:
                return outcome.end(job, "WorkerError",
                                   f"{worker.exit_description()} before the program ran")
            try:
                worker.send_job(self._message(spec))
            except OSError:
                pass                 # it died: the reader reports the exit
            job.sent = True
            job.emit(Phase("running"))
            free.watch_cpu(worker)
            streamed = Streamed()
            last, printed = self._listen(job, worker, streamed)
            # The slot bounds programs running at once, and this one has stopped: the next
            # in line starts while its recording is read and this worker is killed (under
            # a class's load the kill waits for the zygote, up to a tenth of a second).
            free()
            limits = self.config.limits
            if spec.kind == "record":
                end = {"recorded": outcome.recorded(job, worker, last, printed, limits,
                                                    self._timeout(spec), streamed)}
            else:
                end = {"error": outcome.training_error(job, worker, last, limits)}
            # Everything the job started (a child that left its session, in its namespace,
            # cgroup and uid) is gone before its end is told; the next run never meets it.
            worker.kill()
            job.finish(**end)
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
                "live_timeout": self._live_timeout(spec),
                "eager": spec.eager, "keep_steps": spec.keep_steps,
                "keep": {"first": spec.keep_steps, "newest": spec.newest,
                         "anomalies": spec.anomalies}}

    def _timeout(self, spec) -> float:
        return self.config.limits.timeout_s if spec.timeout is None else spec.timeout

    def _live_timeout(self, spec) -> Optional[float]:
        """A page's run (the config's limit) that charts steps live runs on to this (local
        mode only: hosted, nothing the worker sends may move a deadline)."""
        live = self.config.limits.live_timeout_s
        if spec.kind != "record" or spec.timeout is not None or self.config.hosted or not live:
            return None
        return live if live > self._timeout(spec) else None

    def deadline_s(self, spec) -> Optional[float]:
        """How long after it is sent a job may take in all; None: no bound (local training).
        Hosted mode fixes it when the job starts: nothing the worker sends moves it."""
        if spec.kind == "train":
            return self.config.limits.training_s or None
        if self.config.hosted:
            return self._timeout(spec) + GRACE_S + HOSTED_FINISH_S
        return self._timeout(spec) + GRACE_S

    def _listen(self, job: Job, worker, streamed: Streamed) -> tuple:
        """The one message loop of every job: streamed output, step summaries (kept in
        `streamed` too) and training records become events; the first other message (or
        None, past the deadline) ends it, returned with the printed output (the newest
        `max_stdout` characters).

        Only in local mode (the user's own programs) does the worker's "stopped" give the
        recording FINISH_S more; in hosted mode user code can forge any message, so the
        deadline stays where `deadline_s` put it."""
        limits = self.config.limits
        total = self.deadline_s(job.spec)
        deadline = None if total is None else time.monotonic() + total
        printed, lifted = "", False
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
            elif kind == "steps" and job.spec.kind == "record":
                streamed.add_steps(message["steps"], message["step_sources"])
                job.emit(Steps(message["steps"], message["step_sources"]))
                live = self._live_timeout(job.spec)
                if live and message["steps"] and deadline is not None and not lifted:
                    # the worker lifted its limit when it sent these (recorder._Timer.lift)
                    lifted = True
                    deadline += live - self._timeout(job.spec)
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

