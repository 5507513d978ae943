"""What the debugger page shows, as plain values: the views a recording offers and the one it
opens on, the pickers' choices, the drawn ops in the order they ran. Its sentences come from
words/, given what a view draws (draw.graph's walk) as plain data. No Streamlit, no TensorFlow.
"""
from __future__ import annotations

from typing import Optional

import networkx as nx

from ..draw import graph
from ..recording import Recording
from ..words import eager_mode, picture, sentences, tapes, values

ALL_OPS = "all"


def kept(rec: Recording, tp) -> bool:
    """Whether a tape still has ops in the recording: a long loop's early steps lose theirs
    to the op bound, and a picture of them would be empty. A tape that recorded none (its
    input never watched) is kept: its picture is the block's ops it did not record."""
    return not tp.ops or any(rec.op(i) is not None for i in tp.ops)


def _openable(rec: Recording) -> list:
    """The tapes a view may open on, in program order: those that kept their ops (else all),
    and of the tapes one `with` line opened (a loop's steps) only the newest."""
    live = [tp for tp in rec.tapes if kept(rec, tp)] or list(rec.tapes)
    newest, answered = {}, set()
    for tp in live:   # a step the time limit cut before its gradient call is no lesson: the one before
        key = (tp.file, tp.line)
        ran = any(c.error is None for c in tp.gradients)
        if ran or key not in answered:
            newest[key] = tp.id
        if ran:
            answered.add(key)
    return [tp for tp in live if newest[(tp.file, tp.line)] == tp.id]


def default_tape(rec: Recording) -> Optional[int]:
    """The first outermost tape that kept its ops (in a loop, its newest step): what it
    recorded is the story; every op adds the machinery."""
    return next((tp.id for tp in _openable(rec) if tp.parent is None), None)


def view_choices(rec: Recording) -> list:
    """[(key, label)]: each gradient call (the lesson), then what each tape recorded, then every op."""
    names = tapes.tape_names(rec)
    out = []
    for tp in rec.tapes:
        gone = "" if kept(rec, tp) or not tp.ops else tapes.DROPPED
        if together := graph.calls_together(tp):
            calls = graph.gradient_call(rec, tp.id, graph.ALL_CALLS)
            out.append((f"calls:{tp.id}", tapes.together_words(rec, tp, names[tp.id], calls, together) + gone))
        for i, call in enumerate(tp.gradients):
            out.append((f"call:{tp.id}:{i}", tapes.call_words(rec, call, names[tp.id], tp.id, i) + gone))
    for tp in rec.tapes:
        out.append((f"tape:{tp.id}", tapes.recorded_words(names[tp.id], tapes.recorded_ops(rec, tp))))
    out.append((ALL_OPS, tapes.EVERY_OP))
    return out


def call_choices(rec: Recording) -> list:
    """[(tape id, call index, label)] for every gradient call that ran."""
    return graph.gradient_calls(rec)


def call_view(tp, index: int) -> str:
    """The view a call opens in: with the calls that share its target, else its own."""
    return f"calls:{tp.id}" if index in graph.calls_together(tp) else f"call:{tp.id}:{index}"


def default_view(rec: Recording) -> str:
    """Among the tapes that kept their ops (a loop's newest step): a gradient call with a None
    result; else the outermost tape's last call (higher order: the outer one); else the first
    tape; else every op."""
    live = _openable(rec)
    for tp in live:
        for i, call in enumerate(tp.gradients):
            if any(r.grad is None for r in call.results):
                return call_view(tp, i)
    for tp in sorted(live, key=lambda t: t.parent is not None):
        ran = [i for i, c in enumerate(tp.gradients) if c.error is None]   # not a call that failed
        if ran:
            return call_view(tp, ran[-1])
    first = default_tape(rec)
    return f"tape:{first}" if first is not None else ALL_OPS


