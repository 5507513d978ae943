"""The recording: plain dataclasses for what a run executed, and their JSON form.

This is the contract (schema `tapeviz.recording/1`, see DESIGN.md) shared by the
command line, the app and its export. No TensorFlow here: the app imports it.
"""
from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from typing import Any, Optional

SCHEMA = "tapeviz.recording/1"

FORWARD = "forward"
BACKWARD = "backward"

# Recording.steps' bounds, apart from the op bound: the newest summaries, their norms all
# told (a model with many variables), and the distinct sources they name
MAX_STEPS = 100_000
MAX_STEP_NORMS = 1_000_000
MAX_STEP_SOURCES = 10_000
# Histogram counts over all summaries (26 a source, metrics.HIST_BINS): the oldest go first
MAX_STEP_HIST = 300_000
# A line's gradient calls from one that bins its gradients (CallSummary.hist) to the next,
# its first call binning: a 400k-weight kernel takes milliseconds, too much for every step
STEP_HIST_EVERY = 10

TENSORFLOW, PYTORCH = "tensorflow", "pytorch"     # Recording.framework
FRAMEWORKS = (TENSORFLOW, PYTORCH)

VARIABLE = "variable"
CONSTANT = "constant"
INTERMEDIATE = "intermediate"


@dataclass
class Stats:
    min: Optional[float]
    max: Optional[float]
    mean: Optional[float]
    std: Optional[float]
    nan: int = 0
    inf: int = 0


@dataclass(slots=True)     # thousands per recording: slots make them cheaper to make
class Tensor:
    id: int
    name: Optional[str]          # the user's Python variable bound to it, if any
    shape: list
    dtype: str
    kind: str                    # "variable" | "constant" | "intermediate"
    value: Any = None            # nested lists for small tensors, else None
    stats: Optional[Stats] = None
    producer: Optional[int] = None   # op id
    line: Optional[int] = None       # where it was first seen (created or first used)
    trainable: Optional[bool] = None  # variables only
    file: Optional[str] = None       # the user's file of `line`, relative to the program's folder
    preview: Optional[str] = None    # strings: a short text of the value(s)
    warning: Optional[str] = None    # what tapeviz failed to describe about it


@dataclass(slots=True)
class Op:
    id: int
    type: str                    # TF op type ("MatMul"), or the Python name of a tf.function
    inputs: list
    outputs: list
    line: Optional[int]
    scope: Optional[str]
    tapes: list
    phase: str = FORWARD
    duration_us: Optional[float] = None
    function: Optional[str] = None   # set for tf.function calls: the Python function's name
    call: Optional[int] = None       # for backward ops: index of the gradient call in its tape
    file: Optional[str] = None       # the user's file of `line`, relative to the program's folder
    # set for an op built into a tf.function's graph as it was traced (inside a traced tape's
    # block or gradient call): the function's name. It never ran as such: no values
    traced: Optional[str] = None


@dataclass
class GradResult:
    source: int
    grad: Optional[int]
    none_reason: Optional[str] = None


@dataclass
class FlowEntry:
    tensor: int
    norm: float
    value: Any = None            # d target / d tensor itself (nested lists) when it is small


@dataclass
class GradientCall:
    line: Optional[int]
    kind: str                    # "gradient" | "jacobian" | "batch_jacobian"
    target: list
    sources: list
    results: list = field(default_factory=list)     # [GradResult]
    flow: list = field(default_factory=list)        # [FlowEntry]
    error: Optional[str] = None
    warning: Optional[str] = None
    note: Optional[str] = None     # e.g. why flow is empty
    file: Optional[str] = None     # the user's file of `line`


@dataclass
class StepSource:
    """A source of the run's gradient calls, named once for all their summaries."""
    tensor: int                  # its recording id
    name: Optional[str] = None   # the user's Python name for it, if any
    variable: Optional[str] = None   # a variable's path ("dense/kernel")
    layer: Optional[str] = None      # its layer: the path without its last part ("dense")


@dataclass
class CallSummary:
    """One gradient call, in brief: kept for every call (the newest MAX_STEPS), also after
    the op bound dropped its ops, so a run's every step can be charted."""
    call: int                    # its number among the run's gradient calls, from 0
    tape: int                    # the tape's id
    index: int                   # its index among that tape's calls (GradientCall's place)
    kind: str                    # "gradient" | "jacobian" | "batch_jacobian"
    line: Optional[int] = None
    file: Optional[str] = None
    target: Any = None           # the target's value when `scalar`, else its norm (encode_float)
    scalar: bool = False
    sources: list = field(default_factory=list)   # index into Recording.step_sources, per source
    norms: list = field(default_factory=list)     # its gradient's norm per source; None: None
    none: list = field(default_factory=list)      # [[position, the None reason's kind]]
    nan: list = field(default_factory=list)       # positions whose gradient holds a NaN
    inf: list = field(default_factory=list)       # ... an Inf
    error: Optional[str] = None
    # Every STEP_HIST_EVERY-th call at its line: per source, its gradient's values in
    # metrics.histogram's fixed bins of |value| (None: a None gradient); [] on the others
    hist: list = field(default_factory=list)


