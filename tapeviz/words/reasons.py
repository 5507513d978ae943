"""Why a gradient came out None, in plain words (hints.py has the error hints). No
TensorFlow: it reads the recording's ops, tensors and tapes (plain data) and the program
text, so the app and the recorder can both use it."""
from __future__ import annotations

import ast
import re
from typing import Iterable, Mapping, Optional, Sequence

from ..recording import CONSTANT, VARIABLE, Op, Tape, Tensor

# dtypes that carry gradients, as TensorFlow's tape decides (backprop_util.IsTrainable)
DIFFERENTIABLE_DTYPES = {"float16", "bfloat16", "float32", "float64", "complex64", "complex128",
                         "resource", "variant"}

# Ops whose registered gradient is None (or that only produce non-differentiable outputs).
NON_DIFFERENTIABLE_OPS = {
    "ArgMax", "ArgMin", "Round", "Floor", "Ceil", "Rint", "StopGradient", "PreventGradient",
    "Equal", "NotEqual", "Less", "LessEqual", "Greater", "GreaterEqual", "LogicalAnd",
    "LogicalOr", "LogicalNot", "IsNan", "IsInf", "IsFinite", "Shape", "Size", "Rank",
    "RandomUniform", "RandomStandardNormal", "StatelessRandomUniformV2", "OneHot",
    "FloorDiv", "FloorMod", "TruncateDiv", "BitwiseAnd", "Unique", "TopKV2",
}

# Program text that takes a value out of TensorFlow (NumPy or a Python number).
_LEAVES_TF = re.compile(r"\.numpy\(\)|\bfloat\(|\bint\(|\.item\(\)|\bnp\.|\bnumpy\.|\.tolist\(\)")


def _label(t: Optional[Tensor], fallback: str = "this source") -> str:
    return f"`{t.name}`" if t is not None and t.name else fallback


def _line_text(lines: Sequence[str], line: Optional[int]) -> str:
    return lines[line - 1].strip() if line and 0 < line <= len(lines) else ""


def _at(line: Optional[int]) -> str:
    return f" (line {line})" if line else ""


class _Graph:
    """Producer/consumer indexes over a list of ops, for path questions."""

    def __init__(self, ops: Iterable[Op]):
        self.ops = list(ops)
        self.producer = {t: op for op in self.ops for t in op.outputs}

    def ancestors(self, targets: Iterable[int]) -> set:
        """Tensor ids that the targets were computed from (targets included)."""
        seen, stack = set(), list(targets)
        while stack:
            t = stack.pop()
            if t in seen:
                continue
            seen.add(t)
            op = self.producer.get(t)
            if op is not None:
                stack.extend(op.inputs)
        return seen

    def descendants(self, source: int) -> set:
        reach = {source}
        for op in self.ops:                      # ops are in execution order
            if any(i in reach for i in op.inputs):
                reach.update(op.outputs)
        return reach

    def path_ops(self, source: int, targets: Iterable[int]) -> list:
        """Ops on some path from source to a target, in execution order."""
        down = self.descendants(source)
        up = self.ancestors(targets)
        return [op for op in self.ops
                if any(i in down for i in op.inputs) and any(o in up for o in op.outputs)]


def none_reason(*, ops: Sequence[Op], tensors: Mapping[int, Tensor], tape: Tape,
                targets: Sequence[int], source: int, program: str = "") -> str:
    """Say in plain words why tape.gradient(targets, source) is None."""
    lines = program.splitlines()
    src = tensors.get(source)
    name = _label(src)
    on_tape = set(tape.ops)
    graph = _Graph(ops)

    if src is not None and src.dtype not in DIFFERENTIABLE_DTYPES:
        made = _line_text(lines, src.line)     # the program's line, if it is the one that made it
        fixed = _made_float(made) if src.name and re.match(rf"{re.escape(src.name)}\s*=", made) else None
        return (f"integer/non-float dtype: {name} is {src.dtype}, and only floating-point "
                f"(or complex) tensors carry gradients. Create it as a float"
                + (f", `{fixed}`," if fixed else " (tf.constant(3.0))")
                + " or tf.cast it to tf.float32 before the tape uses it.")

    if not _held_by_tape(ops, on_tape, tape, source, src):
        return (_discarded_by_reset(tape, source, name, graph)
                or _not_on_tape(src, name, tape, graph, tensors, lines))

    # The source is on the tape. Is there a recorded path to the target?
    taped = _Graph(op for op in ops if op.id in on_tape)
    recorded_path = taped.path_ops(source, targets)
    for op in recorded_path:
        if op.type in NON_DIFFERENTIABLE_OPS:
            return _cut_by(op, tensors, name)
    if recorded_path:
        return f"every gradient on the path from the target to {name} is None."

    full_path = graph.path_ops(source, targets)
    if full_path:
        return _broken_path(full_path, tape, name, tensors)

    return (_stateful_write(graph, source, targets, name, tensors, lines)
            or _left_tensorflow(graph, targets, tensors, src, lines)
            or f"no path from the target to {name}: the target was not computed from {name}"
               f" on this tape, so it does not depend on it.")


