"""What a program shows of eager mode beside its tapes, in markdown: Python branching on
tensors' values, NumPy reading them, TensorFlow 1's graph-and-Session style; and the
sentence of a program that opened no tape.
"""
from __future__ import annotations

import re

from ..recording import Recording
from . import spelling, values
from .markdown import code, literal

_NUMPY = re.compile(r"\bnp\.(\w+)\s*\(|(\.numpy)\s*\(\s*\)")
_CONTROL = re.compile(r"\s*(if|elif|while|for)\b")
# TensorFlow 1's way: a graph built with placeholders, then run by a Session
_GRAPH_STYLE = re.compile(r"\bplaceholder\s*\(|\bSession\s*\(|\bsess\w*\.run\s*\(|\bas_default\s*\(")


def every_op_sentence(rec: Recording) -> str:
    """The sentence over the view of every op the program ran."""
    return " ".join(filter(None, ("Every op the program ran, with its values.", branch_sentence(rec))))


def no_tape_sentence(rec: Recording) -> str:
    if branched := branch_sentence(rec):     # then that is the lesson, said first
        return f"{branched} This program opened no `tf.GradientTape`: below are the ops it ran, with their values."
    if graph_style := session_sentence(rec):
        return graph_style
    ran = ("Each op ran the moment Python reached it and gave its value at once: below are the "
           "ops this program ran, with their values (it opened no `tf.GradientTape`, so no gradient).")
    return " ".join(filter(None, (ran, numpy_sentence(rec))))


def numpy_sentence(rec: Recording) -> str:
    """"`np.multiply` on line 12 and `.numpy()` on line 13 read tensors as NumPy arrays, with no
    TensorFlow op: their results are in the printed output.": NumPy interop runs no op, so the
    graph alone would not show it. "" when no line of the program that ran no op calls NumPy."""
    ran = {op.line for op in rec.ops if values.in_program(rec, op.file)}
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
    parts = [f"{code(said)} on {values.lines_words(lines)}" for said, lines in list(found.items())[:3]]
    return (f"{values.and_list(parts)} read tensors as NumPy arrays, with no TensorFlow op (so nothing "
            f"is drawn for them): their results are in the printed output.")


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
    eager = [op for op in rec.ops if op.line and not first <= op.line <= last
             and values.in_program(rec, op.file) and op.type != spelling.READ_VARIABLE]
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
        if op.line and 0 < op.line <= len(lines) and values.in_program(rec, op.file):
            if (m := _CONTROL.match(lines[op.line - 1])) is not None:
                found.setdefault(m.group(1), set()).add(op.line)
    if not found:
        return ""
    parts = []
    for words in (("for",), ("while",), ("if", "elif")):
        at = sorted(n for w in words for n in found.get(w, ()))
        if at:
            said = "/".join(f"`{w}`" for w in words if w in found)
            parts.append(f"the {said} on {values.lines_words(at)}")
    return ("Python branched on tensors' values: " + " and ".join(parts) + " read each result "
            "as soon as its op ran. That is eager mode's dynamic control flow.")
