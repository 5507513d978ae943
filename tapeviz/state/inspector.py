"""What the inspector shows of a node, as plain values: its details (kind, shape, value,
producer, consumers), and the lines of source around a node's line, quoted from its own file.
"""
from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from typing import Optional

import networkx as nx

from ..draw import graph
from ..recording import Recording
from ..words.spelling import READ_VARIABLE
from ..words import values
from . import opened

VALUE_ELEMENTS = 64       # the recorder keeps full values up to about this size


@dataclass
class Details:
    """What the inspector shows for one node."""
    title: str
    kind: str
    line: Optional[int] = None
    facts: list = field(default_factory=list)        # [(label, text)]
    value: Optional[str] = None
    stats: Optional[dict] = None
    producer: Optional[str] = None
    consumers: list = field(default_factory=list)
    group: Optional[str] = None                      # layer key, for an "expand" button
    unfold: Optional[str] = None                     # a fold of repeats, for an "unfold" button
    file: Optional[str] = None                       # the user's file of `line`


def details(rec: Recording, G: nx.DiGraph, node: str, flow: Optional[dict] = None) -> Details:
    data = G.nodes[node]
    kind = data.get("kind")
    if kind == "tensor":
        d = _tensor_details(rec, data["ref"])
    elif kind == "op":
        d = _op_details(rec, rec.op(data["ref"]))
    elif kind == graph.REPEAT:
        d = _group_details(rec, data)
        d.title, d.kind, d.group, d.unfold = data["label"].splitlines()[0], f"{data.get('phase')} ops repeated", None, node
    else:
        d = _group_details(rec, data)
    d.file = data.get("file") if data.get("file") is not None else opened.file_of(rec, data)
    if data.get("none_reason"):
        d.facts.append(("gradient", "None: " + data["none_reason"]))
    if flow is not None and node in flow:
        d.facts.append(("size of its gradient", values.number_text(flow[node])))
    return d


def _tensor_details(rec: Recording, t: int) -> Details:
    info = rec.tensor(t)
    if info is None:
        return Details(title=f"tensor {t}", kind="tensor", facts=[("note", "not recorded (the bounds dropped it)")])
    producer = rec.op(info.producer) if info.producer is not None else None
    users = [op for op in rec.ops if t in op.inputs]
    if info.kind == "variable":
        # the graph folds reads into the variable: what used the variable used its reads
        reads = {o for op in rec.ops if op.type == READ_VARIABLE and t in op.inputs for o in op.outputs}
        users = [op for op in rec.ops if op.type != READ_VARIABLE and (t in op.inputs or reads & set(op.inputs))]
    d = Details(title=info.name or f"tensor {t}", kind=info.kind,
                line=info.line if info.line is not None else getattr(producer, "line", None))
    d.facts = [("kind", info.kind + (" (trainable)" if info.trainable else "")),
               ("shape", str(list(info.shape))), ("dtype", info.dtype), ("tensor id", str(t))]
    if info.value is not None:
        d.value = values.numbers_text(info.value, rows=True, dtype=info.dtype)
    elif info.shape and math.prod(n or 1 for n in info.shape) > VALUE_ELEMENTS:
        d.facts.append(("value", "too large to keep; see its statistics"))
    if info.stats is not None:
        s = info.stats
        d.stats = {"min": values.number_text(s.min), "max": values.number_text(s.max), "mean": values.number_text(s.mean),
                   "std": values.number_text(s.std), "NaN": s.nan, "Inf": s.inf}
    if producer is not None and producer.type != "VarHandleOp":
        d.producer = values.op_brief(rec, producer)
    d.consumers = [values.op_brief(rec, op) for op in users[:20]] + ([f"… {len(users) - 20} more"] if len(users) > 20 else [])
    return d


def _op_details(rec: Recording, op) -> Details:
    d = Details(title=op.function or op.type, kind=f"{op.phase} op", line=op.line)
    d.facts = [("op id", str(op.id)), ("phase", op.phase)]
    if op.traced:
        d.facts.append(("traced", f"into tf.function {op.traced}'s graph: no values"))
    if op.function:
        d.facts.append(("tf.function", f"{op.function} (runs {op.type})"))
    if op.scope:
        d.facts.append(("scope", op.scope))
    d.facts.append(("recorded by", ", ".join(f"tape {i}" for i in op.tapes) if op.tapes else "no tape"))
    if op.duration_us is not None:
        d.facts.append(("time", f"{op.duration_us:.0f} µs"))
    d.facts.append(("inputs", ", ".join(values.tensor_brief(rec, t) for t in op.inputs[:8]) or "none"))
    d.facts.append(("outputs", ", ".join(values.tensor_brief(rec, t) for t in op.outputs[:8]) or "none"))
    return d


def _group_details(rec: Recording, data: dict) -> Details:
    members = [rec.op(m) for m in data.get("members", [])]
    lines = sorted({op.line for op in members if op.line is not None})
    d = Details(title=data.get("group") or "layer", kind=f"layer ({data.get('phase')} ops)",
                line=lines[0] if lines else None, group=data.get("group"))
    counts = {}
    for op in members:
        counts[op.function or op.type] = counts.get(op.function or op.type, 0) + 1
    d.facts = [("ops", f"{len(members)}: " + ", ".join(f"{k} ×{n}" for k, n in
                                                        sorted(counts.items(), key=lambda kv: -kv[1])[:8]))]
    if len(lines) > 1:
        d.facts.append(("lines", f"{lines[0]}–{lines[-1]}"))
    return d


def code_html(source: str, line: Optional[int], context: int = 3) -> str:
    """A few lines of the program around `line`, numbered, with that line highlighted."""
    lines = source.splitlines() or [""]
    if line is None or not 1 <= line <= len(lines):
        return ""
    first, last = max(1, line - context), min(len(lines), line + context)
    rows = []
    for n in range(first, last + 1):
        text = html.escape(lines[n - 1]) or " "
        style = ("background:#FFE08A;font-weight:700;border-left:6px solid #D55E00;"
                 if n == line else "border-left:6px solid transparent;")
        rows.append(f'<div style="{style}padding:0 .5em;white-space:pre">'
                    f'<span style="color:#555;user-select:none">{n:>4}  </span>{text}</div>')
    return ('<div class="tapeviz-code" style="font-family:monospace;font-size:1.05rem;'
            'background:#F6F6F6;border-radius:6px;padding:.4em 0;overflow-x:auto;color:#111">'
            + "".join(rows) + "</div>")


def excerpt_for(rec: Recording, G: nx.DiGraph, node: str, context: int = 3) -> tuple:
    """(where, html) for a node's line: "line 15 of mylib/model.py" and that file's lines
    around it, the line highlighted, so an op in a module is quoted from the module, not
    from the program's line of the same number. ("", "") when the node has no line."""
    d = G.nodes[node]
    if d.get("line") is None:
        return "", ""
    file = d.get("file") if d.get("file") is not None else opened.file_of(rec, d)
    return (opened.where(rec, file, d["line"]),
            code_html(opened.source_of(rec, file), d["line"], context=context))


def editor_line(rec: Recording, G: nx.DiGraph, node: Optional[str]) -> Optional[int]:
    """The editor's line to mark for a node: its line when it is in the program, else None
    (a module's line 15 is not the program's line 15)."""
    if node is None or node not in G:
        return None
    d = G.nodes[node]
    file = d.get("file") if d.get("file") is not None else opened.file_of(rec, d)
    return d.get("line") if values.in_program(rec, file) else None
