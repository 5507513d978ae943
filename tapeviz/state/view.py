"""What the debugger page shows, as plain values: pickers' choices, step order, node details,
the source excerpt around a line. No Streamlit and no TensorFlow: the page renders these.
"""
from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass, field
from typing import Optional

import networkx as nx

from ..draw import graph
from ..words import values
from ..words import spelling
from ..recording import BACKWARD, Recording, as_float
from ..words.markdown import code, literal
from . import opened

VALUE_ELEMENTS = 64       # the recorder keeps full values up to about this size


def tape_summary(rec: Recording, tape_id: int) -> str:
    """One sentence on a tape, in markdown: what it watched and recorded, and its backward
    ops if nested."""
    tp = next(t for t in rec.tapes if t.id == tape_id)
    watched = [literal(values.tensor_brief(rec, t), 200) for t in tp.watched]
    ops = [rec.op(i) for i in tp.ops if rec.op(i) is not None]
    backward = sum(op.phase == BACKWARD for op in ops)
    text = f"Tape {tp.id} recorded {len(ops)} ops"
    if backward:
        text += (f", {backward} of them backward ops of an inner gradient call (drawn as diamonds): "
                 f"that is what lets this tape differentiate a gradient")
    if watched:
        text += "; it watched " + ", ".join(watched[:8]) + (" …" if len(watched) > 8 else "")
    elif tp.watch_accessed_variables:
        text += "; it watches the variables the block reads"
    return text + "."


def call_choices(rec: Recording) -> list:
    """[(tape id, call index, label)] for every gradient call that ran."""
    return graph.gradient_calls(rec)


def node_choices(G: nx.DiGraph, limit: int = 2000, keep: Optional[str] = None) -> list:
    """[(node, label)] for a picker: named tensors first, then everything in run order.

    At most `limit` (plus `keep`): a 30,000-entry list would slow every rerun, and
    clicking the chart reaches any node anyway."""
    def key(item):
        node, data = item
        return (data.get("name") is None, data.get("order", -1), node)

    out = []
    for node, data in sorted(G.nodes(data=True), key=key):
        label = data.get("label") or node
        kind = "layer" if data.get("kind") == graph.GROUP else data.get("kind", "")
        where = f", {node_place(G, node)}" if data.get("line") is not None else ""
        if len(out) < limit or node == keep:
            out.append((node, f"{label}  ({kind} {node}{where})"))
    return out


def node_for_tensor(rec: Recording, G: nx.DiGraph, tensor_id: int) -> Optional[str]:
    """The node that shows a tensor: its own, else its producer's (op or layer group)."""
    node = graph.tensor_node(tensor_id)
    if node in G:
        return node
    info = rec.tensor(tensor_id)
    return node_for_op(G, info.producer) if info is not None and info.producer is not None else None


def node_for_op(G: nx.DiGraph, op_id: int) -> Optional[str]:
    node = graph.op_node(op_id)
    if node in G:
        return node
    for n, data in G.nodes(data=True):
        if data.get("kind") == graph.GROUP and op_id in data.get("members", ()):
            return n
    return None


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
        reads = {o for op in rec.ops if op.type == graph.READ_VARIABLE and t in op.inputs for o in op.outputs}
        users = [op for op in rec.ops if op.type != graph.READ_VARIABLE and (t in op.inputs or reads & set(op.inputs))]
    d = Details(title=info.name or f"tensor {t}", kind=info.kind,
                line=info.line if info.line is not None else getattr(producer, "line", None))
    d.facts = [("kind", info.kind + (" (trainable)" if info.trainable else "")),
               ("shape", str(list(info.shape))), ("dtype", info.dtype), ("tensor id", str(t))]
    if info.value is not None:
        d.value = value_text(info.value)
    elif info.shape and math.prod(n or 1 for n in info.shape) > VALUE_ELEMENTS:
        d.facts.append(("value", "too large to keep; see its statistics"))
    if info.stats is not None:
        s = info.stats
        d.stats = {"min": values.number_text(s.min), "max": values.number_text(s.max), "mean": values.number_text(s.mean),
                   "std": values.number_text(s.std), "NaN": s.nan, "Inf": s.inf}
    if producer is not None and producer.type != "VarHandleOp":
        d.producer = _op_word(producer, rec)
    d.consumers = [_op_word(op, rec) for op in users[:20]] + ([f"… {len(users) - 20} more"] if len(users) > 20 else [])
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


def value_text(value, digits: int = 4) -> str:
    """A small tensor's value, a row per line for matrices."""
    if isinstance(value, list) and value and all(isinstance(v, list) for v in value):
        return "[" + ",\n ".join(value_text(v, digits) for v in value) + "]"
    if isinstance(value, list):
        return "[" + ", ".join(value_text(v, digits) for v in value) + "]"
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, (int, float)) or value in ("nan", "inf", "-inf"):
        return values.number_text(value, digits)
    return repr(value)


