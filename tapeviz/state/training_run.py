"""The training page's state, TF-free: one session's training run (started off the script
thread, so a queued start never blocks the page) and its metrics stream folded into what
the page shows: status, progress, speed, ETA, warnings, chart inputs.
"""
from __future__ import annotations

import atexit
import math
import os
import shutil
import tempfile
import threading
import time
import uuid
import weakref
from collections import deque
from typing import Optional

from .. import metrics
from ..server.jobs import Done, Metric, Phase, Train

WARM_UP_STEPS = 5      # left out of a run's speed: tf.function traces, caches fill
RECENT_STEPS = 30      # the live steps/s is taken over this many recent steps
MAX_POINTS = 1500      # per chart trace; longer histories are thinned for drawing only
POLL_S = 0.2           # the run's own thread checks this often that a page still looks
ABANDONED_S = 120.0    # a training run no page has looked at for this long is ended: a closed
                       # tab (a background tab still redraws at least once a minute)
GONE_S = 1.0           # how often the run asks whether its session is still connected
KEEP_SNAPSHOTS = 8     # "Inspect this step" folders kept by the server process (the newest)


_snapshot_folders: deque = deque()
_snapshot_lock = threading.Lock()


def snapshot_folder() -> str:
    """A new folder for one "Inspect this step" snapshot (weights, Adam's state, a batch:
    about a megabyte for the guide CNN). Every press makes one, so only the newest
    KEEP_SNAPSHOTS stay, and the server's exit removes those: an older step program run
    again says that its file is gone."""
    folder = tempfile.mkdtemp(prefix="tapeviz-step-")
    with _snapshot_lock:
        _snapshot_folders.append(folder)
        while len(_snapshot_folders) > KEEP_SNAPSHOTS:
            shutil.rmtree(_snapshot_folders.popleft(), ignore_errors=True)
    return folder


def _remove_snapshots(folders: deque) -> None:
    while folders:
        shutil.rmtree(folders.popleft(), ignore_errors=True)


atexit.register(_remove_snapshots, _snapshot_folders)


class Owner:
    """One session's identity for the runner. When the session ends, Streamlit drops its
    state, this object is freed, and the runner cancels the session's jobs."""

    def __init__(self, runner):
        self.id = f"train-{uuid.uuid4().hex}"
        weakref.finalize(self, runner.cancel, self.id)


