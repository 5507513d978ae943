"""A comparison in words: where two runs first part, what an edit changed, and the summary
`tapeviz diff` prints. It reads match.py's Comparison by its fields (words imports no other
room). No TensorFlow, no Streamlit."""
from __future__ import annotations

from typing import Optional

from ..recording import Recording
from .spelling import python_name
from .values import number_text, numbers_text, tensor_name

ADDED, REMOVED = "added", "removed"


def side_names(step_a: Optional[int], step_b: Optional[int], same_file: bool = False) -> tuple:
    """What the page and the command line call the two sides: "step 0" and "step 1" for two
    steps of one run, else "A" and "B"."""
    if step_a is not None and step_b is not None and same_file:
        return f"step {step_a}", f"step {step_b}"
    return ("A" + (f" (step {step_a})" if step_a is not None else ""),
            "B" + (f" (step {step_b})" if step_b is not None else ""))


def op_words(row) -> str:
    """`tf.math.log` as the line wrote it; a tf.function by its name."""
    return f"`{python_name(row.op, row.code)}`"


def where_words(row) -> str:
    line = row.line_b if row.line_a is None else row.line_a
    if row.line_a is not None and row.line_b is not None and row.line_a != row.line_b:
        return f"line {row.line_a} (line {row.line_b} after the edit)"
    return f"line {line}" if line is not None else "a line outside your files"


def tensor_value(rec: Recording, t: Optional[int]) -> str:
    """A tensor's value as Python prints it, else its range; "None" for no tensor."""
    if t is None:
        return "None"
    info = rec.tensor(t)
    if info is None:
        return "?"
    if info.value is not None:
        return numbers_text(info.value)
    s = info.stats
    if s is None:
        return "(no value recorded)"
    if s.nan:
        return f"{s.nan} NaN"
    return f"{number_text(s.min)}..{number_text(s.max)}"


def divergence(cmp, names: tuple) -> str:
    """The first divergence in one sentence: "`y` first differs at line 7 (`tf.math.log`):
    max relative difference 0.4", "step 1 turns NaN at line 7 ...", "the edit removed ..."."""
    row = cmp.first_row()
    if row is None:
        said = (f"{names[0]} and {names[1]} match within rtol {cmp.rtol:g}: "
                f"{len(cmp.rows)} ops, their values and gradients")
        grads = [g for g in cmp.gradients if g.grad_a is not None
                 and isinstance(getattr(cmp.a.tensor(g.grad_a), "value", None), (int, float))][:4]
        if grads:         # the numbers a reader compares: `w`'s gradient 10.0 on both sides
            said += " (" + ", ".join(f"`{g.source}`'s gradient {_grad_text(cmp.a, g.grad_a)}"
                                     for g in grads) + " on both)"
        return said + "."
    what = f"`{row.name}`" if row.name else op_words(row)
    if row.status in (ADDED, REMOVED):
        return _structure(cmp, row, names)
    if row.value_mark in ("nan", "inf"):
        turned = names[1] if row.value_side == "b" else names[0]
        other = names[0] if row.value_side == "b" else names[1]
        return (f"{turned} turns {'NaN' if row.value_mark == 'nan' else 'Inf'} at "
                f"{where_words(row)}: {op_words(row)}{_inputs(cmp, row, row.value_side)}, "
                f"where {other} had {_value_of(cmp, row, 'a' if row.value_side == 'b' else 'b')}.")
    if row.value_mark == "shape":
        return (f"{what} changes shape at {where_words(row)} ({op_words(row)}): "
                f"{row.shape_a} in {names[0]}, {row.shape_b} in {names[1]}.")
    if row.grad_mark in ("none", "nan", "inf") and not (row.value_diff or 0) > cmp.rtol:
        return f"{what}'s gradient at {where_words(row)} ({op_words(row)}) {_grad_change(row, names)}."
    kind = "value" if (row.value_diff or 0) > cmp.rtol else "gradient"
    diff = row.value_diff if kind == "value" else row.grad_diff
    return (f"{what} first differs at {where_words(row)} ({op_words(row)}): max relative "
            f"difference of its {kind} {number_text(diff, 2)} (rtol {cmp.rtol:g}).")


def _structure(cmp, row, names: tuple) -> str:
    gone = row.status == REMOVED
    op = cmp.a.op(row.a) if gone else cmp.b.op(row.b)
    if op is not None and op.function:
        has, lacks = (names[0], names[1]) if gone else (names[1], names[0])
        return (f"{has} ran `{row.op}` at {where_words(row)} as one tf.function call (its ops "
                f"built into a graph, without values); {lacks} ran its ops one by one.")
    said = f"the edit {'removed' if gone else 'added'} {op_words(row)} at {where_words(row)}"
    grad = next((g for g in cmp.gradients if g.beyond(cmp.rtol)), None)
    if grad is not None:
        said += f": `{grad.source}`'s gradient went from {_grad_text(cmp.a, grad.grad_a)} to " \
                f"{_grad_text(cmp.b, grad.grad_b)}"
    return said + "."


