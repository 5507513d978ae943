"""Server side: run programs and training jobs in worker processes, with limits, a time
limit, a fair queue, and warm workers (TensorFlow already imported) so that a run starts at
once. No TensorFlow here: the Streamlit process imports this module.
"""
from __future__ import annotations

import json
import logging
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from . import sandbox
from .recording import SCHEMA

PACKAGE_ROOT = Path(__file__).resolve().parent.parent
READY_TIMEOUT_S = 120.0      # a cold worker on a busy machine may take this long to import TF
GRACE_S = 5.0                # past the program's own time limit, before the worker is killed
MAX_MESSAGE = 64 * 2**20     # one message line from a worker; a full 20k-op recording is far less
log = logging.getLogger("tapeviz.runner")


@dataclass
class Limits:
    """What one worker may use. Local mode is generous; hosted mode is strict."""
    timeout_s: float = 30.0
    cpu_s: Optional[int] = None
    address_space_bytes: Optional[int] = None
    file_size_bytes: Optional[int] = None
    processes: Optional[int] = None
    max_ops: int = 20_000
    max_stdout: int = 100_000
    training_s: Optional[float] = None       # wall-clock bound on one training job
    disk_bytes: Optional[int] = None         # the sandboxed working directory's size (tmpfs)

    def rlimits(self) -> dict:
        return {"cpu_s": self.cpu_s, "address_space_bytes": self.address_space_bytes,
                "file_size_bytes": self.file_size_bytes, "processes": self.processes}


@dataclass
class Config:
    mode: str = "local"
    workers: int = 2                 # runs at once; others wait in the queue
    warm: int = 1                    # idle workers kept with TensorFlow imported
    training: int = 1                # training jobs at once (their own queue, beside the runs)
    limits: Limits = field(default_factory=Limits)
    sandbox: str = "auto"            # hosted mode: "auto" (bwrap when it works), "bwrap", "none"

    @property
    def hosted(self) -> bool:
        return self.mode == "hosted"

    @classmethod
    def from_env(cls, env=os.environ) -> "Config":
        """TAPEVIZ_MODE=hosted turns on hosted mode; TAPEVIZ_WORKERS, _WARM, _TRAINING_JOBS,
        _TIMEOUT_S, _CPU_S, _MEMORY_GB, _FILE_MB, _PROCESSES, _TRAINING_S, _SANDBOX and
        _DISK_MB override its limits. In the app, Streamlit secrets named TAPEVIZ_* count
        too (the environment wins)."""
        if env is os.environ:
            env = {**_streamlit_secrets(), **os.environ}
        mode = env.get("TAPEVIZ_MODE", "local").strip().lower() or "local"
        if mode == "hosted":
            # Measured: a worker peaks at 1.8 GiB of address space on the mnist_step example
            # and 2.2 GiB training the guide CNN (TensorFlow maps much it never touches), and
            # runs about 10 threads. 3 GiB leaves room for the user's own tensors.
            limits = Limits(timeout_s=float(env.get("TAPEVIZ_TIMEOUT_S", 20)),
                            cpu_s=int(env.get("TAPEVIZ_CPU_S", 60)),
                            address_space_bytes=int(float(env.get("TAPEVIZ_MEMORY_GB", 3))
                                                    * 2**30),
                            file_size_bytes=int(float(env.get("TAPEVIZ_FILE_MB", 16)) * 2**20),
                            processes=int(env.get("TAPEVIZ_PROCESSES", 48)),
                            training_s=float(env.get("TAPEVIZ_TRAINING_S", 900)),
                            disk_bytes=int(float(env.get("TAPEVIZ_DISK_MB", 64)) * 2**20))
        else:
            limits = Limits(timeout_s=float(env.get("TAPEVIZ_TIMEOUT_S", 30)))
        return cls(mode=mode, workers=int(env.get("TAPEVIZ_WORKERS", 2)),
                   warm=int(env.get("TAPEVIZ_WARM", 1)),
                   training=int(env.get("TAPEVIZ_TRAINING_JOBS", 1)), limits=limits,
                   sandbox=env.get("TAPEVIZ_SANDBOX", "auto").strip().lower() or "auto")


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


def _streamlit_secrets() -> dict:
    """TAPEVIZ_* entries of st.secrets, when running inside a Streamlit app (never imports
    Streamlit itself: the command line does not have it loaded)."""
    st = sys.modules.get("streamlit")
    if st is None:
        return {}
    try:
        return {k: str(v) for k, v in st.secrets.items() if k.startswith("TAPEVIZ_")}
    except Exception:  # noqa: BLE001 - no secrets file, or not in a script run: no secrets
        return {}