def alert_text(rec: Recording, alert) -> str:
    info = rec.tensor(alert.tensor)
    op = rec.op(alert.op) if alert.op is not None else None
    what = "NaN" if alert.kind == "nan" else "Inf"
    where = f" at {values.line_words(rec, alert.file, alert.line)}" if alert.line is not None else ""
    maker = maker_words(op) if op is not None else ""
    made = f", made by {maker} ({literal(alert.phase, 20)} pass)" if op is not None else ""
    if info is not None and info.name:
        return f"**{what}** first appeared{where}: in {code(info.name)}{made}."
    if op is not None:
        return f"**{what}** first appeared{where}, in the {literal(alert.phase, 20)} pass, made by {maker}."
    return f"**{what}** first appeared{where}."


def maker_words(op) -> str:
    """The op that made a NaN, in the Python that made it: `*`, or "the gradient of
    `tf.sqrt`" for TensorFlow's SqrtGrad (its own name is jargon to a student)."""
    if op.function:
        return code(op.function)
    if op.type.endswith("Grad") and op.type[:-4] in spelling.PYTHON:
        return "the gradient of " + code(spelling.python_name(op.type[:-4]))
    return code(spelling.python_name(op.type))


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


def line_text(source: str, line: Optional[int]) -> str:
    lines = source.splitlines()
    return lines[line - 1].strip() if line and 0 < line <= len(lines) else ""


def _op_word(op, rec: Recording) -> str:
    where = f", {values.line_words(rec, op.file, op.line)}" if op.line is not None else ""
    return f"{op.function or op.type} (op {op.id}, {op.phase}{where})"


def kept(rec: Recording, tp) -> bool:
    """Whether a tape still has ops in the recording: a long loop's early steps lose theirs
    to the op bound, and a picture of them would be empty."""
    return any(rec.op(i) is not None for i in tp.ops)


def _openable(rec: Recording) -> list:
    """The tapes a view may open on, in program order: those that kept their ops (else all),
    and of the tapes one `with` line opened (a loop's steps) only the newest."""
    live = [tp for tp in rec.tapes if kept(rec, tp)] or list(rec.tapes)
    newest, answered = {}, set()
    for tp in live:   # a step the time limit cut before its gradient call is no lesson: the one before
        key = (tp.file, tp.line)
        ran = any(c.error is None for c in tp.gradients)
        if ran or key not in answered:
            newest[key] = tp.id
        if ran:
            answered.add(key)
    return [tp for tp in live if newest[(tp.file, tp.line)] == tp.id]


def loop_words(rec: Recording, tp) -> str:
    """"one step of a loop whose `with` ran ×400 steps: step 400 is drawn", for a tape whose
    `with` line opened several; "" for a tape opened once."""
    same = [t.id for t in rec.tapes if t.line == tp.line and t.file == tp.file]
    opened = rec.tapes_opened(tp.file, tp.line)   # with the steps that ran uninstrumented
    if opened < 2:
        return ""
    return f"one step of a loop whose `with` ran ×{opened:,} steps: step {same.index(tp.id) + 1:,} is drawn"


def default_tape(rec: Recording) -> Optional[int]:
    """The first outermost tape that kept its ops (in a loop, its newest step): what it
    recorded is the story; every op adds the machinery."""
    return next((tp.id for tp in _openable(rec) if tp.parent is None), None)


# -- what the page opens on: the views, the callouts, the legend -------------------------------

ALL_OPS = "all"
_TAPE_AS = re.compile(r"GradientTape\s*\((?:[^()]|\([^()]*\))*\)\s+as\s+([A-Za-z_]\w*)")


def tape_names(rec: Recording) -> dict:
    """{tape id: the user's Python name for it}: `with tf.GradientTape() as outer_tape` on the
    tape's line; tapes opened on one line take its names in order, round again when a loop
    opens them anew each step. Else "tape N"."""
    lines = rec.source.splitlines()
    names, used = {}, {}
    for tp in rec.tapes:
        text = lines[tp.line - 1] if tp.line and 0 < tp.line <= len(lines) else ""
        found = _TAPE_AS.findall(text)
        k = used.get(tp.line, 0)
        used[tp.line] = k + 1
        names[tp.id] = found[k % len(found)] if found else f"tape {tp.id}"
    return names


def view_choices(rec: Recording) -> list:
    """[(key, label)]: each gradient call (the lesson), then what each tape recorded, then every op."""
    names = tape_names(rec)
    out = []
    for tp in rec.tapes:
        gone = "" if kept(rec, tp) or not tp.ops else " (its ops were dropped by the size bound)"
        together = graph.calls_together(tp)
        if together:
            out.append((f"calls:{tp.id}", together_words(rec, tp, names[tp.id]) + gone))
        for i, call in enumerate(tp.gradients):
            out.append((f"call:{tp.id}:{i}", call_words(rec, call, names[tp.id], tp.id, i) + gone))
    for tp in rec.tapes:
        n = sum(1 for i in tp.ops if (op := rec.op(i)) is not None and op.type != graph.READ_VARIABLE)
        out.append((f"tape:{tp.id}", f"what {names[tp.id]} recorded ({n} ops)"))
    out.append((ALL_OPS, "every op the program ran"))
    return out


