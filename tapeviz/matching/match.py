"""Two recordings matched op by op: by phase, op type, the line as written and the Keras
layer, aligned in execution order (difflib over those keys, so an edit that moves lines or
adds one keeps the rest matched), then each pair's values and gradients told apart.
Plain data in and out; no TensorFlow, no Streamlit."""
from __future__ import annotations

import difflib
import re
from dataclasses import asdict, dataclass, field
from typing import Optional

from ..draw.graph import group_key
from ..recording import Recording
from . import frameworks, numbers, steps
from .gradients import flow_map, match_calls

SAME, DIFFERS, ADDED, REMOVED = "same", "differs", "added", "removed"
RTOL = 1e-5


@dataclass
class Row:
    """One op of A matched with one of B, or one of either alone (added: only in B)."""
    status: str
    a: Optional[int]                 # op id in A
    b: Optional[int]                 # op id in B
    phase: str
    op: str                          # TF's op type, or the tf.function's name
    line_a: Optional[int]
    line_b: Optional[int]
    file: Optional[str]
    code: str                        # the line as written
    name: Optional[str]              # the user's name of its first output
    shape_a: Optional[list]
    shape_b: Optional[list]
    repeat: int = 0                  # its place among the ops of its line and type (a loop's step)
    value_diff: Optional[float] = None
    value_mark: Optional[str] = None     # numbers.NAN, INF, SHAPE or NO_VALUE
    value_side: Optional[str] = None     # "a" or "b": the side the NaN or Inf is on
    grad_diff: Optional[float] = None
    grad_mark: Optional[str] = None      # numbers.NONE (one side has none), NAN, INF
    grad_side: Optional[str] = None      # "a" or "b": the side that has none, NaN or Inf
    tensor_a: Optional[int] = None       # the first output's tensor id, each side
    tensor_b: Optional[int] = None

    def breaks(self) -> bool:
        """Parted whatever the tolerance: an op on one side only, a NaN, Inf, None or shape."""
        return (self.status in (ADDED, REMOVED) or self.value_mark in numbers.BREAKS
                or self.grad_mark in numbers.BREAKS)

    def beyond(self, rtol: float) -> bool:
        return self.breaks() or any(d is not None and d > rtol for d in (self.value_diff, self.grad_diff))

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class Comparison:
    """Everything `tapeviz diff`, `tapeviz.compare` and the page's compare view show."""
    a: Recording
    b: Recording
    rows: list                       # Row, in execution order
    gradients: list                  # GradRow: each gradient call's results, source by source
    rtol: float
    step_a: Optional[int] = None
    step_b: Optional[int] = None
    first: Optional[int] = None      # index in rows of the first divergence, or None
    first_numeric: Optional[int] = None   # ... of the first op past rtol by number alone
    counts: dict = field(default_factory=dict)
    results: list = field(default_factory=list)   # a tf.function call on one side: its outputs
                                                   # against the other side's tensors of that name

    @property
    def differ(self) -> bool:
        return self.first is not None or any(g.beyond(self.rtol) for g in self.gradients)

    def first_row(self) -> Optional[Row]:
        return self.rows[self.first] if self.first is not None else None

    def match_of(self, side: str, op_id: int) -> Optional[int]:
        """The op matched with op `op_id` of side "a" (or "b") on the other side."""
        other = "b" if side == "a" else "a"
        return next((getattr(r, other) for r in self.rows if getattr(r, side) == op_id), None)


def layer(scope: Optional[str]) -> Optional[str]:
    """A Keras layer's key with its counter dropped: `dense_1` in one run is `dense` in another."""
    key = group_key(scope)
    return re.sub(r"_\d+(?=/|$)", "", key) if key else None


def op_key(rec: Recording, op) -> tuple:
    code = steps.line_text(rec, op.file, op.line) or f"line {op.line}"
    return (op.phase, op.function or op.type, code, layer(op.scope))


def aligned(rec_a: Recording, ops_a: list, rec_b: Recording, ops_b: list) -> list:
    """[(op of A or None, op of B or None)] in execution order: equal keys matched, and in a
    block that changed, ops of one phase and type matched in order (an edited line's ops)."""
    return _align(ops_a, ops_b, lambda rec: lambda op: op_key(rec, op), (rec_a, rec_b), _loose)


