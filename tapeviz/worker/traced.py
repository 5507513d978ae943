"""Where a tape entered while a tf.function traces was written: the tf.function being
traced, the Python function around the `with`, and the user's file and line of the `with`
(autograph runs a converted copy of the function from a generated file; its source map
leads back to the user's line). Read once per trace, so walking the stack is cheap enough.
"""
from __future__ import annotations

import os
from typing import NamedTuple, Optional

from tensorflow.python.eager.polymorphic_function import polymorphic_function

AUTOGRAPH_PREFIX = "tf__"        # autograph names a converted function tf__<its name>
AUTOGRAPH_FILE = "__autograph_generated_file"   # ... in a file named so


class TracedAt(NamedTuple):
    function: Optional[str]      # the tf.function being traced ("train_step", "one_step_on_data")
    python: Optional[str]        # the Python function whose code holds the `with`
    file: Optional[str]          # the user's file of the `with`, as the recording names it
    line: Optional[int]


def traced_at(frame, files) -> TracedAt:
    """`frame` is the caller of the tape's __enter__; `files` the run's UserFiles."""
    python = _python_name(frame)
    file, line = _user_line(frame, files)
    return TracedAt(_tf_function(frame), python, file, line)


def traced_line(frame, files, cache: dict):
    """(file, line, frame) of the user's line that is building a graph op, from `frame`
    outward: a frame of the user's files, or autograph's converted copy of one (its line
    found through the source map once per generated line, kept in `cache`); Nones if none."""
    while frame is not None:
        code = frame.f_code
        name = files.name(code.co_filename)
        if name is not None:
            return name, frame.f_lineno, frame
        if os.path.basename(code.co_filename).startswith(AUTOGRAPH_FILE):
            key = (code.co_filename, frame.f_lineno)
            if key not in cache:
                cache[key] = _user_line(frame, files)
            if cache[key][0] is not None:
                return (*cache[key], frame)
        frame = frame.f_back
    return None, None, None


def _python_name(frame) -> Optional[str]:
    name = frame.f_code.co_name if frame is not None else None
    if name and name.startswith(AUTOGRAPH_PREFIX):
        return name[len(AUTOGRAPH_PREFIX):]
    return name


def _user_line(frame, files):
    """The `with`'s line in the user's files: the frame itself when it runs the user's code
    (no autograph), else autograph's source map of the converted code, found on the frame
    of autograph's converted_call that called it (its local `converted_f`)."""
    name = files.name(frame.f_code.co_filename)
    if name is not None:
        return name, frame.f_lineno
    caller = frame.f_back
    converted = caller.f_locals.get("converted_f") if caller is not None else None
    source_map = getattr(converted, "ag_source_map", None) or {}
    for loc, origin in source_map.items():
        if loc.filename == frame.f_code.co_filename and loc.lineno == frame.f_lineno:
            name = files.name(origin.loc.filename)
            if name is not None:
                return name, origin.loc.lineno
    return None, None


def _tf_function(frame) -> Optional[str]:
    """The innermost tf.function on the stack: a frame of polymorphic_function.Function's
    own methods, whose `self` is the function being traced."""
    while frame is not None:
        if frame.f_code.co_filename == polymorphic_function.__file__:
            owner = frame.f_locals.get("self")
            if isinstance(owner, polymorphic_function.Function):
                return owner.name
        frame = frame.f_back
    return None