def call_words(rec: Recording, call, tape_name: str, tape_id: Optional[int] = None,
               index: Optional[int] = None) -> str:
    """A gradient call in words; a loop's call leads with its step: "step 1,810 of 1,810,
    tape `tape`, line 42: gradient of loss with respect to w"."""
    target = ", ".join(values.tensor_name(rec, t) for t in call.target)
    sources = ", ".join(values.tensor_name(rec, t) for t in call.sources)
    line = f", {values.line_words(rec, call.file, call.line)}" if call.line is not None else ""
    verb = "gradient" if call.kind == "gradient" else call.kind
    step = step_number(rec, tape_id, index) if tape_id is not None else None
    if step is not None:
        return (f"step {step[0]:,} of {step[1]:,}, tape `{tape_name}`{line}: "
                f"{verb} of {target} with respect to {sources}")
    return f"{verb} of {target} with respect to {sources} ({tape_name}.{call.kind}{line})"


def together_words(rec: Recording, tp, tape_name: str) -> str:
    """"every gradient of z: w, b, x (tape.gradient, lines 16–18)"."""
    call = graph.gradient_call(rec, tp.id, graph.ALL_CALLS)
    target = ", ".join(values.tensor_name(rec, t) for t in call.target)
    sources = ", ".join(values.tensor_name(rec, t) for t in call.sources)
    lines = sorted({tp.gradients[i].line for i in graph.calls_together(tp) if tp.gradients[i].line is not None})
    where = ("" if not lines else f", {values.line_words(rec, call.file, lines[0])}" if len(lines) == 1
             else f", lines {lines[0]}–{lines[-1]}")
    return f"every gradient of {target}: {sources} ({tape_name}.gradient{where})"


def _call_view(tp, index: int) -> str:
    """The view a call opens in: with the calls that share its target, else its own."""
    return f"calls:{tp.id}" if index in graph.calls_together(tp) else f"call:{tp.id}:{index}"


def step_number(rec: Recording, tape_id: int, index: int) -> Optional[tuple]:
    """(n, of) when the call is one step of a loop (its tape's `with` line opened more than
    one tape): its place among every gradient call the run made, from the step summaries
    that outlive the op bound."""
    tp = next((t for t in rec.tapes if t.id == tape_id), None)
    if tp is None or sum(t.line == tp.line and t.file == tp.file for t in rec.tapes) < 2 or not rec.steps:
        return None
    mine = next((s for s in rec.steps if s.tape == tape_id and s.index == index), None)
    if mine is None:
        return None
    return mine.call + 1, max(s.call for s in rec.steps) + 1


def default_view(rec: Recording) -> str:
    """Among the tapes that kept their ops (a loop's newest step): a gradient call with a None
    result; else the outermost tape's last call (higher order: the outer one); else the first
    tape; else every op."""
    live = _openable(rec)
    for tp in live:
        for i, call in enumerate(tp.gradients):
            if any(r.grad is None for r in call.results):
                return _call_view(tp, i)
    for tp in sorted(live, key=lambda t: t.parent is not None):
        ran = [i for i, c in enumerate(tp.gradients) if c.error is None]   # not a call that failed
        if ran:
            return _call_view(tp, ran[-1])
    first = default_tape(rec)
    return f"tape:{first}" if first is not None else ALL_OPS


def parse_view(key: Optional[str]):
    """(tape id or None, call index or None) of a view key."""
    parts = (key or ALL_OPS).split(":")
    if parts[0] == "calls":
        return int(parts[1]), graph.ALL_CALLS
    if parts[0] == "call":
        return int(parts[1]), int(parts[2])
    if parts[0] == "tape":
        return int(parts[1]), None
    return None, None


@dataclass
class Callout:
    """A problem the page states before anyone asks: a None gradient, a NaN or an Inf."""
    text: str                 # markdown
    view: str                 # the view key that shows it
    tensor: Optional[int]     # the tensor to mark and bring into view
    line: Optional[int]
    backward: bool = False    # it is among the backward ops: the view must draw them
    file: Optional[str] = None    # the user's file of `line`, when not the program
    full: Optional[str] = None    # the whole story (markdown), when `text` is its short form


# "Create it as a float (tf.constant(3.0)) or ...": an aside in brackets, nested once, or a
# quoted line: "at line 13 (`y = tf.constant(x.numpy()) * 2.0`)"
_ASIDE = re.compile(r" \((?:`[^`]*`|(?:[^()`]|\([^()]*\))*)\)")
_SENTENCE_END = re.compile(r"(?<=\.) (?=[A-Z`])")


