"""Recording -> networkx graph of what ran: tensor and op nodes, grouped by Keras layer.

Walking only: which nodes and edges a View draws (reads.py reads the tape's block for it,
fold.py folds loops); labels.py then writes their words, layout.py places them and
figures.py draws them. No TensorFlow here.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import networkx as nx

from ..recording import BACKWARD, CONSTANT, FORWARD, VARIABLE, GradientCall, Recording
from ..words.spelling import READ_VARIABLE
from ..words.values import tensor_name
from . import fold, labels, reads
from .nodes import (BACKWARD_OP, CONSTANT_NODE, FORWARD_OP, GROUP, INTERMEDIATE, REPEAT, UNRECORDED_OP,
                    VARIABLE_NODE, WATCHED_CONSTANT)
from .options import View

TAPE_SCOPE_PREFIX = "gradient_tape/"
# Variable bookkeeping a student did not write: hidden unless asked for (reads are folded
# into their variable instead, see reads.read_aliases).
PLUMBING = frozenset({"VarHandleOp", "AssignVariableOp", "VarIsInitializedOp", "DestroyResourceOp",
                      "NoOp", "_EagerConst"})
GROUP_ABOVE_OPS = 150     # bigger recordings open grouped by layer: a 300-op step is unreadable flat
ALL_CALLS = "all"         # as a call index: every call of a tape that shares its target, on one picture

# The graph's own wall, behind the recording gate's: past MAX_NODES nodes the drawing stops
# and says so (a real 20,000-op recording unfolded and ungrouped is ~35,000 nodes, ~230 MiB
# and a 12 MB figure). labels.MAX_TEXT bounds their words the same way.
MAX_NODES = 50_000


def tensor_node(tensor_id: int) -> str:
    return f"t{tensor_id}"


def op_node(op_id: int) -> str:
    return f"o{op_id}"


def group_node(key: str, phase: str) -> str:
    return f"g:{phase}:{key}"


def collapsed(node: str) -> bool:
    """A node standing for several ops: a layer group or a fold of repeats."""
    return node.startswith("g:") or node.startswith(fold.FOLD_PREFIX)


def group_key(scope: Optional[str]) -> Optional[str]:
    """The Keras layer an op belongs to: the first two parts of its scope.

    A gradient's ops live under "gradient_tape/<forward scope>/...", so stripping
    that prefix gives the forward and backward ops of one layer the same key.
    """
    if not scope:
        return None
    if scope.startswith(TAPE_SCOPE_PREFIX):
        scope = scope[len(TAPE_SCOPE_PREFIX):]
    parts = [p for p in scope.split("/") if p]
    return "/".join(parts[:2]) or None


def group_keys(rec: Recording) -> list:
    """The layers a recording has, in order of first appearance."""
    seen = {}
    for op in rec.ops:
        if op.type in PLUMBING or op.type == READ_VARIABLE:
            continue    # a variable's own scope ("Variable") is no layer
        key = group_key(op.scope)
        if key and key not in seen:
            seen[key] = None
    return list(seen)


def opens_grouped(rec: Recording) -> bool:
    """Whether a recording is first drawn one node per layer (the page and `tapeviz.figure`)."""
    return len(rec.ops) > GROUP_ABOVE_OPS and bool(group_keys(rec))


def build(rec: Recording, view: View = View(), upto_op: Optional[int] = None) -> nx.DiGraph:
    """The graph of what ran, as `view` chooses it: edges tensor -> op (input) and
    op -> tensor (output), then each node's words (labels.py).

    view.tape: show only the ops that tape recorded (None: every op). view.group: one node
    per Keras layer and phase, except the group keys (or group node ids) in view.expand.
    view.call: index of a gradient call of the tape; its sources get a `none_reason` where
    the gradient was None, and view.path_only keeps only what lies between its sources and
    target. upto_op: only ops with id <= upto_op. view.fold: ops of one type repeated fold.FOLD_AT
    times or more from one line draw as one node (ids in view.unfold unfold it).
    view.plumbing: also draw variable bookkeeping (VarHandleOp, AssignVariableOp, ...) and
    the backward pass's reshaping (reads.GRADIENT_PLUMBING, else passed through). With a call,
    ops that ran in the tape's block but were not recorded are drawn too (an unwatched input
    is exactly why): category UNRECORDED_OP; view.backward: also the ops the call itself ran
    (where a NaN born in the backward pass is).
    """
    walk = _walk(rec, view, upto_op)
    # nodes' lines are said with their file when it is another; a traced graph: shapes, no values
    G = nx.DiGraph(program=rec.program, traced=traced_function(rec, view.tape))
    _add_ops(G, walk)
    _add_unused(G, walk, upto_op)
    _mark(G, walk)
    labels.label(G, rec, walk.chosen, walk.alias, walk.as_read)
    labels.bound(G)
    return G


@dataclasses.dataclass
class _Walk:
    """What a view walks: its ops, the nodes they draw as, and which of their tensors show."""
    rec: Recording
    tape: Optional[int]
    alias: Callable
    chosen: Optional[GradientCall]
    ops: list
    on_path: Optional[set]
    roles: dict
    watched: set
    as_read: dict
    node_of: dict
    producer: dict
    consumers: dict
    kept_for_gradient: set
    order: dict
    stacked: dict = dataclasses.field(default_factory=dict)

    def shows(self, t: int) -> bool:
        if self.on_path is not None and t not in self.on_path:
            return False
        if t in self.roles or t in self.watched:
            return True
        info = self.rec.tensor(t)
        if info is not None and info.kind == VARIABLE:
            return True
        if info is not None and info.name and t not in self.consumers:
            return True     # a named result nothing used: what the user asked for
        if t in self.kept_for_gradient and t not in self.consumers:
            return False
        home = self.producer.get(t)
        if home is not None and home.startswith(fold.FOLD_PREFIX):
            return False    # one of a loop's thousand partial results: the fold node says their range
        # A tensor made and used inside one collapsed layer is that layer's business;
        # so is an unnamed constant only it reads (shape arguments, epsilons).
        used_by = self.consumers.get(t, set())
        if home is None and info is not None and info.kind == CONSTANT and not info.name and len(used_by) == 1:
            home = next(iter(used_by))
        return not (home and collapsed(home) and used_by <= {home})

    def shown(self, t: int) -> bool:
        return self.shows(t) and self.stacked.get(t, t) == t


def _walk(rec: Recording, view: View, upto_op: Optional[int]) -> _Walk:
    """The view's ops and where each of them and of their tensors goes."""
    alias, chosen, ops, block = _chosen_ops(rec, view, upto_op)
    on_path = None
    if view.path_only:
        on_path = reads.path_tensors(chosen, ops, alias)
        ops = [op for op in ops
               if any(alias(t) in on_path for t in op.inputs) and any(alias(t) in on_path for t in op.outputs)]
    tape = view.tape
    node_of = _op_nodes(ops, view.group, {*view.expand, *view.unfold}, view.fold)
    consumers: dict = {}
    for op in ops:
        for t in op.inputs:
            consumers.setdefault(alias(t), set()).add(node_of[op.id])
    walk = _Walk(
        rec=rec, tape=tape, alias=alias, chosen=chosen, ops=ops, on_path=on_path, roles=reads.roles(chosen, alias),
        watched={alias(t) for tp in rec.tapes if tape is None or tp.id == tape for t in tp.watched},
        as_read=reads.variables_as_read(rec, tape, block, upto_op, alias) if tape is not None else {},
        node_of=node_of, producer={alias(t): node_of[op.id] for op in ops for t in op.outputs},
        consumers=consumers, order={op.id: i for i, op in enumerate(rec.ops)},
        # A tf.function's forward call under a tape returns, after its results, the values its
        # gradient will need (x, 2 for x * x + 2 * x): a student's picture has no use for them.
        kept_for_gradient={alias(t) for op in ops if op.function and op.phase == FORWARD for t in op.outputs[1:]})
    if view.fold:
        # A loop's steps make the same tensor again and again ("logits" of every batch, between
        # the same two layers): fold.FOLD_AT or more draw as the newest one, "×N".
        walk.stacked = fold.stacks(rec, ops, alias, walk.shows, walk.producer, consumers,
                               set(walk.roles) | walk.watched)
    return walk