def _grad_text(rec: Recording, t: Optional[int]) -> str:
    return tensor_value(rec, t)


def _grad_change(row, names: tuple) -> str:
    if row.grad_mark == "none":
        has = names[1] if row.grad_side == "a" else names[0]
        lacks = names[0] if row.grad_side == "a" else names[1]
        return f"is None in {lacks} (no path to the target) but not in {has}"
    side = names[0] if row.grad_side == "a" else names[1]
    return f"turns {'NaN' if row.grad_mark == 'nan' else 'Inf'} in {side}"


def _inputs(cmp, row, side: str) -> str:
    rec, op_id = (cmp.a, row.a) if side == "a" else (cmp.b, row.b)
    op = rec.op(op_id)
    if op is None or not op.inputs:
        return ""
    return " of " + ", ".join(f"{value_name(rec, t)} = {tensor_value(rec, t)}" for t in op.inputs[:3])


def value_name(rec: Recording, t: int) -> str:
    """A tensor's name; a variable's read goes by the variable's (`w`, not "tensor 16")."""
    info = rec.tensor(t)
    maker = rec.op(info.producer) if info is not None and info.producer is not None else None
    if (info is None or not info.name) and maker is not None and maker.type == "ReadVariableOp" and maker.inputs:
        return tensor_name(rec, maker.inputs[0])
    return tensor_name(rec, t)


def _value_of(cmp, row, side: str) -> str:
    rec, t = (cmp.a, row.tensor_a) if side == "a" else (cmp.b, row.tensor_b)
    return tensor_value(rec, t)


def summary(cmp, names: tuple) -> list:
    """The lines under the sentence: counts of ops, and the gradients that differ."""
    c = cmp.counts
    lines = [f"{len(cmp.rows)} ops: {c.get('same', 0)} match, {c.get('differs', 0)} differ past "
             f"rtol {cmp.rtol:g}, {c.get(REMOVED, 0)} only in {names[0]}, {c.get(ADDED, 0)} only "
             f"in {names[1]}."]
    for r in getattr(cmp, "results", []):
        told = r["mark"] or f"max relative difference {number_text(r['diff'], 2)}"
        lines.append(f"`{r['function']}`'s result `{r['name']}` against the other side's: {told}")
    blind = sum(1 for r in cmp.rows if r.value_mark == "no value")
    if blind:
        lines.append(f"{blind} matched ops have no value on one side (a tf.function's traced graph "
                     f"keeps shapes, not values): matched by place, not by number.")
    for g in cmp.gradients:
        if not g.beyond(cmp.rtol):
            continue
        if g.missing:
            lines.append(f"gradient of `{g.source}` at line {g.line_a or g.line_b}: only in "
                         f"{names[1] if g.missing == 'a' else names[0]}")
            continue
        change = f"{_grad_text(cmp.a, g.grad_a)} -> {_grad_text(cmp.b, g.grad_b)}"
        if g.diff is not None and g.mark is None:
            change += f" (max relative difference {number_text(g.diff, 2)})"
        reason = g.reason_a or g.reason_b
        lines.append(f"gradient of `{g.source}` at line {g.line_a}: {change}"
                     + (f"; None because {reason}" if reason else ""))
    return lines


def mark_words(row, what: str, names: tuple) -> Optional[str]:
    """A row's mark in words: "value NaN in step 1", "gradient None in A"; None for none."""
    mark, side = (row.value_mark, row.value_side) if what == "value" else (row.grad_mark, row.grad_side)
    if mark is None or mark == "no value":
        return None
    said = {"nan": "NaN", "inf": "Inf", "none": "None", "shape": "a new shape"}.get(mark, mark)
    where = names[0] if side == "a" else names[1] if side == "b" else "one side"
    return f"{what} {said} in {where}" if mark != "shape" else f"{what} has {said}"


def first_lines(cmp, names: tuple) -> list:
    """The first divergent op on each side: its op id, line and value, as the inspector shows them."""
    row = cmp.first_row()
    if row is None:
        return []
    out = []
    for name, rec, op_id, t, line in ((names[0], cmp.a, row.a, row.tensor_a, row.line_a),
                                      (names[1], cmp.b, row.b, row.tensor_b, row.line_b)):
        if op_id is None:
            out.append(f"{name}: no such op")
            continue
        said = f"{name}: {row.op} (op {op_id}, line {line})"
        if t is not None:
            said += f" = {tensor_value(rec, t)}"
        out.append(said)
    return out