def none_short(reason: str) -> str:
    """A None reason in short words, the reason and the fix: its kind (the words before its
    first colon) and its last sentence, asides in brackets dropped. "integer/non-float dtype.
    Create it as a float or tf.cast it to tf.float32 before the tape uses it." Each callout
    of a lesson with three Nones then takes two lines, and the graph stays on screen."""
    sentences = _SENTENCE_END.split(" ".join(reason.split()))
    kind, colon, _ = sentences[0].partition(": ")
    if not colon or len(sentences) < 2:
        return _ASIDE.sub("", reason)
    return _ASIDE.sub("", f"{kind.rstrip('.')}. {sentences[-1]}")


def callouts(rec: Recording) -> list:
    names = tape_names(rec)
    out = []
    for tp in rec.tapes:
        for i, call in enumerate(tp.gradients):
            for r in call.results:
                if r.grad is None:
                    target = code(", ".join(values.tensor_name(rec, t) for t in call.target))
                    source = code(values.tensor_name(rec, r.source))
                    at = values.line_words(rec, call.file, call.line) if call.line is not None else None
                    where = f" ({at}, {code(names[tp.id])})" if at else ""
                    reason = r.none_reason or "no reason recorded"
                    full = (f"**The gradient of {target} with respect to {source} is None**"
                            f"{where}: {literal(reason, 2_000)}")
                    out.append(Callout(f"**{source}'s gradient is None**{f' ({at})' if at else ''}: "
                                       f"{literal(none_short(reason), 400)}",
                                       _call_view(tp, i), r.source, call.line, file=call.file, full=full))
    for tp in rec.tapes:
        for i, call in enumerate(tp.gradients):
            if call.error is not None:
                out.append(failed_call(rec, tp, i, names[tp.id]))
    for alert in rec.alerts:
        op = rec.op(alert.op) if alert.op is not None else None
        tapes = op.tapes if op is not None else []
        view = next((f"call:{t}:0" for t in tapes for tp in rec.tapes if tp.id == t and tp.gradients),
                    f"tape:{tapes[0]}" if tapes else ALL_OPS)
        backward = op is not None and op.phase == BACKWARD and op.call is not None
        if backward:   # the gradient call that ran it: same line, same index on its tape
            view = next((f"call:{tp.id}:{op.call}" for tp in rec.tapes
                         if op.call < len(tp.gradients) and tp.gradients[op.call].line == op.line), ALL_OPS)
        out.append(Callout(alert_text(rec, alert), view, alert.tensor, alert.line, backward, file=alert.file))
    return out


def failed_call(rec: Recording, tp, index: int, tape_name: str) -> Callout:
    """A gradient call that raised, shown on the call before it that worked: for a
    non-persistent tape, the call after which the tape freed its recording."""
    call = tp.gradients[index]
    worked = [i for i in range(index) if tp.gradients[i].error is None]
    at = f" at {values.line_words(rec, call.file, call.line)}" if call.line is not None else ""
    text = f"**{code(tape_name + '.' + call.kind)}{at} failed**: {literal(call.error, 500)}"
    if worked and not tp.persistent:
        before = tp.gradients[worked[-1]]
        text += (f". The tape freed its recording after the call at "
                 f"{values.line_words(rec, before.file, before.line)}, drawn here.")
        return Callout(text, _call_view(tp, worked[-1]), (before.target or [None])[0], before.line,
                       file=before.file)
    return Callout(text, f"call:{tp.id}:{index}", None, call.line, file=call.file)


def error_called_out(rec: Recording) -> bool:
    """Whether the run's error is a gradient call's that a callout already states (a second
    gradient on a non-persistent tape): its full box would repeat it above the graph."""
    err = rec.error
    return err is not None and err.line is not None and any(
        call.error is not None and call.line == err.line and (call.file or None) == (err.file or None)
        for tp in rec.tapes for call in tp.gradients)


def legend_text(rec: Recording, view_key: str) -> str:
    """The picture's legend in words (markdown)."""
    tape, call = parse_view(view_key)
    shapes = ("Circles are tensors (orange: variables, red-orange: watched constants, grey: constants, "
              "blue: results), squares are ops, named as the Python that made them (`*`, `tf.square`; "
              "hover for TensorFlow's own name, such as Mul); arrows point from an op's inputs to its "
              "outputs; “×2” on an arrow means the tensor is used twice. A big square “* ×3000, line 6” "
              "is one line's ops repeated by a loop (click it to unfold). Hidden unless asked for: "
              "*plumbing*, the bookkeeping TensorFlow does to create and assign variables.")
    if traced := graph.traced_function(rec, tape):
        return (f"The graph tf.function `{literal(traced, 200)}` traced: each label shows a "
                f"tensor's shape (no values: its ops ran inside the compiled function) and, for "
                f"a gradient call's sources, the shape of their gradient. " + shapes)
    if call is None:
        return "Each label shows the tensor's value. " + shapes
    chosen = graph.gradient_call(rec, tape, call)
    target = literal(", ".join(values.tensor_name(rec, t) for t in chosen.target), 200)
    sources = literal(", ".join(values.tensor_name(rec, t) for t in chosen.sources), 200)
    if chosen.kind != "gradient":
        return (f"Each label shows the tensor's value; {sources} also shows its {chosen.kind}, the matrix of "
                f"∂{target}\\[i\\]/∂{sources}\\[j\\] (its numbers when they fit, else its shape; the sentence "
                f"above gives them). Between them, **grad of sum({target})** is ∂sum({target})/∂(that tensor): "
                f"what `tape.gradient` would give, one number per element. Colour is its size (dark purple "
                f"small, yellow large, log scale); grey: no gradient reaches it; red: NaN or Inf. " + shapes)
    return (f"Each label shows the tensor's value and, below it, its gradient: **grad** is ∂{target}/∂(that tensor), "
            f"exact and signed for {sources}; elsewhere **size of grad** is how big it is (its L2 norm). Colour is the size of the gradient "
            "(dark purple small, yellow large, log scale) and the rim's colour says what kind of node it is; "
            "grey: no gradient reaches it; red: NaN or Inf. " + shapes)