class Run:
    """One training run: its config, the job once the runner hands it over (its place in the
    queue meanwhile), and every record it sent, folded by kind.

    Its own thread submits the job and folds its events in as they come, and ends a run
    whose session is gone (`alive()` false: its tab closed, paused or not) within GONE_S,
    or that no page has looked at for ABANDONED_S; the page only reads.
    """

    def __init__(self, runner, config: dict, owner_id: Optional[str] = None, client: Optional[str] = None,
                 alive=None):
        self.config = dict(config)
        self.job = None
        self.place: Optional[int] = None      # place in the runner's queue while waiting
        self.failed: Optional[str] = None     # the runner itself failed to start the job
        self.paused = False
        self.start: Optional[dict] = None
        self.steps: list = []
        self.evals: list = []
        self.warnings: list = []
        self.predictions: Optional[dict] = None
        self.done: Optional[dict] = None
        self.snapshot: Optional[dict] = None  # the latest "snapshot" record (Inspect this step)
        self.seen = time.monotonic()          # when a page last showed it (see `touch`)
        # client: the browser (session.client_id), whose tabs share one fair share of workers
        self._runner, self._owner_id, self._client = runner, owner_id, client
        self._alive = alive
        threading.Thread(target=self._start, daemon=True, name="tapeviz-train-start").start()

    def _start(self) -> None:
        try:
            self.job = self._runner.submit(Train(self.config), owner=self._owner_id, client=self._client)
        except Exception as exc:   # noqa: BLE001 - the page shows it; the app stays up
            self.failed = f"{type(exc).__name__}: {exc}"
            return
        asked = time.monotonic()
        while True:
            event = self.job.next_event(POLL_S)
            now = time.monotonic()
            if self._alive is not None and now - asked >= GONE_S and not self.job.done:
                asked = now
                if not self._alive():
                    _end(self.job)    # its tab closed: the next tab's Start gets the worker
            if event is None:
                if not self.paused and now - self.seen > ABANDONED_S:
                    _end(self.job)    # nobody is watching: give the worker to someone who is
                continue
            self.take(event)
            if isinstance(event, Done):
                return

    # -- the stream ----------------------------------------------------------------------
    def take(self, event) -> None:
        """Fold in one event of the job. Only the run's own thread calls this, so records
        are folded in the order they came."""
        if isinstance(event, Phase):
            self.place = event.place if event.name == "queued" else None
        elif isinstance(event, Metric):
            self.fold(metrics.as_dict(event.record))

    def fold(self, record: dict) -> None:
        """One training record (tapeviz.metrics, as plain data), into the list of its kind."""
        kind = record.get("type")
        if kind == "step":
            self.steps.append(record)
        elif kind == "eval":
            self.evals.append(record)
        elif kind == "warning":
            self.warnings.append(record)
        elif kind == "predictions":
            self.predictions = record
        elif kind == "start":
            self.start = record
        elif kind == "done":
            self.done = record
        elif kind == "snapshot":
            self.snapshot = record

    def touch(self) -> None:
        """The page shows this run: keep it alive."""
        self.seen = time.monotonic()

    # -- commands ------------------------------------------------------------------------
    def pause(self) -> None:
        if self.job is not None and self.status == "running":
            self.job.pause()
            self.paused = True

    def resume(self) -> None:
        if self.job is not None and self.paused:
            self.job.resume()
            self.paused = False

    def snapshot_now(self, timeout: float = 30.0) -> Optional[dict]:
        """Ask the worker to save this step (weights, Adam's state, the next batch) and wait
        for its "snapshot" record: the program in it records the step the run takes next.
        None when the run has no live worker or did not answer in time."""
        job = self.job
        if job is None or job.done or not job.sent:
            return None
        folder = snapshot_folder()
        before = self.snapshot
        job.command(f"snapshot {os.path.join(folder, 'step.npz')}")
        deadline = time.monotonic() + timeout
        while self.snapshot is before and time.monotonic() < deadline and not job.done:
            time.sleep(0.05)      # the run's own thread folds the record in
        return self.snapshot if self.snapshot is not before else None

    def cancel(self) -> None:
        """End it now, queued or running (Reset, or a new Start)."""
        if self._owner_id is not None:
            self._runner.cancel(self._owner_id)
        if self.job is not None:
            _end(self.job)

    # -- what the page shows -------------------------------------------------------------
    @property
    def status(self) -> str:
        """queued, starting, running, paused, finished, stopped, nan or failed."""
        job = self.job
        if self.failed:
            return "failed"
        if job is None:
            return "starting"
        if self.place is not None and not job.done:
            return "queued"
        if job.done:
            if self.done is not None:
                return self.done.get("reason") or "finished"
            if job.error:
                return "failed"
            # else the thread is still folding the last records in
        if self.paused:
            return "paused"
        return "running" if self.steps else "starting"

    @property
    def live(self) -> bool:
        """Whether the page should keep polling."""
        return self.status in ("queued", "starting", "running")

    @property
    def error(self) -> Optional[str]:
        if self.failed:
            return self.failed
        job = self.job
        return getattr(job, "error", None) if job is not None else None

    @property
    def total_steps(self) -> Optional[int]:
        if self.start:
            return self.start.get("total_steps")
        return self.steps[-1].get("total_steps") if self.steps else None

    def progress(self) -> dict:
        """step, total, fraction, epoch, epochs, steps_per_s (recent), eta_s."""
        last = self.steps[-1] if self.steps else {}
        total = self.total_steps or 0
        step = last.get("step", 0)
        rate = recent_rate(self.steps)
        eta = (total - step) / rate if rate and total else None
        if self.status not in ("running", "paused", "starting"):
            eta = None
        return {"step": step, "total": total, "fraction": min(1.0, step / total) if total else 0.0,
                "epoch": last.get("epoch", 0), "epochs": (self.start or {}).get("epochs")
                or self.config.get("epochs"), "steps_per_s": rate, "eta_s": eta}

    def speed(self) -> Optional[float]:
        """Steps/s over the later half of the run, what eager vs tf.function compares: the
        first steps pay for tracing, and for the runner warming its next worker beside them."""
        return steady_rate(self.steps, max(WARM_UP_STEPS, len(self.steps) // 2))

    @property
    def mode(self) -> str:
        return "tf.function" if self.config.get("use_tf_function") else "eager"


def _end(job) -> None:
    if not job.done:
        job.cancel()          # kills at once: nobody is waiting for a clean stop


def recent_rate(steps: list, window: int = RECENT_STEPS) -> Optional[float]:
    """Steps/s over the last `window` steps (training time: evaluations and pauses are not in
    `elapsed_s`), or the run's own average while it has too few."""
    if len(steps) < 2:
        return steps[-1].get("steps_per_s") or None if steps else None
    a, b = steps[max(0, len(steps) - 1 - window)], steps[-1]
    return _rate(a, b) or b.get("steps_per_s") or None


def steady_rate(steps: list, warm_up: int = WARM_UP_STEPS) -> Optional[float]:
    if len(steps) < warm_up + 2:
        return None
    return _rate(steps[warm_up], steps[-1])


def _rate(a: dict, b: dict) -> Optional[float]:
    dt = b.get("elapsed_s", 0) - a.get("elapsed_s", 0)
    return (b["step"] - a["step"]) / dt if dt > 0 else None


def thin(records: list, max_points: int = MAX_POINTS) -> list:
    """Every k-th record, and always the last, so a long run draws as fast as a short one."""
    if len(records) <= max_points:
        return records
    k = math.ceil(len(records) / max_points)
    kept = records[::k]
    if kept[-1] is not records[-1]:
        kept.append(records[-1])
    return kept


def duration(seconds: Optional[float]) -> str:
    """Short enough for a metric a sixth of 1024 px wide: "75 s" would be cut as "1 min …"."""
    if seconds is None or not math.isfinite(seconds):
        return "—"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}:{seconds:02d} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d} h"


