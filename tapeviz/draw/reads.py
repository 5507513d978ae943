"""What the recording says about a tape's block, for the walk (graph.py): variables' reads
folded into the variable, the backward pass's pass-through reshaping, variables as the block
read them, the block's lines and ops, and what lies on a gradient call's path."""
from __future__ import annotations

import dataclasses
from typing import Optional

import networkx as nx

from ..recording import BACKWARD, FORWARD, VARIABLE, GradientCall, Recording
from ..words.spelling import READ_VARIABLE

# The backward pass's shape moves (see passed_through): the same numbers in another shape,
# or the shape itself. Drawn with plumbing on.
SHAPES = frozenset({"Shape", "ShapeN", "Size", "Rank", "BroadcastGradientArgs"})
GRADIENT_PLUMBING = SHAPES | {"Reshape", "Tile", "BroadcastTo", "ExpandDims", "Squeeze", "Identity"}


def read_aliases(rec: Recording):
    """Fold each ReadVariableOp into its variable: students think of `w`, not of its read."""
    target = {}
    folded = set()
    for op in rec.ops:
        if op.type == READ_VARIABLE and op.inputs:
            folded.add(op.id)
            for t in op.outputs:
                target[t] = op.inputs[0]

    def alias(t: int) -> int:
        seen = 0
        while t in target and seen < 100:   # reads of reads; the bound guards a malformed loop
            t = target[t]
            seen += 1
        return t

    return alias, folded


def passed_through(rec: Recording, alias):
    """(alias, hidden ops): the backward pass's reshaping folded away like a variable's read.
    A gradient function reads shapes and reshapes, tiles and broadcasts the gradient back to
    its input's shape (tf.norm's backward is 9 ops, 3 of them arithmetic): a student follows
    the arithmetic. Each such op's output is drawn as its first input, Shape ops not at all."""
    target, hidden = {}, set()
    for op in rec.ops:
        if op.phase == BACKWARD and op.type in GRADIENT_PLUMBING:
            hidden.add(op.id)
            if op.type not in SHAPES and op.inputs:
                for t in op.outputs:
                    target[t] = op.inputs[0]

    def passed(t: int) -> int:
        t, seen = alias(t), 0
        while t in target and seen < 100:   # a reshape of a tile; the bound guards a malformed loop
            t = alias(target[t])
            seen += 1
        return t

    return passed, hidden


def variables_as_read(rec: Recording, tape: int, block, upto_op: Optional[int], alias) -> dict:
    """{variable: its record with the value its first read in this tape's view gave}. A
    variable's own record holds the value it was first seen with; in a training loop's
    step 3 the student must see w as step 3 read it, beside step 3's gradient."""
    out, assigned = {}, set()
    for op in rec.ops:
        if (op.type != READ_VARIABLE or not op.inputs or not op.outputs
                or upto_op is not None and op.id > upto_op
                or not (tape in op.tapes or in_block(op, block))):
            continue
        variable = alias(op.inputs[0])
        read, info = rec.tensor(op.outputs[0]), rec.tensor(variable)
        if variable in out or read is None or info is None or info.kind != VARIABLE:
            continue
        if read.value is not None or read.stats is not None:
            out[variable] = dataclasses.replace(info, value=read.value, stats=read.stats)
    # A variable no op read (its handle went straight into a tf.function): the value last
    # assigned to it before the view's ops, so `x = 3` still shows.
    first = block[2] if block else None
    for op in rec.ops:
        if first is not None and op.id >= first or upto_op is not None and op.id > upto_op:
            break
        if op.type != "AssignVariableOp" or len(op.inputs) < 2:
            continue
        variable = alias(op.inputs[0])
        value, info = rec.tensor(op.inputs[1]), rec.tensor(variable)
        if (variable in out and variable not in assigned or value is None or info is None
                or info.kind != VARIABLE or info.value is not None):
            continue
        if value.value is not None or value.stats is not None:
            out[variable] = dataclasses.replace(info, value=value.value, stats=value.stats)
            assigned.add(variable)
    return out


def block_lines(rec: Recording, tape: Optional[int]):
    """(first line, last line, first op id, end op id) of the tape's `with` block. The op ids
    bound it in time: in a loop, the same lines ran once per step, for other steps' tapes."""
    tp = next((t for t in rec.tapes if t.id == tape), None)
    if tp is None or tp.line is None:
        return None
    spans = tp.recording_spans
    first = spans[0][0] if spans else (min(tp.ops) if tp.ops else None)
    end = spans[-1][1] if spans and spans[-1][1] is not None else None
    return (tp.line, tp.end_line if tp.end_line is not None else tp.line, first, end)


def in_block(op, block) -> bool:
    """Whether a forward op ran on the block's lines while the block ran (see block_lines)."""
    if block is None or op.phase != FORWARD or op.line is None or not block[0] <= op.line <= block[1]:
        return False
    first, end = block[2], block[3]
    return (first is None or op.id >= first) and (end is None or op.id < end)


def path_tensors(call: GradientCall, ops: list, alias) -> set:
    """The tensors between the call's sources and its target.

    The recorder's flow says so; when it is empty (see call.note), fall back to
    what reaches the target from a source through the shown ops.
    """
    ends = {alias(t) for t in call.sources} | {alias(t) for t in call.target}
    if call.flow:
        return {alias(e.tensor) for e in call.flow} | ends
    g = nx.DiGraph()
    for op in ops:
        for i in op.inputs:
            for o in op.outputs:
                g.add_edge(alias(i), alias(o))
    sources = [alias(t) for t in call.sources if alias(t) in g]
    targets = [alias(t) for t in call.target if alias(t) in g]
    below = set(sources).union(*(nx.descendants(g, s) for s in sources)) if sources else set()
    above = set(targets).union(*(nx.ancestors(g, t) for t in targets)) if targets else set()
    return (below & above) | ends


def roles(call: Optional[GradientCall], alias) -> dict:
    """{tensor: "source" or "target"} of the call (a target that is also a source is its target)."""
    if call is None:
        return {}
    roles = {alias(t): "source" for t in call.sources}
    roles.update({alias(t): "target" for t in call.target})
    return roles


def none_reasons(call: GradientCall, alias) -> dict:
    """{source tensor: why its gradient is None}, for the call's None gradients."""
    return {alias(r.source): r.none_reason or "the gradient is None" for r in call.results if r.grad is None}