def no_tape_sentence(rec: Recording) -> str:
    if branched := branch_sentence(rec):     # then that is the lesson, said first
        return f"{branched} This program opened no `tf.GradientTape`: below are the ops it ran, with their values."
    if graph_style := session_sentence(rec):
        return graph_style
    ran = ("Each op ran the moment Python reached it and gave its value at once: below are the "
           "ops this program ran, with their values (it opened no `tf.GradientTape`, so no gradient).")
    return " ".join(filter(None, (ran, numpy_sentence(rec))))


_NUMPY = re.compile(r"\bnp\.(\w+)\s*\(|(\.numpy)\s*\(\s*\)")


def numpy_sentence(rec: Recording) -> str:
    """"`np.multiply` on line 12 and `.numpy()` on line 13 read tensors as NumPy arrays, with no
    TensorFlow op: their results are in the printed output.": NumPy interop runs no op, so the
    graph alone would not show it. "" when no line of the program that ran no op calls NumPy."""
    ran = {op.line for op in rec.ops if in_program(rec, op.file)}
    found = {}    # what was called: the lines
    for n, text in enumerate(rec.source.splitlines(), start=1):
        if n in ran or text.lstrip().startswith("#"):
            continue
        for m in _NUMPY.finditer(text):
            said = f"np.{m.group(1)}" if m.group(1) else ".numpy()"
            if n not in found.setdefault(said, []):
                found[said].append(n)
    if not found:
        return ""
    parts = [f"{code(said)} on {_lines_words(lines)}" for said, lines in list(found.items())[:3]]
    listed = _and_list(parts)
    return (f"{listed} read tensors as NumPy arrays, with no TensorFlow op (so nothing is drawn "
            f"for them): their results are in the printed output.")


def _and_list(parts: list) -> str:
    """"a", "a and b", "a, b and c"."""
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


_CONTROL = re.compile(r"\s*(if|elif|while|for)\b")
# TensorFlow 1's way: a graph built with placeholders, then run by a Session
_GRAPH_STYLE = re.compile(r"\bplaceholder\s*\(|\bSession\s*\(|\bsess\w*\.run\s*\(|\bas_default\s*\(")


def session_sentence(rec: Recording) -> str:
    """What a program in TensorFlow 1's style shows next to eager code: the lines from its first
    placeholder or Session to its `sess.run` only built a graph, which ran inside the Session,
    so no eager op of theirs is drawn; the eager lines ran at once and gave their values.
    "" when no line of the program builds or runs a TF1 graph."""
    lines = rec.source.splitlines()
    styled = [n for n, text in enumerate(lines, start=1) if _GRAPH_STYLE.search(text)]
    if not styled:
        return ""
    first, last = styled[0], styled[-1]
    span = f"line {first} is" if first == last else f"lines {first}–{last} are"
    said = (f"{span[0].upper()}{span[1:]} TensorFlow 1's way: `placeholder` and the ops after it "
            f"only built a graph, with no values, that ran inside the Session when `sess.run` fed "
            f"it, so none of them is drawn.")
    eager = [op for op in rec.ops if op.line and not first <= op.line <= last and in_program(rec, op.file)
             and op.type != graph.READ_VARIABLE]
    if not eager:
        return said + " This program ran no eager op."
    op = eager[-1]
    out = rec.tensor(op.outputs[0]) if op.outputs else None
    gave = f" gave {literal(values.short_value(out), 60)}" if out is not None and values.small(out) else " ran"
    return (f"{said} Eager code runs each op as Python reaches it: line {op.line}'s "
            f"{code(spelling.python_name(op.type))}{gave} at once, drawn below.")


