"""What the debugger page says about a recording, as markdown: its error and hint, its
warnings, what the bounds dropped, the inspector's facts, the file it was opened from.
Everything in a recording came from a program (or a file), so every part of it goes
through `literal`; only the words around it are markdown. No Streamlit, no TensorFlow.
"""
from __future__ import annotations

from typing import Optional

from . import values
from ..recording import Recording
from .markdown import code, literal

MESSAGE_CHARS = 2_000     # an error message longer than this is cut: the page is no log


def error_line(rec: Recording) -> Optional[str]:
    """"**ValueError** at line 3: the message"; None when the run raised nothing."""
    err = rec.error
    if err is None:
        return None
    title = "Timeout (the run hit its time limit)" if err.type == "Timeout" else literal(err.type, 200)
    where = f" at {values.line_words(rec, err.file, int(err.line))}" if err.line else ""
    return f"**{title}**{where}: {literal(err.message, MESSAGE_CHARS)}"


def hint(rec: Recording) -> Optional[str]:
    if rec.error is None or not rec.error.hint:
        return None
    return "**Hint:** " + literal(rec.error.hint, MESSAGE_CHARS)


def warning_line(warning) -> str:
    """A warning the recorder noted: {"line", "message"}, or anything else as text."""
    if not isinstance(warning, dict):
        return literal(warning, MESSAGE_CHARS)
    line = warning.get("line")
    where = f"Line {literal(line, 20)}: " if line else ""
    return where + literal(warning.get("message", warning), MESSAGE_CHARS)


def skipped_note(skipped: dict) -> str:
    """What ran uninstrumented: the tapes `--tapes A:B` left out, or a loop's later steps."""
    label = "**--tapes:** " if "tapes" in skipped else "**Later steps:** "
    return label + literal(skipped.get("note", skipped), MESSAGE_CHARS)


def dropped_note(dropped: dict) -> str:
    return ("The recording hit its size bounds and left out: "
            + ", ".join(f"{literal(n, 20)} {literal(what, 40)}" for what, n in dropped.items()) + ".")


def opened_caption(name: str, rec: Optional[Recording]) -> str:
    """What a recording opened from a file is: its file, program and arguments."""
    said = f"Showing the recording **{literal(name, 200)}**"
    if rec is not None and rec.program:
        said += " of " + code(rec.program)
    if rec is not None and rec.argv and rec.argv[1:]:
        said += " run with " + code(" ".join(rec.argv[1:]))
    return said + "; **Run** records the editor's text afresh."


def inspector(details) -> str:
    """The inspector's heading and facts for one node (state.inspector.Details)."""
    facts = "\n".join(f"- **{literal(label, 80)}**: {literal(text, 500)}"
                      for label, text in details.facts)
    return f"### {literal(details.title, 200)}\n*{literal(details.kind, 80)}*\n\n{facts}"


def made_by(producer: str) -> str:
    return "**made by** " + literal(producer, 300)


def used_by(consumers: list) -> str:
    return "**used by** " + "; ".join(literal(c, 300) for c in consumers)