def _held_by_tape(ops, on_tape, tape, source, src) -> bool:
    """Is the source on the tape: watched, made by a recorded op, or (a variable) read by
    one. A constant that recorded ops merely consumed is not: the tape never watched it."""
    if source in tape.watched:
        return True
    variable = src is not None and src.kind == VARIABLE
    for op in ops:
        if op.id in on_tape and (source in op.outputs or (variable and source in op.inputs)):
            return True
    return False


def _discarded_by_reset(tape, source, name, graph) -> Optional[str]:
    """The tape had the source before a tape.reset() threw its recording away."""
    for reset in reversed(getattr(tape, "resets", None) or []):
        dropped = set(reset.get("ops") or ())
        held = source in (reset.get("watched") or ()) or any(
            op.id in dropped and (source in op.inputs or source in op.outputs)
            for op in graph.ops)
        if held:
            return (f"discarded by reset(): the tape recorded {name} but "
                    f"tape.reset(){_at(reset.get('line'))} threw away everything it had "
                    f"recorded and watched, so the path to {name} is gone. Compute (or "
                    f"tape.watch) it again after the reset, or reset before it.")
    return None


def _not_on_tape(src, name, tape, graph, tensors, lines) -> str:
    if src is not None and src.kind == VARIABLE:
        if src.trainable is False:
            return (f"not watched: {name} is a tf.Variable with trainable=False, and the tape "
                    f"only watches trainable variables. Use tape.watch({src.name or 'v'}) "
                    f"or make it trainable.")
        if not tape.watch_accessed_variables:
            return (f"not watched: the tape was created with watch_accessed_variables=False, "
                    f"so it only records what you tape.watch(). Call tape.watch({src.name or 'v'}).")
        stopped = _used_while_stopped(graph, src.id, tape)
        if stopped is not None:
            where = f" at line {stopped.line}" if stopped.line else ""
            return (f"the tape was not recording: {name} was used while recording was "
                    f"stopped{where}, inside `with tape.stop_recording():`, so the tape did "
                    f"not record that use. Use it outside the stop_recording() block to get "
                    f"a gradient.")
        return (f"no path from the target to {name}: {name} was never used while the tape "
                f"was recording, so the target does not depend on it (an unconnected source). "
                f"Use it inside the `with tf.GradientTape()` block.")

    replaced = _replaced_variable(src, graph, tensors)
    if replaced is not None:
        op, var = replaced
        return (f"the variable was replaced: {name} was a tf.Variable, but "
                f"`{_line_text(lines, op.line) or 'an assignment'}`{_at(op.line)} made it a "
                f"plain Tensor, and the tape does not watch plain tensors. Update a variable "
                f"in place with {var.name or 'v'}.assign(...) or assign_add(...).")
    if src is not None and src.producer is not None:
        op = graph.producer.get(src.id)
        return (f"not watched: {name} was computed{_at(op.line if op else None)} before or "
                f"outside the tape's recording, so the tape does not know how it was made. "
                f"Compute it inside the `with` block, or call tape.watch({src.name or 'x'}).")
    label = src.name if src and src.name else "x"
    return (f"not watched: {name if src and src.name else 'this source'} was never watched. "
            f"It is a constant tensor, and a tape only watches trainable tf.Variables on its "
            f"own. Call tape.watch({label}) inside the `with` block, or make it a "
            f"tf.Variable.")