def _across(rec_a: Recording, ops_a: list, rec_b: Recording, ops_b: list) -> list:
    """A PyTorch run beside a TensorFlow one: their forward ops on a tape that both
    frameworks name, matched by TensorFlow's name in execution order (frameworks.py)."""
    return _align(frameworks.comparable(rec_a, ops_a), frameworks.comparable(rec_b, ops_b),
                  lambda rec: lambda op: (op.phase, frameworks.common_type(rec, op)),
                  (rec_a, rec_b), None)


def _loose(ops_a: list, ops_b: list) -> list:
    """A changed block's ops matched by phase and type alone, the rest on one side."""
    return _align(ops_a, ops_b, lambda rec: lambda op: (op.phase, op.function or op.type), (None, None), None)


def _align(ops_a: list, ops_b: list, key, recs: tuple, changed) -> list:
    """Two op sequences aligned by their keys; a replaced block goes to `changed`, or when
    None, its ops on one side each."""
    keys_a, keys_b = list(map(key(recs[0]), ops_a)), list(map(key(recs[1]), ops_b))
    out = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, keys_a, keys_b, autojunk=False).get_opcodes():
        if tag == "equal":
            out.extend(zip(ops_a[i1:i2], ops_b[j1:j2]))
        elif tag == "replace" and changed is not None:
            out.extend(changed(ops_a[i1:i2], ops_b[j1:j2]))
        else:
            out.extend((op, None) for op in ops_a[i1:i2])
            out.extend((None, op) for op in ops_b[j1:j2])
    return out


def compare(a: Recording, b: Recording, rtol: float = RTOL, step_a: Optional[int] = None,
            step_b: Optional[int] = None) -> Comparison:
    """A matched with B (or step `step_a` of A with step `step_b` of B); raises
    steps.NoSuchStep for a step a recording does not keep."""
    part_a, part_b = steps.part(a, step_a), steps.part(b, step_b)
    flows = flow_map(a, part_a.tapes), flow_map(b, part_b.tapes)
    repeats_a, repeats_b = {}, {}
    rows = []
    across = frameworks.across(a, b)
    pairs = _across(a, part_a.ops, b, part_b.ops) if across else aligned(a, part_a.ops, b, part_b.ops)
    for op_a, op_b in pairs:
        rows.append(_row(a, b, op_a, op_b, flows, _repeat(repeats_a, op_a), _repeat(repeats_b, op_b)))
    out = Comparison(a, b, rows, match_calls(a, part_a.tapes, b, part_b.tapes, by_line=not across),
                     rtol, part_a.step, part_b.step)
    for i, row in enumerate(rows):
        if row.status == SAME and row.beyond(rtol):
            row.status = DIFFERS
    out.first_numeric = next((i for i, r in enumerate(rows) if r.beyond(rtol) and not r.breaks()
                              or any(d is not None and d > rtol for d in (r.value_diff, r.grad_diff))), None)
    out.first = first_divergence(rows, out.first_numeric)
    for r in rows:
        out.counts[r.status] = out.counts.get(r.status, 0) + 1
    out.results = function_results(a, part_a.ops, b, part_b.ops, rows)
    return out


def function_results(a: Recording, ops_a: list, b: Recording, ops_b: list, rows: list) -> list:
    """A tf.function called on one side only (the other ran its ops eagerly): each named
    output against the newest tensor of that name on the other side, [{function, name,
    diff, mark}], so an eager run and its compiled one are compared by their results."""
    out = []
    for row in rows:
        if row.status not in (ADDED, REMOVED):
            continue
        here, there, ops = (a, b, ops_b) if row.status == REMOVED else (b, a, ops_a)
        op = here.op(row.a if row.status == REMOVED else row.b)
        if op is None or not op.function:
            continue
        named = {}
        for other in ops:
            for t in other.outputs:
                info = there.tensor(t)
                if info is not None and info.name:
                    named[info.name] = info
        for t in op.outputs:
            info = here.tensor(t)
            match_ = named.get(info.name) if info is not None and info.name else None
            if match_ is None:
                continue
            pair = (match_, info) if row.status == ADDED else (info, match_)
            diff, mark = numbers.tensors_apart(*pair)
            out.append({"function": op.function, "name": info.name, "diff": diff, "mark": mark})
    return out