def branch_sentence(rec: Recording) -> str:
    """What a program whose Python branches on tensors shows (FizzBuzz): "Python branched on
    tensors' values: the `for` on line 7 and the `if`/`elif` on lines 9, 11 and 13 read each
    result as soon as its op ran ...": each op runs when called, so `int(num % 3)` is a number
    Python can test. "" when no `if`, `elif`, `while` or `for` line of the program ran an op."""
    lines = rec.source.splitlines()
    found = {}     # keyword: the lines where it ran an op
    for op in rec.ops:
        if op.line and 0 < op.line <= len(lines) and in_program(rec, op.file):
            if (m := _CONTROL.match(lines[op.line - 1])) is not None:
                found.setdefault(m.group(1), set()).add(op.line)
    if not found:
        return ""
    parts = []
    for words in (("for",), ("while",), ("if", "elif")):
        at = sorted(n for w in words for n in found.get(w, ()))
        if at:
            said = "/".join(f"`{w}`" for w in words if w in found)
            parts.append(f"the {said} on {_lines_words(at)}")
    return ("Python branched on tensors' values: " + " and ".join(parts) + " read each result "
            "as soon as its op ran. That is eager mode's dynamic control flow.")


def _lines_words(lines: list) -> str:
    """"line 7", "lines 9 and 11", "lines 9, 11 and 13"."""
    if len(lines) == 1:
        return f"line {lines[0]}"
    return f"lines {', '.join(map(str, lines[:-1]))} and {lines[-1]}"


def opening(rec: Recording) -> dict:
    """The view state a fresh run opens on: the lesson's view, and the first callout's
    node picked (ringed on the graph, open in the inspector) when that view shows it."""
    opened = default_view(rec)
    first = next((c for c in callouts(rec) if c.view == opened), None)
    state = {"view": opened, "backward": False, "fold": True, "plumbing": False, "unfold": []}
    if first is not None and first.view == opened:
        state.update(backward=first.backward, focus=first.tensor)
    return state


def step_nodes(G: nx.DiGraph) -> list:
    """The drawn op nodes (ops, folds, layers) in the order they first ran: forward, then backward."""
    return [n for n, _ in sorted(((n, d) for n, d in G.nodes(data=True) if d.get("kind") != "tensor"),
                                 key=lambda item: (item[1].get("order", 0), item[0]))]


def revealed(G: nx.DiGraph, upto: str) -> set:
    """What has run by the time op node `upto` runs: earlier ops, their outputs, and the inputs."""
    last = G.nodes[upto].get("order", 0)
    return {n for n, d in G.nodes(data=True) if d.get("order", -1) <= last}


def drawn_words(ops: int, tensors: int) -> str:
    return f"{ops} op{'s' * (ops != 1)} and {tensors} tensor{'s' * (tensors != 1)} drawn"


def step_words(G: nx.DiGraph, node: str) -> str:
    """The op node a step reached, in markdown."""
    d = G.nodes[node]
    where = f", {node_place(G, node)}" if d.get("line") is not None else ""
    return literal(f"{d.get('label', node).splitlines()[0]} ({d.get('phase', 'forward')}{where})", 300)


def node_place(G: nx.DiGraph, node: str) -> str:
    """"line 15", or "line 15 of mylib/model.py" for a node whose line is in another file."""
    d = G.nodes[node]
    return values.place_words(G.graph.get("program"), d.get("file"), d.get("line"))


def in_program(rec: Recording, file: Optional[str]) -> bool:
    """Whether a line of `file` is a line of the program the editor holds (not a module of it)."""
    return not file or not rec.program or file == rec.program


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
    return d.get("line") if in_program(rec, file) else None


def sentence(rec: Recording, view_key: str) -> str:
    """One sentence (markdown) saying what the view's picture shows: which tape recorded
    what, and the gradients it gives, as numbers where they are small."""
    tape, call = parse_view(view_key)
    names = tape_names(rec)
    if tape is None:
        return " ".join(filter(None, ("Every op the program ran, with its values.", branch_sentence(rec))))
    tp = next(t for t in rec.tapes if t.id == tape)
    n = sum(1 for i in tp.ops if (op := rec.op(i)) is not None and op.type != graph.READ_VARIABLE)
    parent = f", inside {code(names[tp.parent])}" if tp.parent is not None and tp.parent in names else ""
    said = f"{code(names[tape])}{parent} recorded {n} op{'s' * (n != 1)}"
    if traced := graph.traced_function(rec, tape):
        said = (f"{code(names[tape])}{parent} was traced into tf.function {code(traced)}: its "
                f"graph holds {'this op' if n == 1 else f'these {n} ops'}, drawn with shapes and dtypes and no "
                f"values, since they ran inside the compiled function (record with --eager to "
                f"see values)")
    if loop := loop_words(rec, tp):
        said = f"{loop[0].upper()}{loop[1:]}; in it {said}"
    if call is None:
        return said + "."
    chosen = graph.gradient_call(rec, tape, call)
    if (nested := _nested_sentence(rec, tp, chosen, names)) is not None:
        return nested
    target = code(", ".join(values.tensor_name(rec, t) for t in chosen.target))
    if chosen.kind != "gradient":     # the lesson is the matrix: its entries, when they fit
        parts = []
        for r in chosen.results:
            grad = rec.tensor(r.grad) if r.grad is not None else None
            numbers = values.value_words(grad) if grad is not None else None
            words = numbers or values.grad_words(grad, chosen.kind)
            parts.append(f"with respect to {code(values.tensor_name(rec, r.source))} is {literal(words, 300)}")
        return f"{said}; the {chosen.kind} of {target} " + ", ".join(parts) + "."
    value = rec.tensor(chosen.target[0]) if len(chosen.target) == 1 else None
    if value is not None and not value.shape and values.small(value):   # a step's loss, say
        target += f" (value {literal(values.short_value(value), 40)})"
    trend = _trend_words(rec, tp, chosen)
    returned = _returned_words(rec, traced) if traced else ""
    return (f"{said}; the gradient of {target} gives {_results(rec, chosen)}"
            f"{_asked_again(rec, tp, call)}.{trend}{returned}")