def _used_while_stopped(graph, source, tape) -> Optional[Op]:
    """The first op that used the source inside the tape's block while it was stopped."""
    spans = tape.recording_spans or []
    if not spans:
        return None
    for op in graph.ops:
        if source in op.inputs and spans[0][0] <= op.id < spans[-1][1] and \
                not any(start <= op.id < end for start, end in spans):
            return op
    return None


# Ops that write into a variable: the tape does not differentiate through them
_STATEFUL_WRITE = re.compile(r"^(Assign\w*VariableOp|ResourceScatter\w+|ResourceApply\w+|"
                             r"ResourceStridedSliceAssign)$")


def _stateful_write(graph, source, targets, name, tensors, lines) -> Optional[str]:
    """A value computed from the source was written into a variable that the target read."""
    down = graph.descendants(source)
    up = graph.ancestors(targets)
    for op in graph.ops:
        if not _STATEFUL_WRITE.match(op.type) or not op.inputs or op.inputs[0] not in up:
            continue
        if any(i in down for i in op.inputs[1:]):
            var = _label(tensors.get(op.inputs[0]), "a variable")
            text = _line_text(lines, op.line)
            where = f"`{text}` ({op.type}{', line ' + str(op.line) if op.line else ''})" \
                if text else f"`{op.type}`{_at(op.line)}"
            return (f"a stateful op cut the path: {where} wrote a value computed from {name} "
                    f"into {var}. Writing to a variable is not differentiable, so the target, "
                    f"which reads {var}, does not depend on {name} as far as the tape knows. "
                    f"Compute with tensors instead (e.g. `new = {var.strip('`')} + ...`) to "
                    f"keep the path.")
    return None


def _replaced_variable(src, graph, tensors):
    """If src came from a variable of the same Python name, return (op, variable)."""
    if src is None or src.producer is None or not src.name:
        return None
    for t in graph.ancestors([src.id]):
        var = tensors.get(t)
        if var is not None and var.kind == VARIABLE and var.name == src.name:
            return graph.producer.get(src.id), var
    return None


def _integer_outputs(op, tensors) -> bool:
    return any(tensors.get(o) is not None and tensors[o].dtype not in DIFFERENTIABLE_DTYPES
               for o in op.outputs)


def _cut_by(op, tensors, name) -> str:
    """Why the non-differentiable `op` on the path cuts it, in the op's own terms."""
    if op.type in ("StopGradient", "PreventGradient"):
        call = "tf.stop_gradient" if op.type == "StopGradient" else "tf.raw_ops.PreventGradient"
        return (f"`{call}`{_at(op.line)} is on the path: it stops the gradient on purpose, so "
                f"nothing flows back through it to {name}. Remove it there if {name} should "
                f"get a gradient.")
    what = ("gives integer or boolean results" if _integer_outputs(op, tensors)
            else "has no gradient")
    return (f"a non-differentiable op on the path: `{op.type}`{_at(op.line)} {what}, so the "
            f"path from the target back to {name} is cut there.")


def traced_tape_note(function: str, python, library: bool = False) -> str:
    """The warning at the line of a tape entered while a tf.function traced (`library`:
    in model.fit()'s default train_step, not in the program's own code)."""
    owner = "model.fit()'s default " if library else ""
    inside = f"{owner}`{python}`, traced by tf.function `{function}`" \
        if python and python != function else f"tf.function `{function}`"
    return (f"this tape was entered inside {inside}: TensorFlow traced it into a graph and ran "
            f"its ops inside the compiled function (model.fit() compiles train_step this "
            f"way), so the ops drawn for it are that graph's, with shapes and no values. "
            f"Record with --eager (`tapeviz record --eager`, or \"Run tf.functions eagerly\" "
            f"on the page) to see its ops run one by one, with values and gradients.")