def _chosen_ops(rec: Recording, view: View, upto_op: Optional[int]):
    """(alias, the gradient call, the ops the view draws, the tape's block)."""
    alias, folded = reads.read_aliases(rec)
    if view.backward and not view.plumbing:
        alias, passed = reads.passed_through(rec, alias)
        folded = folded | passed
    tape, call = view.tape, view.call
    chosen = gradient_call(rec, tape, call) if call is not None else None
    if view.path_only and chosen is None:
        raise ValueError("path_only needs a gradient call (choose a tape and a call)")
    block = reads.block_lines(rec, tape) if chosen is not None else None
    ran_for = _calls_run(rec, tape, call) if chosen is not None else set()
    ops = [op for op in rec.ops
           if op.id not in folded
           and (view.plumbing or op.type not in PLUMBING)
           and (tape is None or tape in op.tapes or reads.in_block(op, block)
                or view.backward and op.phase == BACKWARD and (op.call, op.line) in ran_for)
           and (upto_op is None or op.id <= upto_op)]
    return alias, chosen, ops, block


def _add_ops(G: nx.DiGraph, walk: _Walk) -> None:
    """Each op's node, the tensors it reads and makes that show, and the edges between."""
    for drawn, op in enumerate(walk.ops):
        if len(G) + len(op.inputs) + len(op.outputs) + 1 > MAX_NODES:
            G.graph["cut"] = (f"Only the first {drawn:,} of these {len(walk.ops):,} ops are drawn: the "
                              f"graph stops at {MAX_NODES:,} nodes. Fold repeated ops, group by "
                              f"layer or choose one tape to see the rest.")
            break
        node = walk.node_of[op.id]
        _add_op(G, op, node, walk.order[op.id])
        producer = walk.producer
        for t in map(walk.alias, op.inputs):
            if walk.shown(t):
                _add_tensor(G, walk, t)
                if producer.get(t) != node:   # a layer reading its own output is no edge between nodes
                    _add_edge(G, tensor_node(t), node)
            elif producer.get(t, "").startswith(fold.FOLD_PREFIX) and producer[t] != node:
                _add_edge(G, producer[t], node)   # a hidden loop result: from the fold that made it
        for t in map(walk.alias, op.outputs):
            if walk.shown(t):
                _add_tensor(G, walk, t)
                _add_edge(G, node, tensor_node(t))
            elif collapsed(node):
                G.nodes[node]["tensors"].append(t)
        if walk.tape is not None and walk.tape not in op.tapes and op.phase == FORWARD and node.startswith("o"):
            G.nodes[node]["category"] = UNRECORDED_OP