def parse_view(key: Optional[str]):
    """(tape id or None, call index or None) of a view key."""
    parts = (key or ALL_OPS).split(":")
    if parts[0] == "calls":
        return int(parts[1]), graph.ALL_CALLS
    if parts[0] == "call":
        return int(parts[1]), int(parts[2])
    if parts[0] == "tape":
        return int(parts[1]), None
    return None, None


def node_choices(G: nx.DiGraph, limit: int = 2000, keep: Optional[str] = None) -> list:
    """[(node, label)] for a picker: named tensors first, then everything in run order.

    At most `limit` (plus `keep`): a 30,000-entry list would slow every rerun, and
    clicking the chart reaches any node anyway."""
    def key(item):
        node, data = item
        return (data.get("name") is None, data.get("order", -1), node)

    out = []
    for node, data in sorted(G.nodes(data=True), key=key):
        label = data.get("label") or node
        kind = "layer" if data.get("kind") == graph.GROUP else data.get("kind", "")
        where = f", {node_place(G, node)}" if data.get("line") is not None else ""
        if len(out) < limit or node == keep:
            out.append((node, f"{label}  ({kind} {node}{where})"))
    return out


def node_for_tensor(rec: Recording, G: nx.DiGraph, tensor_id: int) -> Optional[str]:
    """The node that shows a tensor: its own, else its producer's (op or layer group)."""
    node = graph.tensor_node(tensor_id)
    if node in G:
        return node
    info = rec.tensor(tensor_id)
    return node_for_op(G, info.producer) if info is not None and info.producer is not None else None


def node_for_op(G: nx.DiGraph, op_id: int) -> Optional[str]:
    node = graph.op_node(op_id)
    if node in G:
        return node
    for n, data in G.nodes(data=True):
        if data.get("kind") == graph.GROUP and op_id in data.get("members", ()):
            return n
    return None


def node_place(G: nx.DiGraph, node: str) -> str:
    """"line 15", or "line 15 of mylib/model.py" for a node whose line is in another file."""
    d = G.nodes[node]
    return values.place_words(G.graph.get("program"), d.get("file"), d.get("line"))


def step_nodes(G: nx.DiGraph) -> list:
    """The drawn op nodes (ops, folds, layers) in the order they first ran: forward, then backward."""
    return [n for n, _ in sorted(((n, d) for n, d in G.nodes(data=True) if d.get("kind") != "tensor"),
                                 key=lambda item: (item[1].get("order", 0), item[0]))]


def revealed(G: nx.DiGraph, upto: str) -> set:
    """What has run by the time op node `upto` runs: earlier ops, their outputs, and the inputs."""
    last = G.nodes[upto].get("order", 0)
    return {n for n, d in G.nodes(data=True) if d.get("order", -1) <= last}


# -- the words over a view: what it draws, from draw.graph's walk, handed to words/ ----------

def sentence(rec: Recording, view_key: str) -> str:
    """One sentence (markdown) saying what the view's picture shows: which tape recorded
    what, and the gradients it gives, as numbers where they are small."""
    tape, call = parse_view(view_key)
    if tape is None:
        return eager_mode.every_op_sentence(rec)
    tp = next(t for t in rec.tapes if t.id == tape)
    chosen = graph.gradient_call(rec, tape, call) if call is not None else None
    drawn = set(graph.calls_together(tp)) if call == graph.ALL_CALLS else {call}
    return sentences.sentence(rec, tp, chosen, traced=graph.traced_function(rec, tape), drawn=drawn)


def legend_text(rec: Recording, view_key: str) -> str:
    """The picture's legend in words (markdown)."""
    tape, call = parse_view(view_key)
    traced = graph.traced_function(rec, tape)
    chosen = graph.gradient_call(rec, tape, call) if call is not None and not traced else None
    return picture.legend(rec, chosen, traced)


def step_words(G: nx.DiGraph, node: str) -> str:
    """The op node a step reached, in markdown."""
    d = G.nodes[node]
    place = node_place(G, node) if d.get("line") is not None else ""
    return picture.step_words(d.get("label", node), d.get("phase", "forward"), place)
