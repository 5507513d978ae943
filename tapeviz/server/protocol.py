"""What the server accepts from a worker, checked as if the worker were hostile (user code
shares its process and can write to the message channel): JSON lines under a hard size, parsed
under a budget of objects and numbers, and recordings re-checked against every bound before
the page builds anything from them. No TensorFlow, no Streamlit.
"""
from __future__ import annotations

import time
from typing import Optional

from .. import recording_gate as gate

MAX_MESSAGE = 64 * 2**20     # one message line; a full 20k-op recording of 8x8 tensors is ~48 MB


class ProtocolError(ValueError):
    """A worker sent something no honest worker sends: the worker is dropped."""


def parse(line: bytes, max_ops: int) -> dict:
    """One message as a dict; ProtocolError when it is not JSON, not an object, or holds
    more objects or numbers than a recording within the bounds could. The budget stops the
    parse early, so a forged message costs at most its own bounded size."""
    try:
        message = gate.parse(line, max_ops)
    except gate.Refused as exc:
        raise ProtocolError(f"a message that {exc}") from None
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        raise ProtocolError("a message that is not a JSON object with a type")
    return message


# -- strict message shapes, and what reading them may cost --------------------------------------

MAX_SMALL_MESSAGE = 4 * 2**20   # any message but the recording: stdout chunks are <= 200k chars
OUTPUT_BYTES_PER_S = 2 * 2**20  # what a job's messages may cost per second, past one recording
RECORDING_PREFIX = b'{"type": "recording"'   # how the worker's channel writes one (type first)


def _text(x) -> bool:
    return isinstance(x, str)


def _table(x) -> bool:
    """A small flat table (a worker's resource usage)."""
    return x is None or (isinstance(x, dict) and len(x) <= 32
                         and all(type(v) in (int, float, str, bool) for v in x.values()))


def _metric(x) -> bool:
    return isinstance(x, dict) and isinstance(x.get("type"), str)


MAX_STREAMED_STEPS = 10_000     # summaries in one steps message (the worker sends 2,000)


def _list_of(fields: dict):
    """A list of at most MAX_STREAMED_STEPS objects each as the gate checks `fields` in a
    recording (a streamed step summary, a step source)."""
    return lambda x: (type(x) is list and len(x) <= MAX_STREAMED_STEPS
                      and all(gate.well_formed(item, fields) for item in x))


# type: {field: check}, exactly what the worker sends (worker/serve.py, exits.py, recorder.py);
# the recording itself is read through the gate (read_recording).
SHAPES = {
    "ready": {"pid": lambda x: type(x) is int},
    "stdout": {"text": _text},
    "stderr": {"text": _text},
    "stopped": {},
    "recording": {"recording": lambda x: isinstance(x, dict), "usage": _table,
                  "exit_status": lambda x: x is None or type(x) is int},
    "metric": {"metric": _metric},
    "steps": {"steps": _list_of(gate.STEP), "step_sources": _list_of(gate.STEP_SOURCE)},
    "done": {"usage": _table},
    "error": {"message": _text},
}
REQUIRED = {"ready": ("pid",), "stdout": ("text",), "stderr": ("text",), "recording": ("recording",),
            "metric": ("metric",), "error": ("message",), "steps": ("steps", "step_sources")}


def shape_problem(message: dict) -> Optional[str]:
    """Why `message` is not one of the shapes a worker sends, or None. `secret` is the
    job's echo (process.py checks its value)."""
    kind = message["type"]
    fields = SHAPES.get(kind)
    if fields is None:
        return f"a message of an unknown type {kind[:40]!r}"
    for key, value in message.items():
        if key in ("type", "secret"):
            continue
        if key not in fields or not fields[key](value):
            return f"a {kind} message whose {str(key)[:40]!r} is not what the worker sends"
    missing = [k for k in REQUIRED.get(kind, ()) if k not in message]
    if missing:
        return f"a {kind} message without {missing[0]!r}"
    return None


class Inbox:
    """One job's messages from its worker: each line paid for in a byte budget (past one
    recording's worth, OUTPUT_BYTES_PER_S: a flood waits in the pipe, blocking the program,
    not the server's CPU), refused unparsed when large and not a recording, parsed under the
    gate's budget, and held to its type's exact shape."""

    def __init__(self, max_ops: int, rate: float = OUTPUT_BYTES_PER_S):
        self.max_ops, self.rate = max_ops, rate
        self.tokens, self.last = float(MAX_MESSAGE), time.monotonic()

    def parse(self, line: bytes) -> dict:
        self._pay(len(line))
        if len(line) > MAX_SMALL_MESSAGE and not line.startswith(RECORDING_PREFIX):
            raise ProtocolError(f"a message of {len(line) / 2**20:.1f} MiB that is not a recording")
        message = parse(line, self.max_ops)
        why = shape_problem(message)
        if why is not None:
            raise ProtocolError(why)
        return message

    def _pay(self, size: int) -> None:
        now = time.monotonic()
        self.tokens = min(float(MAX_MESSAGE), self.tokens + (now - self.last) * self.rate)
        self.last = now
        if size > self.tokens:
            time.sleep((size - self.tokens) / self.rate)   # the worker's pipe fills meanwhile
            self.last = time.monotonic()
            self.tokens = 0.0
        else:
            self.tokens -= size


def read_recording(rec, source: str, max_ops: int, max_stdout: int) -> gate.Checked:
    """The worker's recording of `source` through the one reader (recording_gate.read: every
    field, edges, unrecorded tensors, text, within the bounds), and of that program;
    ProtocolError saying why not."""
    try:
        checked = gate.read(rec, "the worker's recording", max_ops, max_stdout)
    except gate.Unreadable as exc:
        raise ProtocolError(exc.reason) from None
    if checked.recording.source != source:
        raise ProtocolError("the recording is not of the program that was sent")
    return checked
