"""Server side: run programs and training jobs in worker processes, with limits, a time
limit, and warm workers (TensorFlow already imported) so that a run starts at once.
No TensorFlow here: the Streamlit process imports this module.
"""
from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from .recording import SCHEMA

PACKAGE_ROOT = Path(__file__).resolve().parent.parent
READY_TIMEOUT_S = 120.0      # a cold worker on a busy machine may take this long to import TF
GRACE_S = 5.0                # past the program's own time limit, before the worker is killed


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

    def rlimits(self) -> dict:
        return {"cpu_s": self.cpu_s, "address_space_bytes": self.address_space_bytes,
                "file_size_bytes": self.file_size_bytes, "processes": self.processes}


@dataclass
class Config:
    mode: str = "local"
    workers: int = 2                 # runs at once; others wait in the queue
    warm: int = 1                    # idle workers kept with TensorFlow imported
    limits: Limits = field(default_factory=Limits)

    @classmethod
    def from_env(cls, env=os.environ) -> "Config":
        mode = env.get("TAPEVIZ_MODE", "local").strip().lower() or "local"
        if mode == "hosted":
            limits = Limits(timeout_s=float(env.get("TAPEVIZ_TIMEOUT_S", 20)),
                            cpu_s=int(env.get("TAPEVIZ_CPU_S", 60)),
                            address_space_bytes=int(float(env.get("TAPEVIZ_MEMORY_GB", 6))
                                                    * 2**30),
                            file_size_bytes=int(float(env.get("TAPEVIZ_FILE_MB", 16)) * 2**20),
                            processes=int(env.get("TAPEVIZ_PROCESSES", 256)))
        else:
            limits = Limits(timeout_s=float(env.get("TAPEVIZ_TIMEOUT_S", 30)))
        return cls(mode=mode, workers=int(env.get("TAPEVIZ_WORKERS", 2)),
                   warm=int(env.get("TAPEVIZ_WARM", 1)), limits=limits)


class Worker:
    """One worker process and the reader thread that turns its messages into a queue."""

    def __init__(self, config: Config):
        self.workdir = tempfile.TemporaryDirectory(prefix="tapeviz-")
        env = _worker_env(config, self.workdir.name)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tapeviz.worker"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL if config.mode == "hosted" else None,
            cwd=self.workdir.name, env=env, text=True, encoding="utf-8",
            start_new_session=True)   # its own process group: killing it kills its children
        self.messages: queue.Queue = queue.Queue()
        self.ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                continue             # not ours: the channel only carries JSON lines
            if message.get("type") == "ready":
                self.ready.set()
            else:
                self.messages.put(message)
        self.messages.put({"type": "exit"})

    def send(self, message) -> None:
        text = message if isinstance(message, str) else json.dumps(message)
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def next_message(self, timeout: Optional[float]) -> Optional[dict]:
        try:
            return self.messages.get(timeout=timeout)
        except queue.Empty:
            return None

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self.workdir.cleanup()

    def exit_description(self) -> str:
        code = self.proc.wait(timeout=5)
        if code < 0:
            name = signal.Signals(-code).name
            why = {"SIGKILL": " (killed: out of memory, or a limit)",
                   "SIGSEGV": " (a crash inside native code)",
                   "SIGXCPU": " (its CPU-time limit)"}.get(name, "")
            return f"the worker process died from {name}{why}"
        return f"the worker process exited with status {code}"


def _worker_env(config: Config, workdir: str) -> dict:
    if config.mode == "hosted":
        # Nothing of the server's environment (secrets) reaches user code.
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": workdir, "TMPDIR": workdir,
               "LANG": "C.UTF-8"}
    else:
        env = dict(os.environ)
    env["PYTHONPATH"] = str(PACKAGE_ROOT)
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def error_recording(source: str, type_: str, message: str, hint: Optional[str] = None) -> dict:
    """A recording that holds only an error, for runs that produced nothing better."""
    return {"schema": SCHEMA, "source": source, "stdout": "",
            "error": {"type": type_, "message": message, "line": None, "hint": hint},
            "ops": [], "tensors": [], "tapes": [], "alerts": [], "warnings": [],
            "dropped": {}, "duration_s": None}


