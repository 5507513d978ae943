"""The one reader of recordings from outside, and its gate: `read` turns a worker's answer,
an upload, `tapeviz view`'s file or a notebook's dict into a checked Recording. A budgeted JSON parse (it stops at the bound, not after a forged file is all
in memory), then a check of the whole structure (every field's type, string lengths, total
edges, references to tensors that were not recorded) against what the recorder could have
written within its bounds. Anything else is refused with a plain sentence. A recording that
passes costs the page an amount bounded by `max_ops`. No TensorFlow, no Streamlit.
"""
from __future__ import annotations

import json
from typing import NamedTuple, Optional

from .metrics import HIST_BINS
from .recording import (FRAMEWORKS, MAX_STEP_HIST, MAX_STEP_NORMS, MAX_STEP_SOURCES, MAX_STEPS,
                        SCHEMA, TENSORFLOW, Recording)

MAX_OPS = 20_000             # the recorder's op bound (Limits.max_ops, recorder.DEFAULT_MAX_OPS)
MAX_VALUE_ELEMENTS = 4096    # numbers in one tensor's `value` (the recorder keeps small ones)
MAX_VALUE_DEPTH = 32         # a tensor's rank, as nested lists
MAX_WARNINGS = 1000
MAX_ALERTS = 1000
MAX_NAME = 1_000             # a type, name, dtype, scope, file, preview: one line of text
MAX_TEXT = 100_000           # an error message, a hint, a warning's message
MAX_SOURCE = 4 * 2**20       # one user file's source, and all of them together
MAX_FILES = 1_000
# Ids in ops' inputs and outputs referring to no recorded tensor: the recorder keeps every
# tensor an op it kept touched, but an op's bookkeeping inputs (resource handles) are not
# described; a few per op at most.
MAX_UNRECORDED_PER_OP = 4


class Refused(ValueError):
    """The data cannot be a recording within the bounds. str() says why plainly, as what
    the data does ("holds more ops than the bound") or, from the check, a whole sentence."""