def _add_unused(G: nx.DiGraph, walk: _Walk, upto_op: Optional[int]) -> None:
    """Watched tensors and the call's sources and target show even when no op used them:
    an unused source is exactly what a None gradient needs to point at."""
    for t in sorted(walk.watched | set(walk.roles)):
        if len(G) >= MAX_NODES:
            break
        info = walk.rec.tensor(t)
        made = upto_op is None or info is None or info.producer is None or info.producer <= upto_op
        if made and walk.shown(t):
            _add_tensor(G, walk, t)


def _mark(G: nx.DiGraph, walk: _Walk) -> None:
    """The call's sources and target, the newest of a loop's stacked tensors, and where the
    gradient was None."""
    for t, role in walk.roles.items():
        if tensor_node(t) in G:
            G.nodes[tensor_node(t)]["role"] = role
    stacks: dict = {}
    for t, newest in walk.stacked.items():
        stacks.setdefault(newest, []).append(t)
    for t, members in stacks.items():
        if tensor_node(t) in G:
            G.nodes[tensor_node(t)]["stacked"] = len(members)
            G.nodes[tensor_node(t)]["stack"] = sorted(members)
    if walk.chosen is not None:
        for t, reason in reads.none_reasons(walk.chosen, walk.alias).items():
            if tensor_node(t) in G:
                G.nodes[tensor_node(t)]["none_reason"] = reason


def gradient_call(rec: Recording, tape: Optional[int], call) -> GradientCall:
    """tape.gradients[call]; with tape None, the only tape's call. call ALL_CALLS: the calls
    `calls_together` finds, as one call (their sources, results and flow side by side)."""
    if tape is None:
        if len(rec.tapes) != 1:
            raise ValueError("choose a tape: the recording has %d tapes" % len(rec.tapes))
        tape = rec.tapes[0].id
    tp = next((t for t in rec.tapes if t.id == tape), None)
    if tp is None:
        raise KeyError(f"no tape {tape} in the recording")
    if call != ALL_CALLS:
        return tp.gradients[call]
    calls = [tp.gradients[i] for i in calls_together(tp)]
    if not calls:
        raise ValueError(f"tape {tape} has no two gradient calls of one target")
    sources, results, flow = [], [], {}
    for c in calls:
        sources += [t for t in c.sources if t not in sources]
        results += [r for r in c.results if r.source not in {x.source for x in results}]
        for entry in c.flow:   # one target: d target / d tensor is the same in every call
            flow.setdefault(entry.tensor, entry)
    return GradientCall(line=calls[0].line, kind=calls[0].kind, target=list(calls[0].target), sources=sources,
                        results=results, flow=list(flow.values()), file=calls[0].file)


def calls_together(tp) -> list:
    """The indices of a tape's gradient calls that ran and share the first such call's target
    (a persistent tape asked for dz/dx, dz/dw, dz/db): drawn together they show every
    gradient of one target at once. Empty when fewer than two."""
    ran = [i for i, c in enumerate(tp.gradients) if c.error is None and c.kind == "gradient"]
    same = [i for i in ran if tp.gradients[i].target == tp.gradients[ran[0]].target] if ran else []
    return same if len(same) > 1 else []


