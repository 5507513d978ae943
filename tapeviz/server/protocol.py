"""What the server accepts from a worker, checked as if the worker were hostile (user code
shares its process and can write to the message channel): JSON lines under a hard size, parsed
under a budget of objects and numbers, and recordings re-checked against every bound before
the page builds anything from them. No TensorFlow, no Streamlit.
"""
from __future__ import annotations

import json
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


def check_recording(rec, source: str, max_ops: int, max_stdout: int) -> Optional[str]:
    """Why `rec` cannot be what the recorder sent for `source` within the bounds, or None:
    the gate's check (every field, edges, unrecorded tensors, text), then its source."""
    why = gate.problem(rec, max_ops, max_stdout)
    if why is not None:
        return why
    if rec.get("source") != source:
        return "the recording is not of the program that was sent"
    return None
