"""The gradient side of a comparison: each op's d target / d output from the calls' flow,
and each gradient call's results matched source by source (`w`'s gradient None in A, 2.0 in
B). No TensorFlow here."""
from __future__ import annotations

import difflib
from dataclasses import asdict, dataclass
from typing import Optional

from ..recording import Recording
from ..words.values import tensor_name
from . import numbers, steps


@dataclass
class GradRow:
    """One source of one gradient call, A beside B."""
    line_a: Optional[int]
    line_b: Optional[int]
    code: str
    source: str                      # the source's Python name
    grad_a: Optional[int]            # the gradient's tensor id, None where it was None
    grad_b: Optional[int]
    reason_a: Optional[str] = None   # why it was None
    reason_b: Optional[str] = None
    diff: Optional[float] = None
    mark: Optional[str] = None       # numbers.NONE: None on one side only; NAN, INF, SHAPE
    side: Optional[str] = None       # the side that has None, NaN or Inf
    missing: Optional[str] = None    # "a" or "b": the call or source ran on one side only

    def breaks(self) -> bool:
        return self.missing is not None or self.mark in numbers.BREAKS

    def beyond(self, rtol: float) -> bool:
        return self.breaks() or (self.diff is not None and self.diff > rtol)

    def as_dict(self) -> dict:
        return asdict(self)


def calls(rec: Recording, tapes: list) -> list:
    """The gradient calls of these tapes, in the order their tapes were entered."""
    chosen = set(tapes)
    return [c for tp in rec.tapes if tp.id in chosen for c in tp.gradients]


def flow_map(rec: Recording, tapes: list) -> Optional[dict]:
    """{tensor id: (value, norm)} of d target / d tensor, from the first call that has it;
    None when no call kept a flow for a reason (traced in a tf.function: no values)."""
    out = {}
    chosen = calls(rec, tapes)
    if chosen and all(not c.flow and c.note for c in chosen):
        return None
    for call in chosen:
        for entry in call.flow:
            out.setdefault(entry.tensor, (entry.value, entry.norm))
    return out


def match_calls(a: Recording, tapes_a: list, b: Recording, tapes_b: list,
                by_line: bool = True) -> list:
    """[GradRow] for every source of every call, the calls matched by line as written (or,
    `by_line` False, by kind in order: `tape.gradient` beside PyTorch's `backward()`)."""
    ca, cb = calls(a, tapes_a), calls(b, tapes_b)
    keys_a = [(c.kind, steps.line_text(a, c.file, c.line) if by_line else "") for c in ca]
    keys_b = [(c.kind, steps.line_text(b, c.file, c.line) if by_line else "") for c in cb]
    rows = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, keys_a, keys_b, autojunk=False).get_opcodes():
        pairs = list(zip(ca[i1:i2], cb[j1:j2]))
        if tag in ("equal", "replace"):
            for x, y in pairs:
                rows.extend(_sources(a, x, b, y))
        longer = ca[i1 + len(pairs):i2] or cb[j1 + len(pairs):j2]
        for c in longer:
            side = "b" if c in cb[j1:j2] else "a"
            rows.extend(_alone(a if side == "a" else b, c, side))
    return rows


def _by_name(rec: Recording, call) -> dict:
    return {tensor_name(rec, r.source): r for r in call.results}


def _sources(a: Recording, x, b: Recording, y) -> list:
    ra, rb = _by_name(a, x), _by_name(b, y)
    code = steps.line_text(a, x.file, x.line)
    rows = []
    for name in list(ra) + [n for n in rb if n not in ra]:
        ga, gb = ra.get(name), rb.get(name)
        row = GradRow(x.line, y.line, code, name, ga.grad if ga else None, gb.grad if gb else None,
                      ga.none_reason if ga else None, gb.none_reason if gb else None)
        if ga is None or gb is None:
            row.missing = "a" if ga is None else "b"
        elif (ga.grad is None) != (gb.grad is None):
            row.mark, row.side = numbers.NONE, "a" if ga.grad is None else "b"
        elif ga.grad is not None:
            row.diff, row.mark = numbers.tensors_apart(a.tensor(ga.grad), b.tensor(gb.grad))
            if row.mark in (numbers.NAN, numbers.INF):
                nan_a = a.tensor(ga.grad)
                row.side = "a" if nan_a is not None and nan_a.stats is not None and (
                    nan_a.stats.nan or nan_a.stats.inf) else "b"
        rows.append(row)
    return rows


def _alone(rec: Recording, call, side: str) -> list:
    code = steps.line_text(rec, call.file, call.line)
    return [GradRow(call.line if side == "a" else None, call.line if side == "b" else None, code,
                    tensor_name(rec, r.source), r.grad if side == "a" else None,
                    r.grad if side == "b" else None, missing="b" if side == "a" else "a")
            for r in call.results]