def bounds(max_ops: int = MAX_OPS) -> dict:
    """What an honest recording holds at most, from the op bound it was recorded with: the
    recorder keeps `max_ops` ops, each with a few inputs and outputs, and 1/20 as many tapes.
    `text` is the characters of names, types, scopes, files and previews together, which the
    graph puts in labels and hover boxes."""
    return {"ops": max_ops, "tensors": 4 * max_ops + 10_000, "tapes": max(16, max_ops // 20),
            "edges": 16 * max_ops + 20_000, "unrecorded": MAX_UNRECORDED_PER_OP * max_ops + 1_000,
            "text": 400 * max_ops + 1_000_000}


class Budget:
    """Objects and numbers a parse may make, and ops and tensors counted as they are parsed."""

    def __init__(self, max_ops: int):
        b = bounds(max_ops)
        # A tensor is a few objects (itself, its stats, a flow entry, a gradient result) and
        # at most a small value's numbers plus its stats, shape and ids.
        # Each gradient call's summary (Recording.steps) is one object and a dozen numbers
        # besides its sources' norms and histogram counts, bounded apart from the ops.
        self.objects = b["ops"] * 2 + b["tensors"] * 4 + 10_000 + MAX_STEPS + MAX_STEP_SOURCES
        self.numbers = (b["ops"] * 16 + b["tensors"] * 80 + b["edges"] + 100_000
                        + MAX_STEPS * 16 + MAX_STEP_NORMS * 2 + MAX_STEP_HIST)
        self.ops, self.tensors = b["ops"], b["tensors"]

    def obj(self, pairs):
        self.objects -= 1
        if self.objects < 0:
            raise Refused("holds more objects than any recording within the bounds")
        d = dict(pairs)
        # Ops and tensors are counted as they are parsed: a forged recording stops at the
        # bound, not after all of it is in memory.
        if "phase" in d and "tapes" in d:
            self.ops -= 1
            if self.ops < 0:
                raise Refused("holds more ops than the bound")
        elif "producer" in d and "kind" in d:
            self.tensors -= 1
            if self.tensors < 0:
                raise Refused("holds more tensors than the bound")
        return d

    def number(self, text, kind):
        self.numbers -= 1
        if self.numbers < 0:
            raise Refused("holds more numbers than any recording within the bounds")
        return kind(text)


def _count_containers(data, budget: Budget) -> None:
    """Lists and strings counted before parsing (by their opening characters, at C speed):
    the parser has no hook for them, and `[],` or `"ab",` costs 20 times its bytes in memory.
    A recording holds ~7 lists per op and ~9 strings per object, mostly keys (shared)."""
    bracket, quote = ("[", '"') if isinstance(data, str) else (b"[", b'"')
    lists = data.count(bracket)
    if lists > min(len(data) // 8 + 100_000, budget.objects + budget.numbers // 2):
        raise Refused(f"holds {lists:,} lists, more than any recording of its size")
    strings = data.count(quote) // 2
    if strings > 12 * budget.objects:
        raise Refused(f"holds {strings:,} strings, more than any recording within the bounds")


def parse(data, max_ops: int = MAX_OPS):
    """JSON text (bytes or str) parsed under the budget; Refused when it is not JSON, nests
    deeper than Python's parser goes, or holds more than a recording within the bounds."""
    budget = Budget(max_ops)
    _count_containers(data, budget)
    try:
        return json.loads(data, object_pairs_hook=budget.obj,
                          parse_float=lambda t: budget.number(t, float),
                          parse_int=lambda t: budget.number(t, int))
    except Refused:
        raise
    except RecursionError:
        raise Refused("is nested deeper than any recording (a recording is a few levels "
                      "deep)") from None
    except UnicodeDecodeError:
        raise Refused("is not text") from None
    except ValueError as exc:
        raise Refused(f"is not valid JSON ({str(exc)[:200]})") from None


# -- the reader ---------------------------------------------------------------------------

A_RECORDING = ("A recording is the JSON file that `tapeviz record -o run.json` writes, or the "
               "app's ⬇ Recording button gives.")


class Unreadable(ValueError):
    """The data is not a recording the page may draw. str() is the whole sentence, naming
    the data; `reason` is why alone (the worker channel says it in its own words)."""

    def __init__(self, sentence: str, reason: str):
        super().__init__(sentence)
        self.reason = reason


class Checked(NamedTuple):
    """A recording read through the gate: the Recording to draw, and the checked dict it was
    built from (what ⬇ Recording gives back and `tapeviz record` writes)."""
    recording: Recording
    data: dict


def read(data, name: str = "the file", max_ops: int = MAX_OPS,
         max_stdout: Optional[int] = None) -> Checked:
    """Untrusted JSON (bytes or text) or a dict as a checked Recording; Unreadable, a plain
    sentence about `name`, when it is not one. Text is parsed under the budget, then the
    whole structure is checked against the recorder's bounds (`problem`, with `max_ops` and
    `max_stdout`) before anything is built from it."""
    if isinstance(data, (bytes, bytearray, str)):
        try:
            data = parse(data, max_ops)
        except Refused as e:
            raise Unreadable(f"{name} is not a tapeviz recording: it {e}. {A_RECORDING}",
                             f"it {e}") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        found = data.get("schema") if isinstance(data, dict) else None
        what = f"its schema is {str(found)[:80]!r}" if found else "it has no \"schema\" field"
        raise Unreadable(f"{name} is JSON but not a tapeviz recording: {what}, expected "
                         f"{SCHEMA!r}.", f"{what}, expected {SCHEMA!r}")
    why = problem(data, max_ops, max_stdout)
    if why is not None:
        raise Unreadable(f"{name} says it is a tapeviz recording but cannot be one: {why}.", why)
    try:
        return Checked(Recording.from_dict(data), data)
    except (TypeError, KeyError, AttributeError, ValueError) as e:
        why = f"{type(e).__name__}: {str(e)[:200]}"
        raise Unreadable(f"{name} says it is a tapeviz recording but cannot be read: {why}",
                         why) from None


# -- the check ----------------------------------------------------------------------------

def _int(x) -> bool:
    return type(x) is int


def _opt_int(x) -> bool:
    return x is None or type(x) is int


def _number(x) -> bool:
    # the writer encodes non-finite floats as strings (recording.encode_float)
    return type(x) in (int, float) or x in ("nan", "inf", "-inf")


def _opt_number(x) -> bool:
    return x is None or _number(x)


def _bool(x) -> bool:
    return x is None or type(x) is bool


def _ids(x) -> bool:
    return type(x) is list and all(type(i) is int for i in x)


def _name(x) -> bool:
    return type(x) is str and len(x) <= MAX_NAME


def _opt_name(x) -> bool:
    return x is None or _name(x)


def _opt_text(x) -> bool:
    # any length: an exception's message is the program's to choose; problem() cuts it
    return x is None or type(x) is str


def _scalar(x) -> bool:
    """A field a newer writer added: kept only if it is small and flat."""
    return x is None or type(x) in (bool, int, float) or _name(x)


def _shape(x) -> bool:
    return x is None or (type(x) is list and len(x) <= MAX_VALUE_DEPTH
                         and all(_opt_int(d) for d in x))


def _stats(x) -> bool:
    return x is None or (type(x) is dict and all(
        (_opt_number(v) if k in ("min", "max", "mean", "std") else _opt_int(v) if k in ("nan", "inf")
         else _scalar(v)) for k, v in x.items()))


def _value(x) -> bool:
    """A small tensor's value: nested lists, at most MAX_VALUE_ELEMENTS leaves, no deeper
    than a tensor's rank goes. Walked with a stack: a forged value cannot exhaust recursion."""
    stack, leaves = [(x, 0)], 0
    while stack:
        item, depth = stack.pop()
        if type(item) is list:
            if depth >= MAX_VALUE_DEPTH:
                return False
            stack.extend((v, depth + 1) for v in item)
            leaves += not item
        elif item is None or type(item) in (bool, int, float) or _name(item):
            leaves += 1
        else:
            return False
        if leaves > MAX_VALUE_ELEMENTS or len(stack) > MAX_VALUE_ELEMENTS:
            return False
    return True


def _list_of(check):
    return lambda x: type(x) is list and all(check(v) for v in x)


def _spans(x) -> bool:
    return type(x) is list and all(_ids(s) and len(s) <= 2 for s in x)


def _reset(x) -> bool:
    return _object(x, {"line": _opt_int, "op": _opt_int, "ops": _ids, "watched": _ids})


def _object(x, fields: dict) -> bool:
    """`x` is a dict whose known fields pass their checks and whose others are small."""
    return type(x) is dict and all(fields.get(k, _scalar)(v) for k, v in x.items())


def well_formed(x, fields: dict) -> bool:
    """`x` is one of a recording's items as `fields` (STEP, STEP_SOURCE, ...) checks it:
    for the channel's streamed step summaries (server/protocol.py)."""
    return _object(x, fields)


LINE_FIELDS = {"line": _opt_int, "file": _opt_name}
OP = {"id": _int, "type": _name, "inputs": _ids, "outputs": _ids, "scope": _opt_name,
      "tapes": _ids, "phase": _name, "duration_us": _opt_number, "function": _opt_name,
      "call": _opt_int, "traced": _opt_name, **LINE_FIELDS}
TENSOR = {"id": _int, "name": _opt_name, "shape": _shape, "dtype": _name, "kind": _name,
          "value": _value, "stats": _stats, "producer": _opt_int, "trainable": _bool,
          "preview": _opt_name, "warning": _opt_text, **LINE_FIELDS}
RESULT = {"source": _int, "grad": _opt_int, "none_reason": _opt_text}
FLOW = {"tensor": _int, "norm": _opt_number, "value": _value}
CALL = {"kind": _name, "target": _ids, "sources": _ids,
        "results": _list_of(lambda r: _object(r, RESULT)),
        "flow": _list_of(lambda f: _object(f, FLOW)),
        "error": _opt_text, "warning": _opt_text, "note": _opt_text, **LINE_FIELDS}
TAPE = {"id": _int, "persistent": _bool, "watch_accessed_variables": _bool,
        "parent": _opt_int, "watched": _ids, "ops": _ids,
        "gradients": _list_of(lambda c: _object(c, CALL)), "end_line": _opt_int,
        "recording_spans": _spans, "index": _opt_int, "resets": _list_of(_reset),
        "function": _opt_name, **LINE_FIELDS}
STEP = {"call": _int, "tape": _int, "index": _int, "kind": _name, "target": _scalar,
        "scalar": _bool, "sources": _ids, "norms": _list_of(_opt_number),
        "none": _list_of(lambda x: type(x) is list and len(x) <= 2 and all(map(_scalar, x))),
        "nan": _ids, "inf": _ids, "error": _opt_text,
        "hist": _list_of(lambda h: h is None or (type(h) is list and len(h) == HIST_BINS
                                                  and all(type(n) is int for n in h))),
        **LINE_FIELDS}
STEP_SOURCE = {"tensor": _int, "name": _opt_name, "variable": _opt_name, "layer": _opt_name}
ALERT = {"kind": _name, "op": _opt_int, "tensor": _int, "phase": _name, **LINE_FIELDS}
FRAME = {"function": _opt_name, **LINE_FIELDS}
ERROR = {"type": _name, "message": _opt_text, "hint": _opt_text,
         # None when the error has no frames in the user's files (a syntax error, a timeout)
         "stack": lambda x: x is None or (type(x) is list and len(x) <= 1000
                                          and all(_object(f, FRAME) for f in x)),
         **LINE_FIELDS}
WARNING = {"message": _opt_text, **LINE_FIELDS}
# The text the graph draws, counted against bounds()["text"].
DRAWN_TEXT = ("type", "scope", "function", "file", "name", "dtype", "preview")


def problem(rec, max_ops: int = MAX_OPS, max_stdout: Optional[int] = None) -> Optional[str]:
    """Why `rec` (a parsed recording) cannot be one the recorder wrote within the bounds,
    as a plain sentence, or None; then free text over MAX_TEXT (an exception's message) is
    cut in place. `max_stdout`: the printed-output bound it ran with (None: an opened file,
    bounded by the parse alone)."""
    if type(rec) is not dict or rec.get("schema") != SCHEMA:
        return "the recording is not a tapeviz recording"
    b = bounds(max_ops)
    for key, fields in (("ops", OP), ("tensors", TENSOR), ("tapes", TAPE)):
        items = rec.get(key, [])
        if type(items) is not list:
            return f"the recording's {key} are not a list"
        if len(items) > b[key]:
            return f"the recording has {len(items):,} {key}, over the bound of {b[key]:,}"
        for item in items:
            if not _object(item, fields):
                return f"the recording's {key} are not all well-formed ({_first_bad(item, fields)})"
    for key, most, fields in (("warnings", MAX_WARNINGS, WARNING), ("alerts", MAX_ALERTS, ALERT),
                              ("steps", MAX_STEPS, STEP), ("step_sources", MAX_STEP_SOURCES, STEP_SOURCE)):
        items = rec.get(key, [])
        if type(items) is not list or len(items) > most:
            return f"the recording's {key} are not a list of at most {most:,}"
        if not all(_object(item, fields) for item in items):
            return f"the recording's {key} are not all well-formed"
    if rec.get("error") is not None and not _object(rec["error"], ERROR):
        return "the recording's error is not well-formed"
    for key in ("stdout", "stderr"):
        text = rec.get(key) or ""
        # the recorder keeps `max_stdout` characters and adds a one-line marker where it cut
        most = MAX_TEXT * 10 if max_stdout is None else max_stdout + 200
        if type(text) is not str or len(text) > most:
            return f"the recording's {key} is not text of at most {most:,} characters"
    why = _problem_files(rec)
    if why is not None:
        return why
    for key in ("dropped", "skipped", "cut_short"):
        d = rec.get(key) or {}
        if type(d) is not dict or len(d) > 100 or not all(_name(k) and _scalar(v) for k, v in d.items()):
            return f"the recording's {key} is not a small table"
    argv = rec.get("argv")
    if argv is not None and not (type(argv) is list and len(argv) <= 1000 and all(type(a) is str and len(a) <= MAX_TEXT for a in argv)):
        return "the recording's argv is not a short list of arguments"
    if type(rec.get("running", False)) is not bool:
        return "the recording's running is not true or false"
    if rec.get("framework", TENSORFLOW) not in FRAMEWORKS:
        return "the recording's framework is not one tapeviz knows (" + ", ".join(FRAMEWORKS) + ")"
    for key in ("duration_s", "program"):
        if not _scalar(rec.get(key)):
            return f"the recording's {key} is not well-formed"
    why = _problem_graph(rec, b)
    if why is None:
        _cut_free_text(rec)
    return why


def _cut(d: dict, key: str) -> None:
    text = d.get(key)
    if type(text) is str and len(text) > MAX_TEXT:
        d[key] = text[:MAX_TEXT] + f"… ({len(text) - MAX_TEXT:,} characters more not kept)"


def _cut_free_text(rec: dict) -> None:
    """Messages a program chose (an exception's, a failed gradient's) cut to MAX_TEXT: an
    honest recording may carry a huge one, and the page shows it whole."""
    if rec.get("error"):
        _cut(rec["error"], "message")
        _cut(rec["error"], "hint")
    for item in rec.get("warnings", []):
        _cut(item, "message")
    for tensor in rec.get("tensors", []):
        _cut(tensor, "warning")
    for tape in rec.get("tapes", []):
        for call in tape.get("gradients", []):
            for key in ("error", "warning", "note"):
                _cut(call, key)
            for result in call.get("results", []):
                _cut(result, "none_reason")


def _problem_files(rec) -> Optional[str]:
    files = rec.get("files") or {}
    if type(files) is not dict or len(files) > MAX_FILES:
        return f"the recording's files are not a table of at most {MAX_FILES:,}"
    total = 0
    for name, text in [("the program", rec.get("source", "")), *files.items()]:
        if not (_name(name) and type(text) is str):
            return "the recording's files are not all file names and their text"
        total += len(text)
        if total > MAX_SOURCE:
            return f"the recording's source files are over {MAX_SOURCE // 2**20} MiB of text"
    return None


def _problem_graph(rec, b: dict) -> Optional[str]:
    """What drawing it would cost: edges, ids no tensor has, and the text of labels."""
    recorded = {t["id"] for t in rec.get("tensors", [])}
    edges = unrecorded = text = 0
    for op in rec.get("ops", []):
        for key in ("inputs", "outputs"):
            ids = op.get(key, [])
            edges += len(ids)
            unrecorded += sum(1 for i in ids if i not in recorded)
    if edges > b["edges"]:
        return (f"the recording's ops have {edges:,} inputs and outputs together, over the bound of "
                f"{b['edges']:,}")
    if unrecorded > b["unrecorded"]:
        return (f"the recording's ops refer {unrecorded:,} times to tensors it did not record, over the "
                f"bound of {b['unrecorded']:,}")
    for key in ("ops", "tensors"):
        for item in rec.get(key, []):
            text += sum(len(item[k]) for k in DRAWN_TEXT if type(item.get(k)) is str)
    if text > b["text"]:
        return (f"the recording's names, types and scopes hold {text:,} characters together, over the "
                f"bound of {b['text']:,}")
    return None


def _first_bad(item, fields: dict) -> str:
    """Which field failed, for the message (never the value: it may be huge)."""
    if type(item) is not dict:
        return f"an item is a {type(item).__name__}, not an object"
    for k, v in item.items():
        if not fields.get(k, _scalar)(v):
            return f"field {str(k)[:40]!r} is not what the recorder writes"
    return "unknown"
