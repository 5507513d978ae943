"""The problems the page states before anyone asks, as data: a None gradient, a gradient call
that raised, a NaN or an Inf, each with the view and node that show it; and the view state a
fresh run opens on, its first callout picked. Their words come from words/problems.py.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..recording import BACKWARD, Recording
from ..words import problems, tapes
from . import view


@dataclass
class Callout:
    """A problem the page states before anyone asks: a None gradient, a NaN or an Inf."""
    text: str                 # markdown
    view: str                 # the view key that shows it
    tensor: Optional[int]     # the tensor to mark and bring into view
    line: Optional[int]
    backward: bool = False    # it is among the backward ops: the view must draw them
    file: Optional[str] = None    # the user's file of `line`, when not the program
    full: Optional[str] = None    # the whole story (markdown), when `text` is its short form


def callouts(rec: Recording) -> list:
    names = tapes.tape_names(rec)
    out = []
    for tp in rec.tapes:
        for i, call in enumerate(tp.gradients):
            for r in call.results:
                if r.grad is None:
                    short, full = problems.none_words(rec, call, r, names[tp.id])
                    out.append(Callout(short, view.call_view(tp, i), r.source, call.line, file=call.file, full=full))
    for tp in rec.tapes:
        for i, call in enumerate(tp.gradients):
            if call.error is not None:
                out.append(failed_call(rec, tp, i, names[tp.id]))
    return out + [_alert_callout(rec, alert) for alert in rec.alerts]


def _alert_callout(rec: Recording, alert) -> Callout:
    """A NaN or an Inf, shown in the view of the first gradient call of a tape that recorded
    its op; an op of the backward pass, in its own gradient call's view."""
    op = rec.op(alert.op) if alert.op is not None else None
    tapes_of = op.tapes if op is not None else []
    shown = next((f"call:{t}:0" for t in tapes_of for tp in rec.tapes if tp.id == t and tp.gradients),
                 f"tape:{tapes_of[0]}" if tapes_of else view.ALL_OPS)
    backward = op is not None and op.phase == BACKWARD and op.call is not None
    if backward:   # the gradient call that ran it: same line, same index on its tape
        shown = next((f"call:{tp.id}:{op.call}" for tp in rec.tapes
                      if op.call < len(tp.gradients) and tp.gradients[op.call].line == op.line), view.ALL_OPS)
    return Callout(problems.alert_text(rec, alert), shown, alert.tensor, alert.line, backward, file=alert.file)


def failed_call(rec: Recording, tp, index: int, tape_name: str) -> Callout:
    """A gradient call that raised, shown on the call before it that worked: for a
    non-persistent tape, the call after which the tape freed its recording."""
    call = tp.gradients[index]
    worked = [i for i in range(index) if tp.gradients[i].error is None]
    if worked and not tp.persistent:
        before = tp.gradients[worked[-1]]
        return Callout(problems.failed_words(rec, call, tape_name, freed_after=before),
                       view.call_view(tp, worked[-1]), (before.target or [None])[0], before.line,
                       file=before.file)
    return Callout(problems.failed_words(rec, call, tape_name), f"call:{tp.id}:{index}", None, call.line,
                   file=call.file)


def error_called_out(rec: Recording) -> bool:
    """Whether the run's error is a gradient call's that a callout already states (a second
    gradient on a non-persistent tape): its full box would repeat it above the graph."""
    err = rec.error
    return err is not None and err.line is not None and any(
        call.error is not None and call.line == err.line and (call.file or None) == (err.file or None)
        for tp in rec.tapes for call in tp.gradients)


def opening(rec: Recording) -> dict:
    """The view state a fresh run opens on: the lesson's view, and the first callout's
    node picked (ringed on the graph, open in the inspector) when that view shows it."""
    opened = view.default_view(rec)
    first = next((c for c in callouts(rec) if c.view == opened), None)
    state = {"view": opened, "backward": False, "fold": True, "plumbing": False, "unfold": []}
    if first is not None and first.view == opened:
        state.update(backward=first.backward, focus=first.tensor)
    return state