def warning_text(warning: dict) -> str:
    """A gradient or loss warning in plain words, naming the layer and the step."""
    kind, layer, step = warning.get("kind"), warning.get("layer"), warning.get("step")
    what = {"vanishing": "Vanishing gradients", "exploding": "Exploding gradients",
            "nan": "NaN"}.get(kind, str(kind).capitalize())
    where = f"in layer **{layer}**" if layer else "in the **loss**"
    return f"**{what} {where} at step {step}:** {warning.get('message', '')}."


def first_per_layer(warnings: list) -> list:
    """Each layer's warning of each kind once, at its first step: a dying layer warns at
    every step after, and the page lists layers, not steps."""
    seen, out = set(), []
    for warning in warnings:
        key = (warning.get("kind"), warning.get("layer"))
        if key not in seen:
            seen.add(key)
            out.append(warning)
    return out


def speed_key(config: dict) -> tuple:
    """Speeds compare only like with like: the same model and batch size."""
    return (config.get("model"), int(config.get("batch_size") or 0))


def settings_words(config: Optional[dict], models: dict) -> str:
    """The training settings' label: once a run exists (and they fold away), what it uses."""
    if not config:
        return "Settings"
    return (f"Settings: {models.get(config['model'], config['model'])}, {config['epochs']} "
            f"epoch{'s' * (config['epochs'] != 1)}, batch {config['batch_size']}, learning rate "
            f"{config['learning_rate']:g}" + (", tf.function" if config.get("use_tf_function") else ""))
