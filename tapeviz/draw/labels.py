"""The words on a walked op graph: each node's label ("w = 2" over "grad -3", "Squeeze ×120,
line 82") and hover text, written after graph.py's walk made the nodes, then bounded for the
browser. No TensorFlow here.
"""
from __future__ import annotations

from collections import Counter
from typing import Optional

import networkx as nx

from ..recording import BACKWARD, FORWARD, GradientCall, Recording, as_float
from ..words import spelling
from ..words.values import (count, grad_words, line_words, norm_words, number_text, numbers_text, shape_text,
                            short_value, small, tensor_brief, tensor_name)
from .nodes import GROUP, REPEAT, UNRECORDED_OP

# How much of a value or a reason fits in a hover box.
VALUE_CHARS = 160
# Past MAX_TEXT characters of labels and hover boxes, each is cut to its share, so the
# figure sent to the browser is bounded before it is made (graph.MAX_NODES bounds the nodes).
MAX_TEXT = 16_000_000
LABEL_LINE = 18           # "name = value" longer than this takes two label lines


def label(G: nx.DiGraph, rec: Recording, call: Optional[GradientCall], alias, as_read: dict) -> None:
    """Every node's label and hover text. call: the view's gradient call (its gradients go
    on the labels); alias and as_read: the walk's (a variable's reads drawn as the variable,
    with the value the view's first read gave)."""
    said = _Speller(rec)
    for _, data in G.nodes(data=True):
        if data["kind"] == "tensor":
            _tensor_words(rec, data, as_read.get(data["ref"]) or rec.tensor(data["ref"]))
        elif data["kind"] == "op":
            op = rec.op(data["ref"])
            data["label"] = said(op)
            data["hover"] = _op_hover(rec, op, data["label"])
            if data["category"] == UNRECORDED_OP:
                data["hover"] += "\nran inside the tape's block, but the tape did not record it"
        elif data["kind"] == REPEAT:
            data["said"] = said(rec.op(data["members"][0]))
    _finish_groups(G, rec)
    _finish_folds(G, rec)
    _value_labels(G, rec, call, alias, as_read)


def _tensor_words(rec: Recording, data: dict, info) -> None:
    """A tensor's first label (its name, else its shape; _value_labels adds its value) and hover."""
    if info is None:    # the recording's bounds dropped it
        data["label"], data["hover"] = "", f"tensor {data['ref']} (not recorded)"
    else:
        producer = rec.op(info.producer) if info.producer is not None else None
        data["label"] = info.name or shape_text(info.shape)
        data["hover"] = _tensor_hover(info, data["category"], producer)
    if data.get("stacked"):
        data["hover"] += (f"\nthe newest of {data['stacked']} such tensors, one per time round "
                          f"the loop (fold off to see each)")
    if data.get("none_reason"):
        data["hover"] += "\ngradient: None, " + data["none_reason"]


