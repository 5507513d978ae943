"""Tapes and their gradient calls in words: the program's names for its tapes, what a tape
recorded, a call ("gradient of loss with respect to w"), a loop's step. Plain data in,
markdown or the pickers' plain labels out.
"""
from __future__ import annotations

import re
from typing import Optional

from ..recording import BACKWARD, PYTORCH, Recording
from . import values
from .markdown import literal
from .spelling import READ_VARIABLE

EVERY_OP = "every op the program ran"
DROPPED = " (its ops were dropped by the size bound)"
_TAPE_AS = re.compile(r"GradientTape\s*\((?:[^()]|\([^()]*\))*\)\s+as\s+([A-Za-z_]\w*)")
_BACKWARD = re.compile(r"([A-Za-z_][\w.\[\]]*)\.backward\(")


def _backward_name(rec: Recording, tp) -> str:
    """A PyTorch gradient call as the program wrote it: "loss.backward()",
    "torch.autograd.grad()"; the recorder gives each its own tape (worker/autograd/)."""
    call = tp.gradients[0] if tp.gradients else None
    text = rec.files.get(call.file) if call is not None and call.file else None
    lines = (text if text is not None else rec.source).splitlines()
    line = lines[call.line - 1] if call is not None and call.line and 0 < call.line <= len(lines) else ""
    if (found := _BACKWARD.search(line)) is not None:
        return f"{found.group(1)}.backward()"
    return "torch.autograd.grad()" if "grad(" in line else f"backward {tp.id}"


def tape_names(rec: Recording) -> dict:
    """{tape id: the user's Python name for it}: `with tf.GradientTape() as outer_tape` on the
    tape's line; tapes opened on one line take its names in order, round again when a loop
    opens them anew each step. Else "tape N"."""
    if rec.framework == PYTORCH:
        return {tp.id: _backward_name(rec, tp) for tp in rec.tapes}
    lines = rec.source.splitlines()
    names, used = {}, {}
    for tp in rec.tapes:
        text = lines[tp.line - 1] if tp.line and 0 < tp.line <= len(lines) else ""
        found = _TAPE_AS.findall(text)
        k = used.get(tp.line, 0)
        used[tp.line] = k + 1
        names[tp.id] = found[k % len(found)] if found else f"tape {tp.id}"
    return names


def recorded_ops(rec: Recording, tp) -> int:
    """The ops a tape kept, its variable reads not counted: the graph draws a read as its variable."""
    return sum(1 for i in tp.ops if (op := rec.op(i)) is not None and op.type != READ_VARIABLE)


def recorded_words(tape_name: str, ops: int) -> str:
    """A tape's view in the picker: "what tape recorded (12 ops)"."""
    return f"what {tape_name} recorded ({ops} ops)"


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


def call_words(rec: Recording, call, tape_name: str, tape_id: Optional[int] = None,
               index: Optional[int] = None) -> str:
    """A gradient call in words; a loop's call leads with its step: "step 1,810 of 1,810,
    tape `tape`, line 42: gradient of loss with respect to w"."""
    target = ", ".join(values.tensor_name(rec, t) for t in call.target)
    sources = ", ".join(values.tensor_name(rec, t) for t in call.sources)
    line = f", {values.line_words(rec, call.file, call.line)}" if call.line is not None else ""
    verb = "gradient" if call.kind == "gradient" else call.kind
    step = step_number(rec, tape_id, index) if tape_id is not None else None
    torch = rec.framework == PYTORCH           # the call is the tape's name: loss.backward()
    if step is not None:
        return (f"step {step[0]:,} of {step[1]:,}, {'' if torch else 'tape '}`{tape_name}`{line}: "
                f"{verb} of {target} with respect to {sources}")
    said = tape_name if torch else f"{tape_name}.{call.kind}"
    return f"{verb} of {target} with respect to {sources} ({said}{line})"


def together_words(rec: Recording, tp, tape_name: str, call, together: list) -> str:
    """"every gradient of z: w, b, x (tape.gradient, lines 16–18)": `call` is the calls at
    indices `together` of the tape as one (their sources side by side)."""
    target = ", ".join(values.tensor_name(rec, t) for t in call.target)
    sources = ", ".join(values.tensor_name(rec, t) for t in call.sources)
    lines = sorted({tp.gradients[i].line for i in together if tp.gradients[i].line is not None})
    where = ("" if not lines else f", {values.line_words(rec, call.file, lines[0])}" if len(lines) == 1
             else f", lines {lines[0]}–{lines[-1]}")
    return f"every gradient of {target}: {sources} ({tape_name}.gradient{where})"


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


def loop_words(rec: Recording, tp) -> str:
    """"one step of a loop whose `with` ran ×400 steps: step 400 is drawn", for a tape whose
    `with` line opened several; "" for a tape opened once."""
    same = [t.id for t in rec.tapes if t.line == tp.line and t.file == tp.file]
    opened = rec.tapes_opened(tp.file, tp.line)   # with the steps that ran uninstrumented
    if opened < 2:
        return ""
    if rec.framework == PYTORCH:
        return (f"one step of a loop that ran `{tape_names(rec)[tp.id]}` ×{opened:,}: step "
                f"{same.index(tp.id) + 1:,} is drawn")
    return f"one step of a loop whose `with` ran ×{opened:,} steps: step {same.index(tp.id) + 1:,} is drawn"
