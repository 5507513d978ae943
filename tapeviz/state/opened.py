"""A recording opened from a file (`tapeviz view RUN.json`, or "Open a recording" on the
debugger page): read and checked, with a plain message when the file is not one; and the
source of the user's file an op or tensor came from. No TensorFlow, no Streamlit.
"""
from __future__ import annotations

from typing import Optional

from .. import recording_gate as gate
from ..recording import SCHEMA, Recording
from ..words import values

VIEW_ENV = "TAPEVIZ_VIEW"      # `tapeviz view` names the recording the app opens with


def read_recording(data: bytes, name: str = "the file") -> tuple:
    """(Recording, its dict) from a file's bytes; ValueError saying why it is not one.
    Through the gate every recording the server reads passes (recording_gate): parsed under
    its budget and checked against the recorder's bounds before anything is built from it."""
    try:
        d = gate.parse(data)
    except gate.Refused as e:
        raise ValueError(f"{name} is not a tapeviz recording: it {e}. A recording is the "
                         f"JSON file that `tapeviz record -o run.json` writes, or the app's "
                         f"⬇ Recording button gives.") from None
    if not isinstance(d, dict) or d.get("schema") != SCHEMA:
        found = d.get("schema") if isinstance(d, dict) else None
        what = (f"its schema is {str(found)[:80]!r}" if found
                else "it has no \"schema\" field")
        raise ValueError(f"{name} is JSON but not a tapeviz recording: {what}, expected "
                         f"{SCHEMA!r}.")
    why = gate.problem(d)
    if why is not None:
        raise ValueError(f"{name} says it is a tapeviz recording but cannot be one: {why}.")
    try:
        rec = Recording.from_dict(d)
    except (TypeError, KeyError, AttributeError, ValueError) as e:
        raise ValueError(f"{name} says it is a tapeviz recording but cannot be read: "
                         f"{type(e).__name__}: {str(e)[:200]}") from None
    return rec, d


def file_of(rec: Recording, node_data: dict) -> Optional[str]:
    """The user's file of a graph node's line (an op's, a tensor's, a layer's first op's)."""
    kind, ref = node_data.get("kind"), node_data.get("ref")
    if kind == "op":
        op = rec.op(ref)
        return op.file if op is not None else None
    if kind == "tensor":
        tensor = rec.tensor(ref)
        if tensor is None:
            return None
        producer = rec.op(tensor.producer) if tensor.producer is not None else None
        return tensor.file or (producer.file if producer is not None else None)
    for op_id in node_data.get("members", []):
        op = rec.op(op_id)
        if op is not None and op.line is not None:
            return op.file
    return None


def source_of(rec: Recording, file: Optional[str]) -> str:
    """The text of one of the user's files; the program's own when unknown."""
    if file and file in rec.files:
        return rec.files[file]
    return rec.source


def where(rec: Recording, file: Optional[str], line: Optional[int]) -> str:
    """"line 12 of mylib/model.py", or "line 12 of the program" for the program itself."""
    words = values.line_words(rec, file, line)
    return words if " of " in words else f"{words} of the program"