def _returned_words(rec: Recording, traced: str) -> str:
    """" Called eagerly on line 10, `grad_of_square(4)` returned 8.": the traced graph has no
    values, but each call of the tf.function is one eager op whose inputs and outputs were
    recorded, and that answer is the lesson. The first two calls; "" when none kept a value."""
    parts = []
    for op in rec.ops:
        if op.function != traced or op.traced is not None or not op.outputs or len(parts) == 2:
            continue
        args = [rec.tensor(i) for i in op.inputs]
        outs = [rec.tensor(o) for o in op.outputs]
        if any(t is None or not values.small(t) for t in args + outs):
            continue
        call = f"{traced}({', '.join(values.short_value(t) for t in args)})"
        gave = ", ".join(values.short_value(t) for t in outs)
        at = f"on {values.line_words(rec, op.file, op.line)}, " if op.line is not None else ""
        parts.append(f"{at}{code(call)} returned {literal(gave, 60)}")
    return f" Called eagerly {' and '.join(parts)}." if parts else ""


def _trend_words(rec: Recording, tp, chosen) -> str:
    """" Over the 5 steps recorded, `l` fell from 41.7 to 12.21.": a training loop's lesson is
    its loss going down, and its chart sits far below the fold; "" for a tape opened once
    or a target that is not a scalar."""
    if not loop_words(rec, tp) or len(chosen.target) != 1:
        return ""
    site = (chosen.file, chosen.line)
    losses = [as_float(s.target) for s in rec.steps
              if (s.file, s.line) == site and s.scalar and s.error is None and s.kind == "gradient"]
    if len(losses) < 2:
        return ""
    first, last = losses[0], losses[-1]
    went = "fell" if last < first else "rose" if last > first else "stayed"
    name = code(values.tensor_name(rec, chosen.target[0]))
    moved = (f"at {values.number_text(first)}" if went == "stayed"
             else f"from {values.number_text(first)} to {values.number_text(last)}")
    return f" Over the {len(losses):,} steps recorded, {name} {went} {literal(moved, 80)}."


def _results(rec: Recording, chosen) -> str:
    """"`w`: grad 3, `x`: grad None"; for many big gradients (a model's variables) only the
    range of their sizes, "all 6 sources a gradient, from size 0.09 (`dense/kernel`) to size
    0.29 (`conv2d_1/kernel`)": six norms in a row are a wall of numbers, each is on its node."""
    grads = [(r.source, rec.tensor(r.grad) if r.grad is not None else None) for r in chosen.results]
    sizes = [(values.grad_size(g), s) for s, g in grads if g is not None and not values.small(g)]
    if len(grads) > 3 and len(sizes) == len(grads) and all(size is not None for size, _ in sizes):
        (low, at_low), (high, at_high) = min(sizes), max(sizes)
        return (f"all {len(grads)} sources a gradient, from size {values.number_text(low)} "
                f"({code(values.tensor_name(rec, at_low))}) to size {values.number_text(high)} "
                f"({code(values.tensor_name(rec, at_high))})")
    parts = []
    for r in chosen.results:
        grad = rec.tensor(r.grad) if r.grad is not None else None
        words = values.grad_words(grad) if r.grad is None or grad is not None else "grad ?"
        if grad is not None and grad.value is None and grad.stats is None and not grad.shape:
            # traced into a tf.function: a scalar has no shape to say either, and "grad" alone
            # reads as a word cut off
            words = "grad (a scalar, computed inside the graph)"
        parts.append(f"{code(values.tensor_name(rec, r.source))}: {literal(words, 80)}")
    return ", ".join(parts)


