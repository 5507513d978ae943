"""One job model for both pages: a job (a recording or a training run) is submitted to the
runner, and its handle gives typed events (phase, output, metric, steps, recording, error,
done)
and takes cancel, and for training pause/resume/stop/snapshot. No TensorFlow, no Streamlit.
"""
from __future__ import annotations

import queue
import threading
from dataclasses import dataclass, field
from typing import Iterator, Optional

from ..recording import Recording

# -- what is asked ------------------------------------------------------------------------


# The default keep policy (worker/keep.py), the page's and the command line's: a loop's first
# KEEP_STEPS steps whole, its NEWEST_STEPS newest sampled steps and up to ANOMALY_STEPS
# steps whose cheap check found a NaN/Inf, a None gradient or an error; the rest run
# uninstrumented, summarized (worker/window.py). A class's typed training loop (the eager
# guide's MNIST loop, ~250 ops a step) then settles in its time limit at close to plain
# speed, with every step's loss charted, where recording all 400 steps took 100k ops and a
# Timeout. 20 steps are enough to see a loop fold ("×N steps") and its first losses move.
KEEP_STEPS = 20
NEWEST_STEPS = 5
ANOMALY_STEPS = 5


STOP_GRACE_S = 10.0   # how long a program asked to stop may take before it is cancelled


@dataclass(frozen=True)
class Record:
    """Record one program. `program` ({argv, cwd, path}) runs it as `python PROGRAM.py
    ARGS` would; `tapes` (A, B), and `keep_steps` (a loop's first steps kept whole; None:
    every op of every step), `newest` and `anomalies`: see worker/window.py and keep.py;
    `timeout` None: the config's; `eager`: run tf.functions eagerly, so their ops are
    recorded one by one."""
    source: str
    filename: str = "program.py"
    timeout: Optional[float] = None
    program: Optional[dict] = None
    tapes: Optional[tuple] = None
    eager: bool = False
    keep_steps: Optional[int] = KEEP_STEPS
    newest: int = NEWEST_STEPS
    anomalies: int = ANOMALY_STEPS
    kind = "record"


@dataclass(frozen=True)
class Train:
    """Train as `config` says (worker/training.py's DEFAULTS)."""
    config: dict = field(default_factory=dict)
    kind = "train"


# -- what comes back ----------------------------------------------------------------------


@dataclass(frozen=True)
class Phase:
    """What the job waits for next: queued (with its place), starting (a worker importing
    TensorFlow), running, finishing (the program stopped; its recording is on its way)."""
    name: str
    place: Optional[int] = None


@dataclass(frozen=True)
class Output:
    """Printed output the program streamed (kept for a worker that dies before the end)."""
    text: str


@dataclass(frozen=True)
class Metric:
    """One training record (a tapeviz.metrics record, already checked)."""
    record: object


@dataclass(frozen=True)
class Steps:
    """Step summaries a record job's program made since the last Steps (streamed while it
    runs, about every half second, and once when it stops): `steps` as the recording's
    `steps` entries (dicts, checked by the channel), `step_sources` only the new entries
    of its `step_sources`, which the summaries' `sources` index into."""
    steps: list
    step_sources: list


@dataclass(frozen=True)
class Recorded:
    """A record job's recording, read through the gate (recording_gate.read) against its
    bounds, or one that holds only why it has none: the Recording to draw, and its dict."""
    recording: Recording
    data: dict


@dataclass(frozen=True)
class Error:
    """Why a job failed, in words (a training job; a record job says it in its recording)."""
    message: str


@dataclass(frozen=True)
class Done:
    """The last event of every job."""


class Job:
    """The handle of one submitted job. Events arrive in order on `stream`, `next_event` or
    `events` (one reader); `result` (a record job's recording dict), `recording` (the
    Recording read from it) and `error` are set before `Done`."""

    def __init__(self, spec, owner=None, client=None):
        self.spec = spec
        self.owner, self.client = owner, client
        self.phase: Optional[str] = None   # the last Phase event's name; "done" at the end
        self.place: Optional[int] = None
        self.result: Optional[dict] = None
        self.recording: Optional[Recording] = None
        self.error: Optional[str] = None
        self.cancelled = threading.Event()
        self.worker = None                 # set while a worker runs it
        self.sent = False                  # the job reached its worker
        self._events: queue.Queue = queue.Queue()
        self._done = threading.Event()
        self._lock = threading.Lock()

    # -- reading --------------------------------------------------------------------------
    def next_event(self, timeout: Optional[float] = None):
        """The next event, or None when none came within `timeout` (None: wait)."""
        try:
            return self._events.get(timeout=timeout)
        except queue.Empty:
            return None

    def stream(self) -> Iterator:
        """Every event in order, each waited for, up to and with `Done` (for one reader)."""
        while True:
            event = self._events.get()
            yield event
            if isinstance(event, Done):
                return

    def events(self) -> list:
        """Every event that arrived since the last read (never blocks)."""
        out = []
        while True:
            try:
                out.append(self._events.get_nowait())
            except queue.Empty:
                return out

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: Optional[float] = None) -> bool:
        return self._done.wait(timeout)

    # -- commands -------------------------------------------------------------------------
    def cancel(self) -> None:
        """End it now, queued or running: its worker is killed, nothing waits."""
        self.cancelled.set()
        worker = self.worker
        if worker is not None:
            worker.kill()

    def interrupt(self, grace: float = STOP_GRACE_S) -> None:
        """Stop a record job's program as Ctrl+C would (the recorder raises KeyboardInterrupt
        in it), so it ends its own way and its recording keeps every step; a program still
        running after `grace` seconds is cancelled. Queued: cancelled at once."""
        if not self.sent:
            self.cancel()
            return
        self.command("interrupt")
        threading.Thread(target=lambda: self.wait(grace) or self.cancel(), daemon=True,
                         name="tapeviz-stop").start()

    def command(self, word: str) -> None:
        """A command for the worker: a training job's "pause", "resume", "stop" or
        "snapshot PATH"; a record job's "interrupt"."""
        worker = self.worker
        if worker is not None and self.sent and not self.done:
            try:
                worker.send(word)
            except (BrokenPipeError, OSError, ValueError):
                pass                       # it died: its exit ends the job

    def pause(self) -> None:
        self.command("pause")

    def resume(self) -> None:
        self.command("resume")

    def stop(self, timeout: float = 10.0) -> None:
        """Ask for a clean stop (the run sends its done record); kill it after `timeout`."""
        self.command("stop")
        if not self.wait(timeout):
            self.cancel()

    # -- the runner's side ----------------------------------------------------------------
    def emit(self, event) -> None:
        if isinstance(event, Phase):
            self.phase, self.place = event.name, event.place
        self._events.put(event)

    def finish(self, recorded: Optional[Recorded] = None, error: Optional[str] = None) -> None:
        with self._lock:
            if self._done.is_set():
                return
            self.error = error
            if recorded is not None:
                self.result, self.recording = recorded.data, recorded.recording
                self._events.put(recorded)
            if error is not None:
                self._events.put(Error(error))
            self.phase = "done"
            self._events.put(Done())
            self._done.set()