def _calls_run(rec: Recording, tape: Optional[int], call) -> set:
    """{(call index, line)} of the gradient calls a view draws: a backward op carries both."""
    tp = next((t for t in rec.tapes if t.id == tape), None) if tape is not None else rec.tapes[0]
    indices = calls_together(tp) if call == ALL_CALLS else [call]
    return {(i, tp.gradients[i].line) for i in indices}


def gradient_calls(rec: Recording) -> list:
    """Every gradient call as (tape id, call index, label) for a chooser."""
    alias, _ = reads.read_aliases(rec)
    out = []
    for tp in rec.tapes:
        for i, c in enumerate(tp.gradients):
            target = ", ".join(tensor_name(rec, alias(t)) for t in c.target)
            sources = ", ".join(tensor_name(rec, alias(t)) for t in c.sources)
            line = f"line {c.line}: " if c.line is not None else ""
            out.append((tp.id, i, f"tape {tp.id}, {line}{c.kind}({target}, [{sources}])"))
    return out


def traced_function(rec: Recording, tape: Optional[int]) -> Optional[str]:
    """The tf.function whose graph holds what `tape` shows, when its ops were traced (built
    into the graph, never run one by one: shapes and dtypes, no values); else None."""
    tp = next((t for t in rec.tapes if t.id == tape), None) if tape is not None else None
    if tp is None or not tp.function:
        return None
    return next((op.traced for i in tp.ops if (op := rec.op(i)) is not None and op.traced),
                None)


def _op_nodes(ops: list, group: bool, expand: set, folds: bool = True) -> dict:
    """op id -> the node that shows it: its own, its layer's group for its phase, or the
    fold of its repeats (fold.repeated)."""
    repeated = fold.repeated(ops) if folds else set()
    node_of = {}
    for op in ops:
        # a variable's own scope ("Variable") is no Keras layer
        key = group_key(op.scope) if group and op.type not in PLUMBING else None
        node = group_node(key, op.phase) if key else None
        if node is None or key in expand or node in expand:
            node = op_node(op.id)
            if op.line is not None and fold.fold_node(op) in repeated and fold.fold_node(op) not in expand:
                node = fold.fold_node(op)
        node_of[op.id] = node
    return node_of


def _add_edge(G: nx.DiGraph, u: str, v: str) -> None:
    if u == v:
        return     # a loop feeding itself: the fold's label says so
    # Edges between layer groups aggregate: one edge, counting what it stands for.
    if G.has_edge(u, v):
        G.edges[u, v]["count"] += 1
    else:
        G.add_edge(u, v, count=1)


def _add_op(G: nx.DiGraph, op, node: str, order: int) -> None:
    if node.startswith("o"):
        G.add_node(node, kind="op", category=BACKWARD_OP if op.phase == BACKWARD else FORWARD_OP,
                   line=op.line, file=op.file, order=order, phase=op.phase, ref=op.id, group=group_key(op.scope),
                   scope=op.scope, op_type=op.function or op.type)
        return
    if node.startswith(fold.FOLD_PREFIX):
        if node not in G:
            G.add_node(node, kind=REPEAT, category=REPEAT, line=op.line, file=op.file, order=order,
                       phase=op.phase, ref=None, group=None, scope=op.scope, members=[], tensors=[],
                       op_type=op.function or op.type)
        G.nodes[node]["members"].append(op.id)
        return
    if node not in G:
        key = group_key(op.scope)
        G.add_node(node, kind=GROUP, category=GROUP, line=op.line, file=op.file, order=order, phase=op.phase,
                   ref=None, group=key, scope=key, members=[], tensors=[])
    G.nodes[node]["members"].append(op.id)


def _add_tensor(G: nx.DiGraph, walk: _Walk, t: int) -> None:
    node = tensor_node(t)
    if node in G:
        return
    rec = walk.rec
    info = walk.as_read.get(t) or rec.tensor(t)
    if info is None:    # the recording's bounds dropped it
        G.add_node(node, kind="tensor", category=INTERMEDIATE, name=None, line=None, order=-1,
                   phase=FORWARD, ref=t)
        return
    producer = rec.op(info.producer) if info.producer is not None else None
    if info.kind == VARIABLE:
        category = VARIABLE_NODE
    elif t in walk.watched:
        category = WATCHED_CONSTANT
    elif info.kind == CONSTANT:
        category = CONSTANT_NODE
    else:
        category = INTERMEDIATE
    G.add_node(node, kind="tensor", category=category, name=info.name,
               line=info.line if info.line is not None else getattr(producer, "line", None),
               file=info.file if info.line is not None else getattr(producer, "file", None),
               order=walk.order.get(info.producer, -1), phase=getattr(producer, "phase", FORWARD), ref=t)