def _asked_again(rec: Recording, tp, call) -> str:
    """A persistent tape's other gradient calls, which the picture of this one leaves out:
    "; the same tape gives `x`: grad 108 (of `z`, line 10)" (the lesson of a persistent tape
    is that both answers exist). Each answer first, its target and line after it: three
    Nones said as "the same tape at line 16: the gradient of `b` gives `u`: grad None" each
    took three lines of a 1280 px screen."""
    drawn = set(graph.calls_together(tp)) if call == graph.ALL_CALLS else {call}
    others = [c for i, c in enumerate(tp.gradients)
              if i not in drawn and c.error is None and c.kind == "gradient"][:3]
    if not others:
        return ""
    parts = []
    for c in others:
        at = f", {values.line_words(rec, c.file, c.line)}" if c.line is not None else ""
        target = code(", ".join(values.tensor_name(rec, t) for t in c.target))
        parts.append(f"{_results(rec, c)} (of {target}{at})")
    listed = _and_list(parts)
    return "; the same tape gives " + listed


# -- an expression as the recording saw it: y = x·x·x ------------------------------------------

# op type: (how its two inputs join, precedence); a higher precedence binds tighter
_INFIX = {"Mul": ("·", 2), "AddV2": (" + ", 1), "Add": (" + ", 1), "Sub": (" - ", 1),
          "RealDiv": ("/", 2), "Div": ("/", 2), "Pow": ("^", 3), "MatMul": (" @ ", 2)}
_EXPRESSION_OPS = 6        # past this many ops, an expression is no sentence's business


def expression(rec: Recording, t: int) -> Optional[str]:
    """The tensor's value as the ops that made it, in names and numbers: "x·x·x" for
    y = x * x * x. None when it needs more than a few ops or an op with no short form."""
    budget = [_EXPRESSION_OPS]
    text, _ = _expr(rec, t, budget, root=True)
    return text


def _expr(rec: Recording, t: int, budget: list, root: bool = False):
    info = rec.tensor(t)
    if info is None:
        return None, 9
    op = rec.op(info.producer) if info.producer is not None else None
    if op is not None and op.type == graph.READ_VARIABLE and op.inputs:
        return _expr(rec, op.inputs[0], budget)
    if info.name and not root:
        return info.name, 9
    if op is None:
        return (values.short_value(info) if values.small(info) else info.name), 9
    budget[0] -= 1
    if budget[0] < 0:
        return None, 9
    parts = [_expr(rec, i, budget) for i in op.inputs]
    if any(text is None for text, _ in parts):
        return None, 9
    if op.type in _INFIX and len(parts) == 2:
        joint, rank = _INFIX[op.type]
        (a, ra), (b, rb) = parts
        a = a if ra >= rank else f"({a})"
        b = b if rb > rank or rb == rank and op.type in ("Mul", "AddV2", "Add") else f"({b})"
        return a + joint + b, rank
    if op.type == "Square" and len(parts) == 1:
        return (parts[0][0] if parts[0][1] >= 3 else f"({parts[0][0]})") + "²", 3
    if op.type == "Neg" and len(parts) == 1:
        return "-" + (parts[0][0] if parts[0][1] >= 2 else f"({parts[0][0]})"), 2
    name = spelling.python_name(op.type)
    if name == op.type or not name.startswith("tf."):
        return None, 9
    return f"{name}({', '.join(text for text, _ in parts)})", 9


def _nested_sentence(rec: Recording, tp, chosen, names: dict) -> Optional[str]:
    """For an outer tape differentiating an inner tape's gradient: "the inner tape recorded
    y = x·x·x; the outer tape recorded the inner gradient's ops, so d²y/dx² = 6 at x = 1"."""
    if len(chosen.target) != 1 or len(chosen.results) != 1:
        return None
    for inner in rec.tapes:
        if inner.parent != tp.id:
            continue
        for call in inner.gradients:
            if len(call.target) != 1 or len(call.sources) != 1:
                continue
            if not any(r.grad == chosen.target[0] for r in call.results):
                continue
            y, x1 = call.target[0], call.sources[0]
            x2 = chosen.results[0].source
            body = expression(rec, y)
            said_y = values.tensor_name(rec, y)
            made = f"{said_y} = {body}" if body else said_y
            n1, n2 = values.tensor_name(rec, x1), values.tensor_name(rec, x2)
            d = f"d²{said_y}/d{n1}²" if x1 == x2 else f"d²{said_y}/d{n1}d{n2}"
            grad = chosen.results[0].grad
            value = rec.tensor(grad) if grad is not None else None
            result = (f"{d} = {values.short_value(value)}" if value is not None
                      else f"{d} is None" if grad is None else d)
            first = rec.tensor(chosen.target[0])
            if first is not None and values.small(first):   # the guide's lesson is both: 3 and 6
                result = f"d{said_y}/d{n1} = {values.short_value(first)} and {result}"
            at = [rec.tensor(x) for x in dict.fromkeys((x1, x2))]
            where = ", ".join(f"{values.tensor_name(rec, i.id)} = {values.short_value(i)}"
                              for i in at if i is not None and values.small(i))
            return (f"The inner tape {code(names[inner.id])} recorded {literal(made, 200)}; the outer tape "
                    f"{code(names[tp.id])} recorded the inner gradient's ops, so "
                    f"{literal(result + (' at ' + where if where else ''), 300)}.")
    return None
