"""The sentence over a tape's picture, in markdown: which tape recorded what, and the gradient
its call gives, as numbers where they are small; with its parts (a nested tape's second
derivative, a loop's loss going down, a tf.function's eager answers, a persistent tape's
other answers). The caller says what the view draws, as plain data.
"""
from __future__ import annotations

from typing import Optional

from ..recording import PYTORCH, Recording, as_float
from . import spelling, tapes, values
from .markdown import code, literal


def sentence(rec: Recording, tp, chosen=None, traced: Optional[str] = None, drawn=()) -> str:
    """The view of tape `tp`: with `chosen`, the gradient call drawn (its calls at indices
    `drawn` of the tape, as one); `traced`, the tf.function whose graph holds the tape's ops."""
    names = tapes.tape_names(rec)
    n = tapes.recorded_ops(rec, tp)
    parent = f", inside {code(names[tp.parent])}" if tp.parent is not None and tp.parent in names else ""
    said = f"{code(names[tp.id])}{parent} recorded {n} op{'s' * (n != 1)}"
    if rec.framework == PYTORCH:
        said = f"{code(names[tp.id])} ran back through {n} op{'s' * (n != 1)}"
    if traced:
        said = (f"{code(names[tp.id])}{parent} was traced into tf.function {code(traced)}: its "
                f"graph holds {'this op' if n == 1 else f'these {n} ops'}, drawn with shapes and dtypes and no "
                f"values, since they ran inside the compiled function (record with --eager to "
                f"see values)")
    if loop := tapes.loop_words(rec, tp):
        said = f"{loop[0].upper()}{loop[1:]}; in it {said}"
    if chosen is None:
        return said + "."
    if (nested := _nested_sentence(rec, tp, chosen, names)) is not None:
        return nested
    target = code(", ".join(values.tensor_name(rec, t) for t in chosen.target))
    if chosen.kind != "gradient":     # the lesson is the matrix: its entries, when they fit
        parts = []
        for r in chosen.results:
            grad = rec.tensor(r.grad) if r.grad is not None else None
            numbers = values.value_words(grad) if grad is not None else None
            words = numbers or values.grad_words(grad, chosen.kind)
            parts.append(f"with respect to {code(values.tensor_name(rec, r.source))} is {literal(words, 300)}")
        return f"{said}; the {chosen.kind} of {target} " + ", ".join(parts) + "."
    value = rec.tensor(chosen.target[0]) if len(chosen.target) == 1 else None
    if value is not None and not value.shape and values.small(value):   # a step's loss, say
        target += f" (value {literal(values.short_value(value), 40)})"
    trend = _trend_words(rec, tp, chosen)
    returned = _returned_words(rec, traced) if traced else ""
    return (f"{said}; the gradient of {target} gives {_results(rec, chosen)}"
            f"{_asked_again(rec, tp, drawn)}.{trend}{returned}")


def _returned_words(rec: Recording, traced: str) -> str:
    """" Called eagerly on line 10, `grad_of_square(4)` returned 8.": the traced graph has no
    values, but each call of the tf.function is one eager op whose inputs and outputs were
    recorded, and that answer is the lesson. The first two calls; "" when none kept a value."""
    parts = []
    for op in rec.ops:
        if op.function != traced or op.traced is not None or not op.outputs or len(parts) == 2:
            continue
        args = [rec.tensor(i) for i in op.inputs]
        outs = [rec.tensor(o) for o in op.outputs]
        if any(t is None or not values.small(t) for t in args + outs):
            continue
        call = f"{traced}({', '.join(values.short_value(t) for t in args)})"
        gave = ", ".join(values.short_value(t) for t in outs)
        at = f"on {values.line_words(rec, op.file, op.line)}, " if op.line is not None else ""
        parts.append(f"{at}{code(call)} returned {literal(gave, 60)}")
    return f" Called eagerly {' and '.join(parts)}." if parts else ""


