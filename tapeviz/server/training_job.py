"""A training job in a worker, as the page polls it: metrics in; pause, resume, stop out."""
from __future__ import annotations

import threading
import time
from typing import Optional

from .config import Limits
from .process import Worker
from .queues import FairQueue


class TrainingJob:
    """A training run in a worker: metrics stream in; pause, resume and stop go out."""

    def __init__(self, worker: Optional[Worker], config: dict, slot: Optional[FairQueue],
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
    def cancelled_job(cls) -> TrainingJob:
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
                    self.worker.send_job({"kind": "train", "config": self._config, "limits": rl})
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
                elif kind == "protocol":
                    self.error = f"the worker broke the protocol: {message.get('message')}"
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