def bound(G: nx.DiGraph) -> None:
    """Cut labels and hover boxes to their share of MAX_TEXT when together they are over it:
    the figure carries each node's text, so this bounds what is sent to the browser."""
    total = sum(len(d.get("label") or "") + len(d.get("hover") or "") for _, d in G.nodes(data=True))
    if total <= MAX_TEXT:
        return
    share = max(40, MAX_TEXT // max(1, len(G)))
    for _, d in G.nodes(data=True):
        for key in ("label", "hover"):
            if isinstance(d.get(key), str) and len(d[key]) > share // 2:
                d[key] = d[key][:share // 2 - 1] + "…"
    G.graph["cut_text"] = (f"Labels and hover boxes are shortened: together they held "
                           f"{total:,} characters, over the {MAX_TEXT:,} a figure may carry.")


class _Speller:
    """op -> the Python that made it (`*`, `tf.reduce_sum`), read off the op's own line in its
    own file; a tf.function's call keeps the function's name. Each file is split once."""

    def __init__(self, rec: Recording):
        self.rec, self.lines = rec, {}

    def __call__(self, op) -> str:
        if op.function:
            return op.function
        if op.phase == BACKWARD and (name := spelling.backward_name(op.type)) is not None:
            return name
        text = ""
        if op.phase == FORWARD and op.line is not None:   # backward ops: no line of the user's made them
            if op.file not in self.lines:
                self.lines[op.file] = (self.rec.files.get(op.file) or self.rec.source).splitlines()
            lines = self.lines[op.file]
            text = lines[op.line - 1] if 0 < op.line <= len(lines) else ""
        # inside a Keras layer the line is `model(x)`: only a spelling it shows is the user's
        spelled = spelling.python_name(op.type, text, guess=False)
        if spelled == op.type and not op.scope and (call := spelling.line_call(text)) is not None:
            return call     # one of the ops `tf.norm(d)` ran: the student wrote tf.norm
        return spelling.python_name(op.type, text, guess=not op.scope)


def _value_labels(G: nx.DiGraph, rec: Recording, call: Optional[GradientCall], alias,
                  as_read: dict) -> None:
    """Every tensor's label says its value, and with a call its gradient: "w = 2" over
    "grad -3" (a source's exact gradient, signed; 1 for a scalar target), else the flow's
    signed value when it kept one and it is small ("grad -2.5"), else the flow's norm said
    in words, "size of grad 3.2"."""
    exact, norms, signed = {}, {}, {}
    if call is not None:
        for r in call.results:
            exact[alias(r.source)] = rec.tensor(r.grad) if r.grad is not None else None
        for entry in call.flow:
            norms[alias(entry.tensor)] = as_float(entry.norm)
            value = getattr(entry, "value", None)
            if value is not None and (not isinstance(value, list) or count(value) <= 4):
                signed[alias(entry.tensor)] = value
    targets = {alias(t) for t in call.target} if call is not None else set()
    # A jacobian's flow is d sum(target) / d t: said so ("grad of sum(y)"); on the target
    # itself it is all ones, which read as the jacobian's value, so it is not drawn there.
    grad = "grad"
    if call is not None and call.kind != "gradient":
        grad = f"grad of sum({', '.join(tensor_name(rec, t) for t in call.target)})"
    for node, data in G.nodes(data=True):
        if data["kind"] == "tensor":
            info = as_read.get(data["ref"]) or rec.tensor(data["ref"])
            text = short_value(info) if info is not None else ""
            name = info.name if info is not None and info.name else None
            if name and text:   # "w = 2" on one line; a long name and a shape on two
                lines = [f"{name} = {text}"] if len(name) + len(text) <= LABEL_LINE else [name, text]
            elif info is not None and small(info):
                lines = [text]      # a converted Python input says its value ([[2.]]), not "1×1"
            else:
                lines = [data["label"] or text]
            t = data["ref"]
            if call is not None:
                if t in exact:
                    lines.append(grad_words(exact[t], call.kind))
                elif t in targets and call.kind != "gradient":
                    pass
                elif t in signed:
                    lines.append(f"{grad} " + numbers_text(signed[t]))
                elif t in targets and info is not None and not info.shape and t in norms:
                    # d target / d target, for a scalar target: 1 in the target's own dtype
                    lines.append("grad " + numbers_text(1.0 if _floating(info.dtype) else 1, dtype=info.dtype))
                elif t in norms:
                    lines.append(norm_words(grad, norms[t]))
            if data.get("stacked"):
                lines[:1] = _stack_words(rec, data, name, lines[0])
            if info is not None and info.stats is not None and (info.stats.nan or info.stats.inf):
                data["nonfinite"] = True   # a NaN must be unmistakable on the graph, not only in hover
                lines[0] = "⚠ " + ("NaN" if info.stats.nan else "Inf") + " " + lines[0]
            data["label"] = "\n".join(x for x in lines if x)
            data["grad_text"] = lines[-1] if call is not None and len(lines) > 1 else None
        elif data["kind"] == REPEAT and data.get("range", (None, None))[0] is not None:
            low, high = data["range"]
            data["label"] += "\n" + (number_text(low) if low == high else f"{number_text(low)} … {number_text(high)}")


def _floating(dtype: str) -> bool:
    return "float" in dtype or dtype in ("half", "double")


def _finish_folds(G: nx.DiGraph, rec: Recording) -> None:
    for node, data in G.nodes(data=True):
        if data["kind"] != REPEAT:
            continue
        n = len(data["members"])
        low, high = _value_range(rec, [t for m in data["members"] for t in rec.op(m).outputs])
        data["range"] = (low, high)
        data["label"] = f"{data['said']} ×{n}, line {data['line']}"
        lines = [f"{data['said']} ×{n}  ({data['phase']} ops repeated from {line_words(rec, data['file'], data['line'])})",
                 *spelling.hover_lines(data["op_type"], data["said"])]
        if low is not None:
            lines.append(f"values from {number_text(low)} to {number_text(high)}")
        lines.append("click it, then Unfold, to see every op")
        data["hover"] = "\n".join(lines)


def _value_range(rec: Recording, tensors: list):
    lows, highs = [], []
    for t in tensors:
        info = rec.tensor(t)
        if info is not None and info.stats is not None:
            low, high = as_float(info.stats.min), as_float(info.stats.max)
            if low is not None and high is not None:
                lows.append(low)
                highs.append(high)
    if not lows:
        return None, None
    return min(lows), max(highs)


def _finish_groups(G: nx.DiGraph, rec: Recording) -> None:
    groups = [data for _, data in G.nodes(data=True) if data["kind"] == GROUP]
    phases: dict = {}
    for data in groups:
        phases.setdefault(data["group"], set()).add(data["phase"])
    for data in groups:
        # "conv2d" alone reads best; the phase is only worth saying when both are on screen.
        data["label"] = data["group"].split("/")[-1]
        if len(phases[data["group"]]) > 1:
            data["label"] += f" ({data['phase']})"
        data["hover"] = _group_hover(rec, data)


def _tensor_hover(info, category: str, producer) -> str:
    title = info.name or f"tensor {info.id}"
    lines = [f"{title}  ({category.replace('_', ' ')})",
             f"shape {list(info.shape)}  {info.dtype}"]
    if info.value is not None:
        text = numbers_text(info.value, dtype=info.dtype)
        lines.append("value " + (text if len(text) <= VALUE_CHARS else text[:VALUE_CHARS] + "…"))
    if info.stats is not None:
        s = info.stats
        lines.append(f"min {number_text(s.min)}  max {number_text(s.max)}  mean {number_text(s.mean)}  std {number_text(s.std)}")
        if s.nan or s.inf:
            lines.append(f"⚠ {s.nan} NaN, {s.inf} Inf")
    if producer is not None:
        lines.append(f"made by {producer.function or producer.type} (op {producer.id})")
        if producer.traced:
            lines.append(f"traced into tf.function {producer.traced}: no value recorded")
    line = info.line if info.line is not None else getattr(producer, "line", None)
    if line is not None:
        lines.append(f"line {line}")
    scope = getattr(producer, "scope", None)
    if scope:
        lines.append(f"scope {scope}")
    return "\n".join(lines)


def _op_hover(rec: Recording, op, said: str) -> str:
    lines = [f"{said}  ({op.phase} op {op.id})"]
    if op.function:
        lines.append(f"tf.function, runs {op.type}")
    else:
        lines += spelling.hover_lines(op.type, said)
    if op.traced:
        lines.append(f"traced into tf.function {op.traced}'s graph (ran there, not one by one)")
    for word, ids in (("in", op.inputs), ("out", op.outputs)):
        if ids:
            lines.append(f"{word}: " + ", ".join(tensor_brief(rec, t) for t in ids[:6])
                         + (" …" if len(ids) > 6 else ""))
    if op.line is not None:
        lines.append(line_words(rec, op.file, op.line))
    if op.scope:
        lines.append(f"scope {op.scope}")
    lines.append("recorded by tape " + ", ".join(map(str, op.tapes)) if op.tapes else "recorded by no tape")
    if op.duration_us is not None:
        lines.append(f"{op.duration_us:.0f} µs")
    return "\n".join(lines)


def _group_hover(rec: Recording, data: dict) -> str:
    members = data["members"]
    types = Counter(rec.op(m).function or rec.op(m).type for m in members)
    kinds = ", ".join(f"{name} ×{n}" for name, n in types.most_common(6))
    lines = [f"{data['group']}  ({data['phase']})", f"{len(members)} ops: {kinds}" + (" …" if len(types) > 6 else "")]
    used = sorted({rec.op(m).line for m in members if rec.op(m).line is not None})
    if used:
        lines.append(f"line {used[0]}" if len(used) == 1 else f"lines {used[0]}–{used[-1]}")
    lines.append("expand the group to see its ops")
    return "\n".join(lines)


def _stack_words(rec: Recording, data: dict, name, first: str) -> list:
    """A loop's tensors drawn as the newest: a scalar per step says its values' range ("num:
    10 values" over "1 … 14", not "num ×10 = 14", which reads as a product); a bigger one
    says the count with its name ("logits ×30 = 32×10")."""
    numbers = [as_float(v) for m in data.get("stack", ())
               if (info := rec.tensor(m)) is not None for v in [info.value]
               if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if name and len(numbers) == data["stacked"] and None not in numbers:
        low, high = min(numbers), max(numbers)
        return [f"{name}: {len(numbers)} values",
                number_text(low) if low == high else f"{number_text(low)} … {number_text(high)}"]
    cut = len(name) if name and first.startswith(name) else len(first)
    return [first[:cut] + f" ×{data['stacked']}" + first[cut:]]