class Worker:
    """One worker process and the reader thread that turns its messages into a queue."""

    def __init__(self, config: Config, bwrap: Optional[str] = None,
                 uids: Optional[sandbox.UidPool] = None):
        self.uids = uids
        self.uid = uids.take() if uids is not None else None
        if uids is not None and self.uid is None:
            raise RuntimeError("no free user id for a worker (all of TAPEVIZ_UID_BASE's in use)")
        self.workdir = tempfile.mkdtemp(prefix="tapeviz-")
        if self.uid is not None:
            os.chown(self.workdir, self.uid, self.uid)
        env = _worker_env(config, self.workdir, sandboxed=bool(bwrap))
        command = [sys.executable, "-m", "tapeviz.worker"]
        if self.uid is not None:
            command += ["--uid", str(self.uid)]
        if bwrap:
            command = sandbox.bwrap_args(bwrap, self.workdir, env, command,
                                         mnist_dir=os.environ.get("TAPEVIZ_MNIST_DIR"),
                                         disk_bytes=config.limits.disk_bytes)
        self.proc = _spawner.call(lambda: subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL if config.hosted else None,
            cwd=self.workdir, env=env, start_new_session=True))  # killpg reaches its children
        self.messages: queue.Queue = queue.Queue()
        self.ready = threading.Event()   # set by its "ready" message, or when it is gone
        self._killed = False
        self._kill_lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        stream = self.proc.stdout
        while True:
            line = stream.readline(MAX_MESSAGE)
            if not line:
                break
            if not line.endswith(b"\n"):          # too long to be ours: skip to its end
                while line and not line.endswith(b"\n"):
                    line = stream.readline(MAX_MESSAGE)
                self.messages.put({"type": "oversize"})
                continue
            try:
                message = json.loads(line)
            except ValueError:
                continue             # not ours: the channel only carries JSON lines
            if not isinstance(message, dict):
                continue
            if message.get("type") == "ready":
                self.ready.set()
            else:
                self.messages.put(message)
        self.messages.put({"type": "exit"})
        self.ready.set()             # "ready or gone": nobody waits on a dead worker

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
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        if self.uids is not None:
            self.uids.give_back(self.uid)    # kills whatever of its uid escaped the group
        shutil.rmtree(self.workdir, ignore_errors=True)

    def exit_description(self) -> str:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "the worker process stopped answering"
        if code < 0:
            return Worker._describe_signal(-code)
        if code > 128 and code - 128 in signal.valid_signals():   # bwrap reports it so
            return Worker._describe_signal(code - 128)
        return f"the worker process exited with status {code}"

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
    env["PYTHONPATH"] = sandbox.SANDBOX_PACKAGE_ROOT if sandboxed else str(PACKAGE_ROOT)
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def error_recording(source: str, type_: str, message: str, hint: Optional[str] = None) -> dict:
    """A recording that holds only an error, for runs that produced nothing better."""
    return {"schema": SCHEMA, "source": source, "stdout": "",
            "error": {"type": type_, "message": message, "line": None, "hint": hint},
            "ops": [], "tensors": [], "tapes": [], "alerts": [], "warnings": [],
            "dropped": {}, "duration_s": None}


class _Queue:
    """`slots` jobs at once; the rest wait first come, first served, and learn their place."""

    def __init__(self, slots: int):
        self.slots = max(1, int(slots))
        self.busy = 0
        self.tickets: list = []
        self.cond = threading.Condition()

    def acquire(self, on_wait=None, cancelled: Optional[threading.Event] = None) -> bool:
        """True with a slot held; False when cancelled while waiting."""
        with self.cond:
            if self.busy < self.slots and not self.tickets:
                self.busy += 1
                return True
            ticket = object()
            self.tickets.append(ticket)
            told = None
            try:
                while True:
                    if cancelled is not None and cancelled.is_set():
                        return False
                    place = self.tickets.index(ticket) + 1
                    if place == 1 and self.busy < self.slots:
                        self.busy += 1
                        return True
                    if on_wait is not None and place != told:
                        told = place
                        self.cond.release()      # the callback may draw on a page: not locked
                        try:
                            on_wait(place)
                        finally:
                            self.cond.acquire()
                        continue
                    self.cond.wait(0.5)
            finally:
                self.tickets.remove(ticket)
                self.cond.notify_all()

    def release(self) -> None:
        with self.cond:
            self.busy -= 1
            self.cond.notify_all()

    @property
    def waiting(self) -> int:
        return len(self.tickets)


