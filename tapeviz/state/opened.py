"""A recording opened from a file (`tapeviz view RUN.json`, or "Open a recording" on the
debugger page, both read through recording_gate.read): the variable that names it, and the
source of the user's file an op or tensor came from. No TensorFlow, no Streamlit.
"""
from __future__ import annotations

from typing import Optional

from ..recording import Recording
from ..words import values

VIEW_ENV = "TAPEVIZ_VIEW"      # `tapeviz view` names the recording the app opens with


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
