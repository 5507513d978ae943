"""A loop drawn once, not once per step: ops of one type from one line fold into one node,
and the tensors its steps made again and again stack as the newest. No TensorFlow here."""
from __future__ import annotations

from collections import Counter

from ..recording import VARIABLE, Recording

FOLD_AT = 5               # this many ops of one type from one line (a loop) draw as one node
FOLD_PREFIX = "r:"


def fold_node(op) -> str:
    """The node of an op's fold: its phase, line and type (or tf.function)."""
    return f"{FOLD_PREFIX}{op.phase}:{op.line}:{op.function or op.type}"


def repeated(ops: list) -> set:
    """The folds of these ops with FOLD_AT ops or more: same type, same line, same phase."""
    counts = Counter(fold_node(op) for op in ops if op.line is not None)
    return {node for node, n in counts.items() if n >= FOLD_AT}


def stacks(rec: Recording, ops: list, alias, shows, producer: dict, consumers: dict, keep: set) -> dict:
    """{tensor: the tensor drawn for it}, for tensors made FOLD_AT times or more by one node and
    used by the same nodes, with one name and shape (a loop's per-step results): the newest
    stands for them all. A source, target or watched tensor is never folded."""
    groups: dict = {}
    seen = set()
    for op in ops:
        for t in map(alias, [*op.inputs, *op.outputs]):
            if t in seen or t in keep:
                continue
            seen.add(t)
            info = rec.tensor(t)
            if info is None or info.kind == VARIABLE or not shows(t):
                continue
            key = (producer.get(t), frozenset(consumers.get(t, ())), info.name, tuple(info.shape), info.line)
            groups.setdefault(key, []).append(t)
    out = {}
    for members in groups.values():
        if len(members) >= FOLD_AT:
            newest = max(members)
            out.update((t, newest) for t in members)
    return out