@dataclass
class Tape:
    id: int
    line: Optional[int]
    persistent: bool
    watch_accessed_variables: bool
    parent: Optional[int]
    watched: list = field(default_factory=list)
    ops: list = field(default_factory=list)
    gradients: list = field(default_factory=list)   # [GradientCall]
    end_line: Optional[int] = None                   # where its `with` block ended
    # [first op id, end op id) of each stretch during which it recorded: entering the
    # block opens one, stop_recording() and leaving the block close it
    recording_spans: list = field(default_factory=list)
    file: Optional[str] = None                       # the user's file of `line`
    index: Optional[int] = None    # its number among top-level tapes (counting from 0), when --tapes chose
    # each tape.reset(): {line, op: the first op id after it, ops and watched: what it
    # discarded (tensor/op ids)}
    resets: list = field(default_factory=list)
    # set for a tape entered inside a tf.function: the function's name. TensorFlow traced
    # the tape into the function's graph, so its ops are the function's one op (`line`
    # is where the program called the function), not recorded one by one
    function: Optional[str] = None


@dataclass
class Alert:
    kind: str                    # "nan" | "inf"
    op: Optional[int]
    tensor: int
    line: Optional[int]
    phase: str = FORWARD
    file: Optional[str] = None


@dataclass
class Error:
    type: str
    message: str
    line: Optional[int] = None
    hint: Optional[str] = None
    file: Optional[str] = None     # the user's file of `line`
    # the user-side stack, outermost first: [{file, line, function}] of each frame in the
    # user's files between the program and where it was raised (`file`/`line` is the last)
    stack: Optional[list] = None


@dataclass
class Recording:
    source: str
    stdout: str = ""
    error: Optional[Error] = None
    ops: list = field(default_factory=list)
    tensors: list = field(default_factory=list)
    tapes: list = field(default_factory=list)
    alerts: list = field(default_factory=list)
    warnings: list = field(default_factory=list)     # [{line, message}]
    dropped: dict = field(default_factory=dict)      # what the bounds dropped: {"ops": n, ...}
    duration_s: Optional[float] = None
    program: Optional[str] = None    # the program's file, as `file` fields name it
    files: dict = field(default_factory=dict)     # {file: source} of every user file seen
    argv: Optional[list] = None      # the program's sys.argv, when it had arguments
    skipped: dict = field(default_factory=dict)   # what --tapes / keep_steps left uninstrumented
    stderr: str = ""                 # what it wrote to stderr (tf.print's default)
    eager: bool = False              # recorded with --eager: tf.functions ran op by op
    steps: list = field(default_factory=list)         # [CallSummary], oldest first
    step_sources: list = field(default_factory=list)  # [StepSource] the summaries name
    # a run that did not end on its own: {"why": "timeout" | "cancelled" | "killed" |
    # "crashed", "note": what it kept}; {} for a run that ended as its program did
    cut_short: dict = field(default_factory=dict)
    # a snapshot written while the program still runs (`record --live`, tapeviz.keras.Watch's
    # file): the steps so far; the file is rewritten whole, and the last write says False
    running: bool = False
    # whose autograd made it: TENSORFLOW (a GradientTape), or PYTORCH (worker/autograd/:
    # `backward()` as the gradient call, the autograd graph's nodes as the backward ops)
    framework: str = TENSORFLOW
    schema: str = SCHEMA

    # -- lookups the app uses; built on demand, never serialized ---------------
    def tensor(self, tensor_id: int) -> Optional[Tensor]:
        return self._index("_tensor_index", self.tensors).get(tensor_id)

    def op(self, op_id: int) -> Optional[Op]:
        return self._index("_op_index", self.ops).get(op_id)

    def tapes_opened(self, file: Optional[str], line: Optional[int]) -> int:
        """How many tapes the `with` at `file`, `line` opened: those recorded, or, for the
        loop whose later steps ran uninstrumented (`skipped`, keep_steps), all of them."""
        n = sum(1 for t in self.tapes if t.line == line and t.file == file)
        s = self.skipped
        if s.get("line") == line and s.get("file") == file and type(s.get("loop_tapes")) is int:
            n = max(n, s["loop_tapes"])
        return n

    def _index(self, attr: str, items: list) -> dict:
        cached = self.__dict__.get(attr)
        if cached is None or len(cached) != len(items):
            cached = {item.id: item for item in items}
            self.__dict__[attr] = cached
        return cached

    # -- JSON --------------------------------------------------------------
    def to_dict(self) -> dict:
        out = {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}
        # schema first: a reader sees what it is holding before anything else
        return {"schema": out.pop("schema"), **out}

    def to_json(self, indent: Optional[int] = None) -> str:
        # Strict JSON (browsers reject NaN literals): the writer encodes
        # non-finite floats as the strings "nan", "inf", "-inf" (see as_float).
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    @classmethod
    def from_dict(cls, d: dict) -> "Recording":
        schema = d.get("schema")
        if schema != SCHEMA:
            raise ValueError(f"not a tapeviz recording (schema {schema!r}, expected {SCHEMA!r})")
        return cls(
            source=d.get("source", ""),
            stdout=d.get("stdout", ""),
            error=_build(Error, d.get("error")),
            ops=[_build(Op, o) for o in d.get("ops", [])],
            tensors=[_tensor(t) for t in d.get("tensors", [])],
            tapes=[_tape(t) for t in d.get("tapes", [])],
            alerts=[_build(Alert, a) for a in d.get("alerts", [])],
            warnings=list(d.get("warnings", [])),
            dropped=dict(d.get("dropped", {})),
            duration_s=d.get("duration_s"),
            program=d.get("program"),
            files=dict(d.get("files") or {}),
            argv=d.get("argv"),
            skipped=dict(d.get("skipped") or {}),
            stderr=d.get("stderr") or "",
            eager=bool(d.get("eager")),
            steps=[_build(CallSummary, c) for c in d.get("steps") or []],
            step_sources=[_build(StepSource, c) for c in d.get("step_sources") or []],
            cut_short=dict(d.get("cut_short") or {}),
            running=d.get("running") is True,
            framework=d.get("framework") or TENSORFLOW,
        )

    @classmethod
    def from_json(cls, text: str) -> "Recording":
        return cls.from_dict(json.loads(text))


