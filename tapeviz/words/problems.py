"""The problems the page states before anyone asks, in markdown: a None gradient (in full and
in short words), a gradient call that raised, the first NaN or Inf and the op that made it.
"""
from __future__ import annotations

import re

from ..recording import Recording
from . import spelling, values
from .markdown import code, literal

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


def none_words(rec: Recording, call, result, tape_name: str) -> tuple:
    """(short, full) for a source's None gradient in a call of the tape `tape_name`:
    "**`x`'s gradient is None** (line 5): the short reason", and the whole story."""
    target = code(", ".join(values.tensor_name(rec, t) for t in call.target))
    source = code(values.tensor_name(rec, result.source))
    at = values.line_words(rec, call.file, call.line) if call.line is not None else None
    where = f" ({at}, {code(tape_name)})" if at else ""
    reason = result.none_reason or "no reason recorded"
    full = (f"**The gradient of {target} with respect to {source} is None**"
            f"{where}: {literal(reason, 2_000)}")
    short = (f"**{source}'s gradient is None**{f' ({at})' if at else ''}: "
             f"{literal(none_short(reason), 400)}")
    return short, full


def failed_words(rec: Recording, call, tape_name: str, freed_after=None) -> str:
    """A gradient call that raised; `freed_after`, the call after which a non-persistent
    tape freed its recording, which the page draws instead."""
    at = f" at {values.line_words(rec, call.file, call.line)}" if call.line is not None else ""
    text = f"**{code(tape_name + '.' + call.kind)}{at} failed**: {literal(call.error, 500)}"
    if freed_after is not None:
        text += (f". The tape freed its recording after the call at "
                 f"{values.line_words(rec, freed_after.file, freed_after.line)}, drawn here.")
    return text


def alert_text(rec: Recording, alert) -> str:
    """Where a NaN or an Inf first appeared, and what made it."""
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