def first_divergence(rows: list, numeric: Optional[int]) -> Optional[int]:
    """Where the runs part, in execution order: an op on one side only or a value turned NaN,
    Inf or reshaped first, since a gradient that then differs is its consequence (it is
    computed later, backward); then a gradient None, NaN or Inf on one side; then a number
    past rtol."""
    for breaks in (lambda r: r.status in (ADDED, REMOVED) or r.value_mark in numbers.BREAKS,
                   lambda r: r.grad_mark in numbers.BREAKS):
        found = next((i for i, r in enumerate(rows) if breaks(r)), None)
        if found is not None:
            return found
    return numeric


def _repeat(seen: dict, op) -> int:
    if op is None:
        return 0
    key = (op.phase, op.line, op.file, op.function or op.type)
    seen[key] = seen.get(key, 0) + 1
    return seen[key] - 1


def _row(a: Recording, b: Recording, op_a, op_b, flows: tuple, rep_a: int, rep_b: int) -> Row:
    one, rec = (op_a, a) if op_a is not None else (op_b, b)
    ta = a.tensor(op_a.outputs[0]) if op_a is not None and op_a.outputs else None
    tb = b.tensor(op_b.outputs[0]) if op_b is not None and op_b.outputs else None
    status = SAME if op_a is not None and op_b is not None else REMOVED if op_b is None else ADDED
    row = Row(status, op_a.id if op_a else None, op_b.id if op_b else None, one.phase,
              one.function or one.type, op_a.line if op_a else None, op_b.line if op_b else None,
              one.file, steps.line_text(rec, one.file, one.line),
              (ta.name if ta is not None else None) or (tb.name if tb is not None else None),
              list(ta.shape) if ta is not None else None, list(tb.shape) if tb is not None else None,
              rep_a if op_a is not None else rep_b,
              tensor_a=ta.id if ta is not None else None, tensor_b=tb.id if tb is not None else None)
    if status != SAME:
        return row
    for ia, ib in zip(op_a.outputs, op_b.outputs):    # an op's worst output speaks for it
        diff, mark = numbers.tensors_apart(a.tensor(ia), b.tensor(ib))
        row.value_diff = numbers.worse(row.value_diff, diff)
        if mark and (row.value_mark in (None, numbers.NO_VALUE)):
            row.value_mark, row.value_side = mark, _side(a.tensor(ia), b.tensor(ib), mark)
        if None in flows:       # a side whose calls kept no flow: nothing to tell apart
            row.grad_mark = row.grad_mark or numbers.NO_VALUE
            continue
        gdiff, gmark = numbers.grads_apart(flows[0].get(ia), flows[1].get(ib))
        row.grad_diff = numbers.worse(row.grad_diff, gdiff)
        if gmark and row.grad_mark is None:
            row.grad_mark = gmark
            row.grad_side = _grad_side(flows[0].get(ia), flows[1].get(ib), gmark)
    return row


def _side(ta, tb, mark: str) -> Optional[str]:
    """Which side holds the NaN or Inf (or lacks the value)."""
    def has(t):
        if t is None:
            return False
        nan, inf = numbers.non_finite(numbers.flat(t.value))
        if t.stats is not None:
            nan, inf = nan or t.stats.nan, inf or t.stats.inf
        return bool(nan) if mark == numbers.NAN else bool(inf) if mark == numbers.INF else False
    if mark in (numbers.NAN, numbers.INF):
        return "b" if has(tb) and not has(ta) else "a" if has(ta) else None
    return None


def _grad_side(ga, gb, mark: str) -> Optional[str]:
    if mark == numbers.NONE:
        return "a" if ga is None else "b"
    nan_a = any(x != x for x in numbers.flat(ga[0] if ga[0] is not None else ga[1]))
    return "a" if nan_a else "b"