# A running snapshot carries a long run's first and newest steps only: rewritten every second
# or two, it stays a few MiB however long the run (the last write holds them all). A page
# following it takes each rewrite's new steps, so it misses none that came while it looked.
RUNNING_FIRST, RUNNING_NEWEST = 200, 3_800


def running_steps(steps: list) -> list:
    """The steps a running snapshot of `steps` carries: all, or the first and the newest."""
    if len(steps) <= RUNNING_FIRST + RUNNING_NEWEST:
        return list(steps)
    return list(steps[:RUNNING_FIRST]) + list(steps[-RUNNING_NEWEST:])


def write_whole(path, text: str) -> None:
    """Write a recording's JSON to `path` whole: a reader following it (state/follow.py)
    sees the old file or the new one, never half."""
    part = f"{path}.part"
    with open(part, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(part, path)


def stop_path(path) -> str:
    """The file whose presence asks the program writing a running recording at `path` to
    stop (the page's Stop, following it): `record --live` cancels its run, Watch ends fit()."""
    return f"{path}.stop"


def encode_float(x: float):
    """A float for strict JSON: non-finite values become "nan", "inf" or "-inf"."""
    if x != x:
        return "nan"
    if x in (float("inf"), float("-inf")):
        return "inf" if x > 0 else "-inf"
    return x


def as_float(x) -> Optional[float]:
    """Read back a number the writer encoded with encode_float (None stays None)."""
    if x is None or isinstance(x, (int, float)):
        return x
    return float(x)


# What _plain returns as it is, told by exact class: most of a recording's values (ids,
# lines, norms), so a 20k-op recording's dict is made in a quarter of the time
_AS_IS = frozenset({int, float, str, bool, type(None)})
_FIELDS: dict = {}                # a dataclass -> its fields' names, in order


def _plain(value):
    cls = value.__class__
    if cls in _AS_IS:
        return value
    names = _FIELDS.get(cls)
    if names is not None:
        return {name: _plain(getattr(value, name)) for name in names}
    if isinstance(value, list):
        return [v if v.__class__ in _AS_IS else _plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        names = _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(value))
        return {name: _plain(getattr(value, name)) for name in names}
    return value


def _build(cls, d):
    """Build a dataclass from a dict, ignoring fields a newer writer added."""
    if d is None:
        return None
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in d.items() if k in names})


def _tensor(d: dict) -> Tensor:
    t = _build(Tensor, d)
    t.stats = _build(Stats, d.get("stats"))
    return t


def _tape(d: dict) -> Tape:
    t = _build(Tape, d)
    t.gradients = [_call(c) for c in d.get("gradients", [])]
    return t


def _call(d: dict) -> GradientCall:
    c = _build(GradientCall, d)
    c.results = [_build(GradResult, r) for r in d.get("results", [])]
    c.flow = [_build(FlowEntry, f) for f in d.get("flow", [])]
    return c
