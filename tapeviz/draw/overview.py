"""`tapeviz.figure(rec)`: one plotly figure of a recording, drawn as the debugger page draws
it (a tape's op graph, or the gradient flow of one of its calls). No TensorFlow here.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from . import figures, gradient_flow, graph, layout, run_figures
from .options import View
from .. import recording_gate as gate
from ..recording import Recording


def as_recording(rec) -> Recording:
    """A Recording from a capture (`rec.recording`), a Recording, its dict, or a JSON path;
    a dict or a file is read through the gate (recording_gate.read), as the app reads one."""
    rec = getattr(rec, "recording", rec)
    if isinstance(rec, Recording):
        return rec
    if isinstance(rec, dict):
        return gate.read(rec, "the recording").recording
    if isinstance(rec, (str, Path)):
        path = Path(rec)
        return gate.read(path.read_bytes(), path.name).recording
    raise TypeError(f"not a recording: {type(rec).__name__} (nothing recorded yet?)")


def figure(rec, tape: Optional[int] = None, call: Optional[int] = None,
           group: Optional[bool] = None, view: str = "graph", width: Optional[int] = None,
           height: Optional[int] = None):
    """The op graph of `tape` (default: the first outermost tape; every op when there is
    none), coloured by the gradient flow of its `call`-th gradient call when given. `group`
    folds Keras layers into one node each (default: when there are many ops). `width` and
    `height` (px, both or neither): the figure's size, its labels placed for it (more fit
    than in the page's narrow column). `view="run"`: the whole run instead, loss and gradient
    norms per step (run_figures.py)."""
    rec = as_recording(rec)
    if view == "run":
        return run_figures.run_figure(rec)
    if view != "graph":
        raise ValueError(f"view is 'graph' or 'run', not {view!r}")
    if tape is None:
        tape = next((tp.id for tp in rec.tapes if tp.parent is None), None)
    if group is None:
        group = graph.opens_grouped(rec)
    G = graph.build(rec, View(tape=tape, group=group, call=call))
    flow = gradient_flow.flow_norms(rec, tape, call, G) if call is not None else None
    what = f"tape {tape}" if tape is not None else "every op"
    title = f"{what}: gradient flow of call {call}" if call is not None else f"op graph of {what}"
    if G.graph.get("traced"):
        title += f" (traced in tf.function {G.graph['traced']}: its graph, shapes and dtypes, no values)"
    size = (width, height) if width is not None and height is not None else None
    return figures.op_graph(G, layout.layered(G), flow=flow, title=title, size=size)