class _Job:
    """What `Runner.cancel` needs to reach one run or training job of an owner."""

    def __init__(self, owner):
        self.owner = owner
        self.cancelled = threading.Event()
        self.worker: Optional[Worker] = None
        self.training: Optional["TrainingJob"] = None

    def cancel(self) -> None:
        self.cancelled.set()
        if self.training is not None:
            self.training.cancel()
        elif self.worker is not None:
            self.worker.kill()


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
        self._runs = _Queue(self.config.workers)
        self._trainings = _Queue(self.config.training)
        self._jobs: dict = {}
        self._closed = False
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
        return Worker(self.config, self.bwrap, self.uids)

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

    # -- owners -------------------------------------------------------------------------------
    def _register(self, owner) -> _Job:
        job = _Job(owner)
        with self._lock:
            self._jobs.setdefault(owner, set()).add(job)
        return job

    def _unregister(self, job: _Job) -> None:
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

    def _record(self, job: _Job, source: str, filename: str, timeout: Optional[float]) -> dict:
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

    def start_training(self, config: dict, on_wait=None, owner=None) -> "TrainingJob":
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


def _cancelled(source: str) -> dict:
    return error_recording(source, "Cancelled", "the run was cancelled (its session ended)")


def _looks_like_recording(rec) -> bool:
    return (isinstance(rec, dict) and rec.get("schema") == SCHEMA
            and all(isinstance(rec.get(k), list) for k in ("ops", "tensors", "tapes")))


class TrainingJob:
    """A training run in a worker: metrics stream in; pause, resume and stop go out."""

    def __init__(self, worker: Optional[Worker], config: dict, slot: Optional[_Queue],
                 limits: Limits, on_done=None):
        self.worker = worker
        self.metrics: list = []
        self.error: Optional[str] = None
        self.done = False
        self._slot = slot
        self._released = False
        self._limits = limits
        self._config = config
        self._sent = False
        self._deadline: Optional[float] = None
        self._on_done = on_done
        self._lock = threading.RLock()

    @classmethod
    def cancelled_job(cls) -> "TrainingJob":
        job = cls(None, {}, None, Limits())
        job.error = "the training job was cancelled before it started (its session ended)"
        job.done = True
        job._released = True
        return job

    def poll(self) -> list:
        """New metric records since the last poll (never blocks)."""
        with self._lock:
            if self.done:
                return []
            if not self._sent and self.worker.ready.is_set():
                rl = self._limits.rlimits()
                rl["cpu_s"] = None   # training is long by design; the wall clock bounds it
                try:
                    self.worker.send({"kind": "train", "config": self._config, "limits": rl})
                except OSError:
                    pass
                self._sent = True
                if self._limits.training_s:
                    self._deadline = time.monotonic() + self._limits.training_s
            new = []
            while True:
                message = self.worker.next_message(0)
                if message is None:
                    break
                kind = message.get("type")
                if kind == "metric":
                    new.append(message["metric"])
                elif kind == "done":
                    self._finish()
                elif kind == "error":
                    self.error = str(message.get("message"))
                    self._finish()
                elif kind in ("exit", "oversize"):
                    if not self.done:
                        self.error = self.worker.exit_description()
                    self._finish()
            if (not self.done and self._deadline is not None
                    and time.monotonic() > self._deadline):
                self.error = (f"training stopped at its time limit of "
                              f"{self._limits.training_s:g} s")
                self._finish()
            self.metrics.extend(new)
            return new

    @property
    def started(self) -> bool:
        return self._sent

    def command(self, word: str) -> None:
        if not self.done and self._sent:
            try:
                self.worker.send(word)
            except (BrokenPipeError, OSError):
                pass

    def stop(self) -> None:
        self.command("stop")
        deadline = time.monotonic() + 10
        while not self.done and time.monotonic() < deadline:
            self.poll()
            time.sleep(0.05)
        self._finish()

    def cancel(self) -> None:
        """Kill it now (the session ended): no goodbye, no waiting."""
        with self._lock:
            if not self.done:
                self.error = "the training job was cancelled (its session ended)"
            self._finish()

    def _finish(self) -> None:
        with self._lock:
            self.done = True
            if not self._released:
                self._released = True
                if self.worker is not None:
                    self.worker.kill()
                if self._slot is not None:
                    self._slot.release()
                if self._on_done is not None:
                    self._on_done()
