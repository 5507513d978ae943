"""Which part of a recording a comparison reads: the whole run, or one kept step (the ops from
a top-level tape's first op to the next one's, its update included), and each op's line as
written, so a match survives an edit that moved lines. No TensorFlow here."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..recording import Recording


@dataclass(frozen=True)
class Part:
    """The ops and tapes of one side of a comparison."""
    ops: list              # Op, in execution order
    tapes: list            # Tape ids whose gradient calls belong to it
    step: Optional[int]    # its kept step's number, None for the whole run


def kept_steps(rec: Recording) -> list:
    """[(top-level tape id, first op id)], one per kept step, in the order the steps ran."""
    firsts = []
    for tape in rec.tapes:
        if tape.parent is None and tape.ops:
            firsts.append((tape.id, min(tape.ops)))
    return sorted(firsts, key=lambda pair: pair[1])


def descendants(rec: Recording, tape_id: int) -> list:
    """The tape and every tape opened inside it."""
    out = [tape_id]
    for tape in rec.tapes:
        if tape.parent in out and tape.id not in out:
            out.append(tape.id)
    return out


class NoSuchStep(ValueError):
    """A step number the recording does not have; its message says which it has."""


def part(rec: Recording, step: Optional[int] = None) -> Part:
    """The whole run (step None) or kept step `step` (0-based; negative counts from the end)."""
    if step is None:
        return Part(list(rec.ops), [t.id for t in rec.tapes], None)
    steps = kept_steps(rec)
    if not steps:
        raise NoSuchStep("the recording has no tape that recorded an op, so no step to pick")
    if not -len(steps) <= step < len(steps):
        raise NoSuchStep(f"no step {step}: the recording keeps {len(steps)} step"
                         f"{'s' if len(steps) != 1 else ''} (0 to {len(steps) - 1})")
    index = step % len(steps)
    tape_id, start = steps[index]
    end = steps[index + 1][1] if index + 1 < len(steps) else None
    ops = [op for op in rec.ops if op.id >= start and (end is None or op.id < end)]
    return Part(ops, descendants(rec, tape_id), index)


def line_text(rec: Recording, file: Optional[str], line: Optional[int]) -> str:
    """The source line as written, stripped; "" where the recording kept no text of it."""
    if line is None:
        return ""
    text = rec.files.get(file) if file is not None else None
    if text is None and (file is None or file == rec.program):
        text = rec.source
    lines = (text or "").splitlines()
    return lines[line - 1].strip() if 0 < line <= len(lines) else ""