class Runner:
    """Hands jobs to workers: at most `config.workers` at once, the rest wait their turn."""

    def __init__(self, config: Optional[Config] = None):
        self.config = config or Config.from_env()
        self._lock = threading.Lock()
        self._idle: list = []
        self._slots = threading.Semaphore(self.config.workers)
        self._waiting = 0
        self.fill()

    # -- the warm pool -----------------------------------------------------------------------
    def fill(self) -> None:
        with self._lock:
            self._idle = [w for w in self._idle if w.proc.poll() is None]
            while len(self._idle) < self.config.warm:
                self._idle.append(Worker(self.config))

    def _take(self) -> Worker:
        with self._lock:
            worker = self._idle.pop(0) if self._idle else None
        if worker is None or worker.proc.poll() is not None:
            worker = Worker(self.config)
        threading.Thread(target=self.fill, daemon=True).start()
        return worker

    @property
    def waiting(self) -> int:
        """How many jobs wait for a free worker slot right now."""
        return self._waiting

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for w in idle:
            w.kill()

    # -- jobs ---------------------------------------------------------------------------------
    def _acquire_slot(self, on_wait=None) -> None:
        if self._slots.acquire(blocking=False):
            return
        with self._lock:
            self._waiting += 1
            place = self._waiting
        try:
            if on_wait:
                on_wait(place)
            self._slots.acquire()
        finally:
            with self._lock:
                self._waiting -= 1

    def record(self, source: str, filename: str = "program.py",
               timeout: Optional[float] = None, on_wait=None) -> dict:
        """Run a program in a worker and return its recording as a plain dict.

        Never raises for a fault of the program or the worker: those come back in `error`."""
        limits = self.config.limits
        timeout = limits.timeout_s if timeout is None else timeout
        self._acquire_slot(on_wait)
        worker = None
        try:
            worker = self._take()
            if not worker.ready.wait(READY_TIMEOUT_S) and worker.proc.poll() is None:
                return error_recording(source, "WorkerError",
                                       "the worker did not start in time (the machine is busy)")
            if worker.proc.poll() is not None:
                return error_recording(source, "WorkerError", worker.exit_description())
            worker.send({"kind": "record", "source": source, "filename": filename,
                         "timeout": timeout, "max_ops": limits.max_ops,
                         "max_stdout": limits.max_stdout, "limits": limits.rlimits()})
            message = worker.next_message(timeout + GRACE_S)
            if message is None:
                return error_recording(
                    source, "Timeout",
                    f"the program ran longer than its time limit of {timeout:g} s and did not "
                    f"stop when asked, so its worker was killed; nothing it recorded survived",
                    "Look for a loop that never ends, or a single huge operation.")
            if message.get("type") == "recording":
                return message["recording"]
            return error_recording(
                source, "WorkerCrash",
                f"{worker.exit_description()} while running this program; nothing it "
                f"recorded survived. Other runs are not affected.",
                "A program that exhausts memory, kills its own process or crashes native "
                "code ends like this. Make the tensors smaller or remove the offending call.")
        finally:
            if worker is not None:
                worker.kill()
            self._slots.release()

    def start_training(self, config: dict, on_wait=None) -> "TrainingJob":
        self._acquire_slot(on_wait)
        try:
            worker = self._take()
            return TrainingJob(worker, config, self._slots, self.config.limits)
        except BaseException:
            self._slots.release()
            raise


class TrainingJob:
    """A training run in a worker: metrics stream in; pause, resume and stop go out."""

    def __init__(self, worker: Worker, config: dict, slot: threading.Semaphore, limits: Limits):
        self.worker = worker
        self.metrics: list = []
        self.error: Optional[str] = None
        self.done = False
        self._slot = slot
        self._released = False
        self._limits = limits
        self._config = config
        self._sent = False

    def poll(self) -> list:
        """New metric records since the last poll (never blocks)."""
        if not self._sent and self.worker.ready.is_set():
            rl = self._limits.rlimits()
            rl["cpu_s"] = None       # training is long by design; the wall clock is the user's
            self.worker.send({"kind": "train", "config": self._config, "limits": rl})
            self._sent = True
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
            elif kind == "exit":
                if not self.done:
                    self.error = self.worker.exit_description()
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

    def _finish(self) -> None:
        self.done = True
        if not self._released:
            self._released = True
            self.worker.kill()
            self._slot.release()