def _broken_path(path, tape, name, tensors) -> str:
    """The path exists in the program but not on the tape: say where it broke."""
    on_tape = set(tape.ops)
    spans = tape.recording_spans or []
    for op in path:
        if op.id in on_tape:
            continue
        if op.type in NON_DIFFERENTIABLE_OPS or _integer_outputs(op, tensors):
            return _cut_by(op, tensors, name)
        reset = next((r for r in getattr(tape, "resets", None) or []
                      if op.id in set(r.get("ops") or ())), None)
        if reset is not None:
            return (f"discarded by reset(): `{op.type}`{_at(op.line)} was on the path to "
                    f"{name}, but tape.reset(){_at(reset.get('line'))} threw away what the "
                    f"tape had recorded. Compute the path again after the reset.")
        if any(start <= op.id < end for start, end in spans):
            continue   # recorded span but the tape skipped it: an earlier break explains it
        if spans and spans[0][0] <= op.id <= spans[-1][1]:
            return (f"the tape was not recording at{_at(op.line) or ' this point'}: the path "
                    f"to {name} goes through `{op.type}` computed under tape.stop_recording().")
        return (f"`{op.type}`{_at(op.line)} ran outside the `with tf.GradientTape()` block, so "
                f"the tape never recorded that part of the path to {name}. Move the "
                f"computation inside the block.")
    return f"no recorded path from the target to {name}."


_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


def _left_tensorflow(graph, targets, tensors, src, lines) -> Optional[str]:
    """Find where a value left TensorFlow through NumPy or Python on the way to the target:
    a constant the target was computed from, made on a line (or from a name bound on a line)
    that calls NumPy or .numpy() on a tensor computed from the source."""
    names = set()
    if src is not None:
        names = {tensors[t].name for t in graph.descendants(src.id)
                 if t in tensors and tensors[t].name}
    for t in sorted(graph.ancestors(targets)):
        tensor = tensors.get(t)
        if tensor is None or tensor.kind != CONSTANT or tensor.producer is not None:
            continue
        for made in _origin_lines(lines, tensor):
            text = _line_text(lines, made)
            if _LEAVES_TF.search(text) and (not names or names & set(_IDENTIFIER.findall(text))):
                return (f"the path left TensorFlow through NumPy/Python at line {made} "
                        f"(`{text}`): .numpy(), float() and NumPy functions give plain values "
                        f"that the tape cannot differentiate. Keep the computation in "
                        f"TensorFlow ops (tf.square, tf.reduce_sum, ...).")
    return None


def _origin_lines(lines, tensor) -> list:
    """Lines a constant may have come from: where its name was bound, where it was first
    seen, and (two steps back) where the names used on those lines were bound."""
    found = []
    made = _assignment_line(lines, tensor.name, tensor.line)
    frontier = [line for line in (made, tensor.line) if line]
    for _ in range(3):
        next_frontier = []
        for line in frontier:
            if line in found:
                continue
            found.append(line)
            text = _line_text(lines, line)
            rhs = text.split("=", 1)[1] if re.match(r"^[\w\s,\[\]]+=[^=]", text) else text
            for used in set(_IDENTIFIER.findall(rhs)):
                bound = _assignment_line(lines, used, line - 1)
                if bound:
                    next_frontier.append(bound)
        frontier = next_frontier
    return found


def _assignment_line(lines, name: Optional[str], before: Optional[int]) -> Optional[int]:
    """The last line up to `before` that binds `name` (a plain `name = ...`)."""
    if not name or not before or not name.isidentifier():
        return None
    pattern = re.compile(rf"^\s*{re.escape(name)}\s*=[^=]")
    for line in range(min(before, len(lines)), 0, -1):
        if pattern.match(lines[line - 1]):
            return line
    return None


_MAKERS = {"constant", "Variable", "convert_to_tensor"}


def _made_float(line: str) -> Optional[str]:
    """The line that made an integer tensor, its integers written as floats: `k =
    tf.constant(3)` gives `k = tf.constant(3.0)`, `w = tf.Variable(2)` `w = tf.Variable(2.0)`.
    None when the line is not one such call of plain integers (a dtype= of its own, say)."""
    try:
        tree = ast.parse(line.strip())
    except (SyntaxError, ValueError):
        return None
    call = next((n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                 and n.func.attr in _MAKERS and n.args), None)
    if call is None or call.keywords:
        return None
    ints = [n for n in ast.walk(call.args[0]) if isinstance(n, ast.Constant) and type(n.value) is int]
    if not ints:
        return None
    for n in ints:
        n.value = float(n.value)
    return ast.unparse(tree)
