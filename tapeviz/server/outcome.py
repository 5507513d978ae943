"""What a job's end means, in words: a record job's recording (the worker's, read through
the gate, or one that holds only why there is none: a timeout, a crash, a broken protocol)
and a training job's error. Every recording a job gives passed `recording_gate.read`.
"""
from __future__ import annotations

from typing import Optional

from . import protocol
from .. import recording_gate as gate
from ..recording import SCHEMA
from .config import Limits
from .jobs import Job, Recorded
from .streamed import Streamed

RUNNER_HINT = "The app could not start a worker. Try again; if it persists, restart the app."


def error_recording(source: str, type_: str, message: str, hint: Optional[str] = None,
                    stdout: str = "") -> dict:
    """A recording that holds only an error, for runs that produced nothing better."""
    return {"schema": SCHEMA, "source": source, "stdout": stdout,
            "error": {"type": type_, "message": message, "line": None, "hint": hint},
            "ops": [], "tensors": [], "tapes": [], "alerts": [], "warnings": [],
            "dropped": {}, "duration_s": None}


def own(recording: dict) -> Recorded:
    """A recording the runner made (an error, nothing of the worker's), read like any other.
    A program over the gate's source bound cannot be kept in it: its error stays, its text
    does not."""
    try:
        return Recorded(*gate.read(recording))
    except gate.Unreadable:
        return Recorded(*gate.read(dict(recording, source="", stdout="")))


def failed(source: str, type_: str, message: str) -> Recorded:
    """The recording of a run that no worker answered for (`type_` "RunnerError": the
    runner itself failed, and the hint says what to do)."""
    hint = RUNNER_HINT if type_ == "RunnerError" else None
    return own(error_recording(source, type_, message, hint))


def _kept(streamed: Optional[Streamed]) -> str:
    """What of a killed run's recording survived, in words."""
    if not streamed:
        return "nothing it recorded survived"
    n = len(streamed.steps)
    return f"its {n:,} step summar{'y' if n == 1 else 'ies'} streamed while it ran " \
           f"{'is' if n == 1 else 'are'} kept" + (", and the steps it kept whole"
                                                   if streamed.kept else "")


def cut_short(recording: dict, streamed: Optional[Streamed], why: str) -> Recorded:
    """A runner-made recording of a run cut short, with what its worker streamed."""
    if streamed:
        recording = streamed.into(recording, why)
    return own(recording)


def recorded(job: Job, worker, message: Optional[dict], printed: str, limits: Limits,
             timeout_s: float, streamed: Optional[Streamed] = None) -> Recorded:
    """What a record job's last message means: its recording, or why there is none.
    `message` None: the deadline passed; `printed`: the output it streamed; `streamed`:
    the step summaries (and steps kept whole) it streamed, kept in a run cut short."""
    source = job.spec.source
    if job.cancelled.is_set():
        return cut_short(error_recording(
            source, "Cancelled", "the run was cancelled before it finished"
            + ("" if not streamed else f"; {_kept(streamed)}"),
            stdout=printed if streamed else ""), streamed, "cancelled")
    if message is None:
        return cut_short(error_recording(
            source, "Timeout",
            f"the program ran longer than its time limit of {timeout_s:g} s and did not "
            f"stop when asked, so its worker was killed; what it printed is kept, "
            f"{_kept(streamed)}",
            "Look for a loop that never ends, or a single huge operation.", printed),
            streamed, "timeout")
    kind = message.get("type")
    if kind == "recording":
        try:
            return Recorded(*protocol.read_recording(message.get("recording"), source,
                                                     limits.max_ops, limits.max_stdout))
        except protocol.ProtocolError as exc:
            message, kind = {"type": "protocol", "message": str(exc)}, "protocol"
    if kind == "protocol":
        return own(error_recording(
            source, "ProtocolError",
            f"the worker sent back something no recording is ({message.get('message')}),"
            f" so it was dropped; nothing it recorded is shown",
            "A program that writes to the worker's message channel ends like this."))
    if kind == "oversize":
        return own(error_recording(
            source, "WorkerError", "the recording was too large to send back (over "
            f"{protocol.MAX_MESSAGE // 2**20} MiB), so the worker was dropped",
            "Record fewer or smaller tensors, e.g. a single training step."))
    return cut_short(error_recording(
        source, "WorkerCrash",
        f"{worker.exit_description()} while running this program; what it printed "
        f"is kept, {_kept(streamed)}. Other runs are not affected.",
        "A program that exhausts memory, kills its own process or crashes native "
        "code ends like this. Make the tensors smaller or remove the offending call.",
        printed), streamed, "crashed")


def training_error(job: Job, worker, message: Optional[dict], limits: Limits) -> Optional[str]:
    """What a training job's last message means: None when it ended well, else why not."""
    if job.cancelled.is_set():
        return "the training job was cancelled (its session ended)"
    if message is None:
        return f"training stopped at its time limit of {limits.training_s:g} s"
    kind = message.get("type")
    if kind == "done":
        return None
    if kind == "error":
        return str(message.get("message"))
    if kind == "protocol":
        return f"the worker broke the protocol: {message.get('message')}"
    return worker.exit_description()


def end(job: Job, type_: str, message: str) -> None:
    """End a job that no worker answered for (no-op when it has ended already)."""
    if job.done:
        return
    if job.spec.kind == "record":
        job.finish(failed(job.spec.source, type_, message))
    else:
        job.finish(error=f"the training job could not run: {message}")