def _trend_words(rec: Recording, tp, chosen) -> str:
    """" Over the 5 steps recorded, `l` fell from 41.7 to 12.21.": a training loop's lesson is
    its loss going down, and its chart sits far below the fold; "" for a tape opened once
    or a target that is not a scalar."""
    if not tapes.loop_words(rec, tp) or len(chosen.target) != 1:
        return ""
    site = (chosen.file, chosen.line)
    losses = [as_float(s.target) for s in rec.steps
              if (s.file, s.line) == site and s.scalar and s.error is None and s.kind == "gradient"]
    if len(losses) < 2:
        return ""
    first, last = losses[0], losses[-1]
    went = "fell" if last < first else "rose" if last > first else "stayed"
    name = code(values.tensor_name(rec, chosen.target[0]))
    moved = (f"at {values.number_text(first)}" if went == "stayed"
             else f"from {values.number_text(first)} to {values.number_text(last)}")
    return f" Over the {len(losses):,} steps recorded, {name} {went} {literal(moved, 80)}."


def _results(rec: Recording, chosen) -> str:
    """"`w`: grad 3, `x`: grad None"; for many big gradients (a model's variables) only the
    range of their sizes, "all 6 sources a gradient, from size 0.09 (`dense/kernel`) to size
    0.29 (`conv2d_1/kernel`)": six norms in a row are a wall of numbers, each is on its node."""
    grads = [(r.source, rec.tensor(r.grad) if r.grad is not None else None) for r in chosen.results]
    sizes = [(values.grad_size(g), s) for s, g in grads if g is not None and not values.small(g)]
    if len(grads) > 3 and len(sizes) == len(grads) and all(size is not None for size, _ in sizes):
        (low, at_low), (high, at_high) = min(sizes), max(sizes)
        return (f"all {len(grads)} sources a gradient, from size {values.number_text(low)} "
                f"({code(values.tensor_name(rec, at_low))}) to size {values.number_text(high)} "
                f"({code(values.tensor_name(rec, at_high))})")
    parts = []
    for r in chosen.results:
        grad = rec.tensor(r.grad) if r.grad is not None else None
        words = values.grad_words(grad) if r.grad is None or grad is not None else "grad ?"
        if grad is not None and grad.value is None and grad.stats is None and not grad.shape:
            # traced into a tf.function: a scalar has no shape to say either, and "grad" alone
            # reads as a word cut off
            words = "grad (a scalar, computed inside the graph)"
        parts.append(f"{code(values.tensor_name(rec, r.source))}: {literal(words, 80)}")
    return ", ".join(parts)


def _asked_again(rec: Recording, tp, drawn) -> str:
    """A persistent tape's other gradient calls, which the picture of the calls `drawn`
    leaves out: "; the same tape gives `x`: grad 108 (of `z`, line 10)" (the lesson of a
    persistent tape is that both answers exist). Each answer first, its target and line
    after it: three Nones said as "the same tape at line 16: the gradient of `b` gives `u`:
    grad None" each took three lines of a 1280 px screen."""
    others = [c for i, c in enumerate(tp.gradients)
              if i not in drawn and c.error is None and c.kind == "gradient"][:3]
    if not others:
        return ""
    parts = []
    for c in others:
        at = f", {values.line_words(rec, c.file, c.line)}" if c.line is not None else ""
        target = code(", ".join(values.tensor_name(rec, t) for t in c.target))
        parts.append(f"{_results(rec, c)} (of {target}{at})")
    return "; the same tape gives " + values.and_list(parts)


# -- an expression as the recording saw it: y = x·x·x ------------------------------------------

# op type: (how its two inputs join, precedence); a higher precedence binds tighter
_INFIX = {"Mul": ("·", 2), "AddV2": (" + ", 1), "Add": (" + ", 1), "Sub": (" - ", 1),
          "RealDiv": ("/", 2), "Div": ("/", 2), "Pow": ("^", 3), "MatMul": (" @ ", 2)}
