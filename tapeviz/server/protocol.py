"""What the server accepts from a worker, checked as if the worker were hostile (user code
shares its process and can write to the message channel): JSON lines under a hard size, parsed
under a budget of objects and numbers, and recordings re-checked against every bound before
the page builds anything from them. No TensorFlow, no Streamlit.
"""
from __future__ import annotations

import json
from typing import Optional

from ..recording import MAX_STEP_NORMS, MAX_STEP_SOURCES, MAX_STEPS, SCHEMA

MAX_MESSAGE = 64 * 2**20     # one message line; a full 20k-op recording of 8x8 tensors is ~48 MB
MAX_VALUE_ELEMENTS = 4096    # numbers in one tensor's `value` (the recorder keeps small ones)
MAX_WARNINGS = 1000
MAX_ALERTS = 1000


class ProtocolError(ValueError):
    """A worker sent something no honest worker sends: the worker is dropped."""


class _Budget:
    def __init__(self, objects: int, numbers: int, ops: int, tensors: int):
        self.objects, self.numbers = objects, numbers
        self.ops, self.tensors = ops, tensors

    def obj(self, pairs):
        self.objects -= 1
        if self.objects < 0:
            raise ProtocolError("more objects than any recording within the bounds holds")
        d = dict(pairs)
        # Ops and tensors are counted as they are parsed: a forged recording stops at the
        # bound, not after all of it is in memory.
        if "phase" in d and "tapes" in d:
            self.ops -= 1
            if self.ops < 0:
                raise ProtocolError("more ops than the bound")
        elif "producer" in d and "kind" in d:
            self.tensors -= 1
            if self.tensors < 0:
                raise ProtocolError("more tensors than the bound")
        return d

    def number(self, text, kind):
        self.numbers -= 1
        if self.numbers < 0:
            raise ProtocolError("more numbers than any recording within the bounds holds")
        return kind(text)


def bounds(max_ops: int) -> dict:
    """What an honest recording holds at most, from the op bound the job was sent with: the
    recorder keeps `max_ops` ops, each with a few outputs, and 1/20 as many tapes."""
    return {"ops": max_ops, "tensors": 4 * max_ops + 10_000, "tapes": max(16, max_ops // 20)}


def parse(line: bytes, max_ops: int) -> dict:
    """One message as a dict; ProtocolError when it is not JSON, not an object, or holds
    more objects or numbers than a recording within the bounds could. The budget stops the
    parse early, so a forged message costs at most its own bounded size."""
    b = bounds(max_ops)
    # A tensor is a few objects (itself, its stats, a flow entry, a gradient result) and
    # at most a small value's numbers plus its stats, shape and ids.
    # Each gradient call's summary (Recording.steps) is one object and a dozen numbers
    # besides its sources' norms.
    budget = _Budget(objects=b["ops"] * 2 + b["tensors"] * 4 + 10_000 + MAX_STEPS
                     + MAX_STEP_SOURCES,
                     numbers=b["ops"] * 16 + b["tensors"] * 80 + 100_000 + MAX_STEPS * 16
                     + MAX_STEP_NORMS * 2,
                     ops=b["ops"], tensors=b["tensors"])
    try:
        message = json.loads(line, object_pairs_hook=budget.obj,
                             parse_float=lambda t: budget.number(t, float),
                             parse_int=lambda t: budget.number(t, int))
    except ProtocolError:
        raise
    except (ValueError, RecursionError) as exc:
        raise ProtocolError(f"a message that is not JSON ({type(exc).__name__})") from None
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        raise ProtocolError("a message that is not a JSON object with a type")
    return message


def check_recording(rec, source: str, max_ops: int, max_stdout: int) -> Optional[str]:
    """Why `rec` cannot be what the recorder sent for `source` within the bounds, or None."""
    if not isinstance(rec, dict) or rec.get("schema") != SCHEMA:
        return "the recording is not a tapeviz recording"
    b = bounds(max_ops)
    for key in ("ops", "tensors", "tapes"):
        items = rec.get(key)
        if not isinstance(items, list):
            return f"the recording's {key} are not a list"
        if len(items) > b[key]:
            return f"the recording has {len(items):,} {key}, over the bound of {b[key]:,}"
        if not all(isinstance(x, dict) for x in items):
            return f"the recording's {key} are not all objects"
    for key, most in (("warnings", MAX_WARNINGS), ("alerts", MAX_ALERTS), ("steps", MAX_STEPS),
                      ("step_sources", MAX_STEP_SOURCES)):
        items = rec.get(key, [])
        if not isinstance(items, list) or len(items) > most:
            return f"the recording's {key} are not a list of at most {most}"
        if not all(isinstance(x, dict) for x in items):
            return f"the recording's {key} are not all objects"
    stdout = rec.get("stdout", "")
    # the recorder keeps `max_stdout` characters and adds a one-line marker where it cut
    if not isinstance(stdout, str) or len(stdout) > max_stdout + 200:
        return f"the recording's printed output is over the bound of {max_stdout:,} characters"
    stderr = rec.get("stderr", "")
    if not isinstance(stderr, str) or len(stderr) > max_stdout + 200:
        return f"the recording's stderr is over the bound of {max_stdout:,} characters"
    if rec.get("source") != source:
        return "the recording is not of the program that was sent"
    for tensor in rec["tensors"]:
        if _elements(tensor.get("value")) > MAX_VALUE_ELEMENTS:
            return "a tensor's value is larger than the recorder ever sends"
    return None


def _elements(value, depth: int = 0) -> int:
    if isinstance(value, list):
        if depth > 32:
            return MAX_VALUE_ELEMENTS + 1
        return sum(_elements(v, depth + 1) for v in value) or 1
    return 1