_EXPRESSION_OPS = 6        # past this many ops, an expression is no sentence's business


def expression(rec: Recording, t: int) -> Optional[str]:
    """The tensor's value as the ops that made it, in names and numbers: "x·x·x" for
    y = x * x * x. None when it needs more than a few ops or an op with no short form."""
    budget = [_EXPRESSION_OPS]
    text, _ = _expr(rec, t, budget, root=True)
    return text


def _expr(rec: Recording, t: int, budget: list, root: bool = False):
    info = rec.tensor(t)
    if info is None:
        return None, 9
    op = rec.op(info.producer) if info.producer is not None else None
    if op is not None and op.type == spelling.READ_VARIABLE and op.inputs:
        return _expr(rec, op.inputs[0], budget)
    if info.name and not root:
        return info.name, 9
    if op is None:
        return (values.short_value(info) if values.small(info) else info.name), 9
    budget[0] -= 1
    if budget[0] < 0:
        return None, 9
    parts = [_expr(rec, i, budget) for i in op.inputs]
    if any(text is None for text, _ in parts):
        return None, 9
    if op.type in _INFIX and len(parts) == 2:
        joint, rank = _INFIX[op.type]
        (a, ra), (b, rb) = parts
        a = a if ra >= rank else f"({a})"
        b = b if rb > rank or rb == rank and op.type in ("Mul", "AddV2", "Add") else f"({b})"
        return a + joint + b, rank
    if op.type == "Square" and len(parts) == 1:
        return (parts[0][0] if parts[0][1] >= 3 else f"({parts[0][0]})") + "²", 3
    if op.type == "Neg" and len(parts) == 1:
        return "-" + (parts[0][0] if parts[0][1] >= 2 else f"({parts[0][0]})"), 2
    name = spelling.python_name(op.type)
    if name == op.type or not name.startswith("tf."):
        return None, 9
    return f"{name}({', '.join(text for text, _ in parts)})", 9


def _nested_sentence(rec: Recording, tp, chosen, names: dict) -> Optional[str]:
    """For an outer tape differentiating an inner tape's gradient: "the inner tape recorded
    y = x·x·x; the outer tape recorded the inner gradient's ops, so d²y/dx² = 6 at x = 1"."""
    if len(chosen.target) != 1 or len(chosen.results) != 1:
        return None
    for inner in rec.tapes:
        if inner.parent != tp.id:
            continue
        for call in inner.gradients:
            if len(call.target) != 1 or len(call.sources) != 1:
                continue
            if not any(r.grad == chosen.target[0] for r in call.results):
                continue
            y, x1 = call.target[0], call.sources[0]
            x2 = chosen.results[0].source
            body = expression(rec, y)
            said_y = values.tensor_name(rec, y)
            made = f"{said_y} = {body}" if body else said_y
            n1, n2 = values.tensor_name(rec, x1), values.tensor_name(rec, x2)
            d = f"d²{said_y}/d{n1}²" if x1 == x2 else f"d²{said_y}/d{n1}d{n2}"
            grad = chosen.results[0].grad
            value = rec.tensor(grad) if grad is not None else None
            result = (f"{d} = {values.short_value(value)}" if value is not None
                      else f"{d} is None" if grad is None else d)
            first = rec.tensor(chosen.target[0])
            if first is not None and values.small(first):   # the guide's lesson is both: 3 and 6
                result = f"d{said_y}/d{n1} = {values.short_value(first)} and {result}"
            at = [rec.tensor(x) for x in dict.fromkeys((x1, x2))]
            where = ", ".join(f"{values.tensor_name(rec, i.id)} = {values.short_value(i)}"
                              for i in at if i is not None and values.small(i))
            return (f"The inner tape {code(names[inner.id])} recorded {literal(made, 200)}; the outer tape "
                    f"{code(names[tp.id])} recorded the inner gradient's ops, so "
                    f"{literal(result + (' at ' + where if where else ''), 300)}.")
    return None
