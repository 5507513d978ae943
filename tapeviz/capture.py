"""Worker side: what one run recorded, and the hooks that record it.

`Session` is TensorFlow's op callback plus the bookkeeping behind the instrumented
tape: tensors, ops, tapes, gradient calls, names and numerics alerts.
"""
from __future__ import annotations

import ast
import itertools
import os
import re
import sys
import time
import weakref
from collections import deque
from typing import Optional

import tensorflow as tf
from tensorflow.python import pywrap_tfe
from tensorflow.python.eager import context, record as tape_record
from tensorflow.python.util import nest

from . import explain, numerics
from .recording import (BACKWARD, CONSTANT, FORWARD, INTERMEDIATE, VARIABLE, Alert, Error,
                        FlowEntry, GradientCall, GradResult, Op, Recording, Tape, Tensor,
                        encode_float)

DEFAULT_MAX_OPS = 20_000          # newest ops kept; a 10k-op train step fits whole
SMALL_VALUE = 64                  # tensors up to this many elements keep their full value

EagerTensor = type(tf.constant(0.0))
_RESOURCE = tf.resource.as_datatype_enum
# What TensorFlow's tape treats as differentiable (backprop_util.IsTrainable).
TRAINABLE_ENUMS = {d.as_datatype_enum for d in (
    tf.float16, tf.bfloat16, tf.float32, tf.float64, tf.complex64, tf.complex128,
    tf.resource, tf.variant)}
_FUNCTION_SUFFIX = re.compile(r"(?:_\d+)+$")


def function_call(op_type: str) -> tuple:
    """(Python name, role) of a tf.function call op: TF names them "__inference_f_25",
    "__forward_f_32" (the forward pass a tape will record) and
    "__inference___backward_f_23_33" (its gradient). Role: inference/forward/backward."""
    name, role = op_type, "inference"
    if name.startswith("__inference_"):
        name = name[len("__inference_"):]
    for prefix in ("__forward_", "__backward_"):
        if name.startswith(prefix):
            name, role = name[len(prefix):], prefix.strip("_")
    return _FUNCTION_SUFFIX.sub("", name) or op_type, role


class _TapeState:
    """What tapeviz tracks for one user tape: the same facts TensorFlow's tape keeps."""

    def __init__(self, rec: Tape, tape):
        self.rec = rec
        self.tape = weakref.ref(tape)
        self.ids: set = set()        # TF tensor ids on the tape (watched, or outputs of its ops)
        self.held: dict = {}         # TF id -> tensor, for gradient-flow questions
        self.edges: list = []        # (input TF ids, output TF ids) of each recorded op
        self.span_start: Optional[int] = None

    def release(self):
        self.held.clear()
        self.edges.clear()


class Session:
    """The recording state of one run, and the hooks that fill it."""

    def __init__(self, source: str, filename: str, max_ops: int = DEFAULT_MAX_OPS):
        self.source = source
        self.filename = filename
        self.max_ops = max_ops
        self.max_tapes = max(16, max_ops // 20)
        self.dropped_tapes = 0
        self.ops: deque = deque()
        self.dropped_ops = 0
        self.tensors: dict = {}          # recording id -> Tensor
        self.tid: dict = {}              # TF tensor id -> recording id
        self.tapes: list = []            # Tape records, in creation order
        self.active: list = []           # states of entered tapes, innermost last
        self.alerts: list = []
        self.warnings: list = []
        self.handle_names: dict = {}     # TF handle id -> the user's name, for variables
        self.variable_names: dict = {}   # TF handle id -> TF's own name ("conv2d/kernel")
        self.trainable: dict = {}        # TF handle id -> the variable's trainable flag
        self.next_op = 0
        self.next_tensor = 0
        self.grad_depth = 0              # >0 while a gradient/jacobian call runs
        self.grad_call: Optional[int] = None
        self.quiet = 0                   # >0 while tapeviz itself runs ops
        self.scanned: dict = {}          # id(frame) -> last line whose locals were scanned
        self.last_time = time.perf_counter()
        self.module_globals: Optional[dict] = None

    # -- where in the user's program are we? ---------------------------------------------
    def user_frame(self, frame=None):
        f = frame or sys._getframe(2)
        filename = self.filename
        while f is not None:
            if f.f_code.co_filename == filename:
                return f
            f = f.f_back
        return None

    # -- names: the user's Python variables bound to tensors -----------------------------
    def scan_names(self, frame) -> None:
        if frame is None:
            return
        self.scan_namespace(frame.f_globals if frame.f_code.co_name == "<module>"
                            else frame.f_locals)

    def scan_namespace(self, namespace: dict) -> None:
        """Name the tensors and variables bound in `namespace` (first binding wins)."""
        for name, value in list(namespace.items()):
            if name.startswith("__"):
                continue
            if isinstance(value, (list, tuple)) and 0 < len(value) <= 64:
                for i, v in enumerate(value):
                    self._name_one(f"{name}[{i}]", v)
            else:
                self._name_one(name, value)

    def _name_one(self, name, value):
        if isinstance(value, EagerTensor):
            rid = self.tid.get(value._id)
            if rid is not None and self.tensors[rid].name is None:
                self.tensors[rid].name = name
        elif isinstance(value, tf.Variable) or type(value).__name__ == "Variable":
            try:
                handle = value.handle
            except Exception:
                return
            if isinstance(handle, EagerTensor):
                self.handle_names.setdefault(handle._id, name)
                rid = self.tid.get(handle._id)
                if rid is not None:
                    self.tensors[rid].name = self.handle_names[handle._id]

    # -- tensors ---------------------------------------------------------------------------
    def tensor_id(self, t, line: Optional[int], producer: Optional[int] = None) -> int:
        tf_id = t._id
        rid = self.tid.get(tf_id)
        if rid is not None:
            return rid
        rid = self.next_tensor
        self.next_tensor += 1
        self.tid[tf_id] = rid
        dtype = t.dtype
        if dtype.as_datatype_enum == _RESOURCE:
            rec = Tensor(rid, self.handle_names.get(tf_id), [], "resource", VARIABLE,
                         producer=producer, line=line)
        else:
            rec = Tensor(rid, None, list(t._shape_tuple()), dtype.name,
                         INTERMEDIATE if producer is not None else CONSTANT,
                         producer=producer, line=line)
            self.describe(rec, t)
        self.tensors[rid] = rec
        return rid

    def describe(self, rec: Tensor, t) -> None:
        try:
            a = t._numpy_internal()   # a view, no copy: read here and let go
        except Exception:
            return
        rec.stats = stats = numerics.stats(a)
        if a.size <= SMALL_VALUE:
            rec.value = numerics.plain_value(a, stats is not None and not (stats.nan or stats.inf))

    # -- the op callback -------------------------------------------------------------------
    def on_op(self, op_type, inputs, attrs, outputs, op_name=None, graph=None):
        if graph is not None or self.quiet:
            return None          # graph building inside tf.function, or tapeviz's own work
        now = time.perf_counter()
        if isinstance(op_type, bytes):
            op_type = op_type.decode()
        function, role = function_call(op_type) if op_type.startswith("__") else (None, None)
        phase = BACKWARD if self.grad_depth or role == "backward" else FORWARD
        forward_function = role == "forward"
        caller = sys._getframe(1)
        frame = self.user_frame(caller)
        line = frame.f_lineno if frame is not None else None
        tid = self.tid
        if any(t._id not in tid for t in inputs) and \
                os.path.basename(caller.f_code.co_filename).startswith("gen_"):   # fast path
            self.fast_path_reads(caller, inputs, line)
        op_id = self.next_op
        self.next_op += 1
        in_ids = [self.tensor_id(t, line) for t in inputs]
        if frame is not None and self.scanned.get(id(frame)) != line:
            self.scanned[id(frame)] = line     # a new statement: earlier ones have bound names
            self.scan_names(frame)
        out_ids = [self.tensor_id(t, line, op_id) for t in outputs]
        tapes = self.which_tapes(inputs, outputs, forward_function)
        scope = context.context().scope_name.rstrip("/") or None
        if op_type == "ReadVariableOp" and in_ids:
            self.describe_variable(in_ids[0], outputs[0], inputs[0])
        op = Op(op_id, function or op_type, in_ids, out_ids, line, scope, tapes, phase,
                round((now - self.last_time) * 1e6, 1), function,
                self.grad_call if phase == BACKWARD else None)
        self.append_op(op)
        self.last_time = time.perf_counter()
        return None

    def fast_path_reads(self, wrapper, inputs, line) -> None:
        """Make visible the variable reads that TF's C++ fast path did without a callback.

        `tf.multiply(2.0, v)` reads `v` inside C++ (recorded on the tape as ReadVariableOp)
        and hands the op a tensor we have never seen. The generated op wrapper's arguments
        line up with the op's inputs, so the variable behind each unseen input is known."""
        code = wrapper.f_code
        args = []
        # Generated wrappers take the op's inputs first, then its attrs.
        for name in code.co_varnames[:code.co_argcount]:
            if len(args) >= len(inputs):
                break
            value = wrapper.f_locals.get(name)
            args.extend(value if isinstance(value, (list, tuple)) else [value])
        if len(args) != len(inputs):
            return
        for arg, t in zip(args, inputs):
            if t._id in self.tid or not isinstance(arg, tf.Variable):
                continue
            handle = getattr(arg, "handle", None)
            if not isinstance(handle, EagerTensor):
                continue
            op_id = self.next_op
            self.next_op += 1
            handle_rid = self.tensor_id(handle, line)
            out = self.tensor_id(t, line, op_id)
            self.describe_variable(handle_rid, t, handle)
            tapes = self.which_tapes([handle], [t], False)
            self.append_op(Op(op_id, "ReadVariableOp", [handle_rid], [out], line,
                              context.context().scope_name.rstrip("/") or None, tapes,
                              BACKWARD if self.grad_depth else FORWARD, 0.0))

    def append_op(self, op: Op) -> None:
        self.ops.append(op)
        if len(self.ops) > self.max_ops:
            self.ops.popleft()
            self.dropped_ops += 1
            if self.dropped_ops % self.max_ops == 0:
                self.compact()
        self.check_numerics(op)

    def describe_variable(self, handle_rid, value, handle):
        var = self.tensors[handle_rid]
        if var.stats is None:
            var.shape = list(value.shape.as_list())
            var.dtype = value.dtype.name
            self.describe(var, value)
        if var.name is None:
            var.name = self.handle_names.get(handle._id)
        if var.trainable is None:
            var.trainable = self.trainable.get(handle._id)

    def read_variable(self, rid, variable, handle) -> None:
        """Describe a variable from its current value, unseen by tapes and the recording."""
        if self.tensors[rid].stats is not None:
            return
        self.quiet += 1
        try:
            with tape_record.stop_recording():
                value = tf.convert_to_tensor(variable)
            self.describe_variable(rid, value, handle)
        except Exception:
            pass
        finally:
            self.quiet -= 1

    def which_tapes(self, inputs, outputs, forward_function) -> list:
        """The user tapes that record this op, decided as TensorFlow's tape decides."""
        if not self.active:
            return []
        if pywrap_tfe.TFE_Py_TapeSetIsStopped() and not forward_function:
            return []   # tf.function forward calls run stopped, then are recorded explicitly
        if not forward_function and not pywrap_tfe.TFE_Py_TapeSetShouldRecordBackprop(
                list(inputs)):
            return []
        result = []
        for state in self.active:
            tape = state.tape()
            if tape is None or not tape._recording:
                continue
            if self._watches_any(state, tape, inputs):
                result.append(state.rec.id)
                state.edges.append(([t._id for t in inputs], [t._id for t in outputs]))
                for t in outputs:
                    state.ids.add(t._id)
                    state.held[t._id] = t
                state.rec.ops.append(self.next_op - 1)   # the op being recorded now
        return result

    @staticmethod
    def _watches_any(state, tape, inputs) -> bool:
        refreshed = False
        for t in inputs:
            enum = t.dtype.as_datatype_enum
            if enum not in TRAINABLE_ENUMS:
                continue
            if t._id in state.ids:
                return True
            if enum == _RESOURCE and not refreshed and tape._tape is not None:
                # variables are watched on access (watch_accessed_variables) or by watch()
                refreshed = True
                for v in tape._tape.watched_variables():
                    state.ids.add(v.handle._id)
                    state.held[v.handle._id] = v
                if t._id in state.ids:
                    return True
        return False

    def check_numerics(self, op: Op) -> None:
        for rid in op.outputs:
            stats = self.tensors[rid].stats
            if stats is None:
                continue
            for kind, count in (("nan", stats.nan), ("inf", stats.inf)):
                if count and not any(a.kind == kind and a.phase == op.phase for a in self.alerts):
                    self.alerts.append(Alert(kind, op.id, rid, op.line, op.phase))

    def compact(self) -> None:
        """Forget tensors that no kept op, tape or gradient refers to (bounds memory)."""
        keep = set()
        for op in self.ops:
            keep.update(op.inputs)
            keep.update(op.outputs)
        for tape in self.tapes:
            keep.update(tape.watched)
            for call in tape.gradients:
                keep.update(call.target)
                keep.update(call.sources)
                keep.update(r.grad for r in call.results if r.grad is not None)
                keep.update(f.tensor for f in call.flow)
        first = self.ops[0].id if self.ops else self.next_op
        for tape in self.tapes:
            if tape.ops and tape.ops[0] < first:
                tape.ops = [i for i in tape.ops if i >= first]
        self.tensors = {k: v for k, v in self.tensors.items() if k in keep}
        self.tid = {k: v for k, v in self.tid.items() if v in keep}

    # -- tapes ------------------------------------------------------------------------------
    @staticmethod
    def state_of(tape) -> Optional[_TapeState]:
        # Kept on the tape itself: id(tape) is reused once a loop's old tapes are freed.
        return tape.__dict__.get("_tapeviz_state")

    def open_tape(self, tape, frame) -> _TapeState:
        state = self.state_of(tape)
        if state is None:
            parent = self.active[-1].rec.id if self.active else None
            rec = Tape(len(self.tapes) + self.dropped_tapes, frame.f_lineno if frame else None, tape._persistent,
                       tape._watch_accessed_variables, parent)
            self.tapes.append(rec)
            state = _TapeState(rec, tape)
            tape.__dict__["_tapeviz_state"] = state
            weakref.finalize(tape, state.release)
            if len(self.tapes) > self.max_tapes:
                self.drop_oldest_tape()
        self.active.append(state)
        self.resume_span(state)
        return state

    def drop_oldest_tape(self) -> None:
        """Bound memory in long loops: forget the oldest tape no `with` block holds open."""
        active = {state.rec.id for state in self.active}
        for i, rec in enumerate(self.tapes):
            if rec.id not in active:
                del self.tapes[i]
                self.dropped_tapes += 1
                return

    def close_tape(self, tape, frame) -> None:
        state = self.state_of(tape)
        if state is None:
            return
        self.pause_span(state)
        if state in self.active:
            self.active.remove(state)
        state.rec.end_line = frame.f_lineno if frame else None

    def pause_span(self, state) -> None:
        if state.span_start is not None:
            state.rec.recording_spans.append([state.span_start, self.next_op])
            state.span_start = None

    def resume_span(self, state) -> None:
        if state.span_start is None:
            state.span_start = self.next_op

    def watch(self, tape, tensors, frame) -> None:
        state = self.state_of(tape)
        if state is None:
            return
        line = frame.f_lineno if frame else None
        for t in nest.flatten(tensors):
            handle = getattr(t, "handle", None)
            obj = handle if isinstance(handle, EagerTensor) else t
            if not isinstance(obj, EagerTensor):
                continue
            rid = self.tensor_id(obj, line)
            if handle is not None:
                self.read_variable(rid, t, obj)
            state.ids.add(obj._id)
            state.held[obj._id] = t if handle is not None else obj
            if rid not in state.rec.watched:
                state.rec.watched.append(rid)
        self.scan_names(frame)

    # -- gradient flow -----------------------------------------------------------------------
    def between(self, state, target_ids: set, source_ids: set) -> list:
        """TF ids of tensors on the tape on a path from a source to a target."""
        down = set(source_ids)
        for ins, outs in state.edges:
            if any(i in down for i in ins):
                down.update(outs)
        up = set(target_ids)
        for ins, outs in reversed(state.edges):
            if any(o in up for o in outs):
                up.update(ins)
        ids = [i for i in (down & up) - source_ids if i in state.held]
        return [i for i in ids if state.held[i].dtype.as_datatype_enum in TRAINABLE_ENUMS
                and state.held[i].dtype != tf.resource]

    def finish_call(self, state, call: GradientCall, flat_sources, flat_grads, flow_ids,
                    flow_grads, first_backward_op: int) -> None:
        line = call.line
        for src, grad in zip(flat_sources, flat_grads):
            rid = self.source_id(src, line)
            if grad is None:
                call.results.append(GradResult(rid, None, None))   # reason filled in below
                continue
            gid = self.tensor_id(getattr(grad, "values", grad), line) \
                if isinstance(getattr(grad, "values", grad), EagerTensor) else None
            call.results.append(GradResult(rid, gid))
            call.flow.append(FlowEntry(rid, encode_float(numerics.norm(grad))))
        grad_of = {}
        for tf_id, grad in zip(flow_ids, flow_grads):
            rid = self.tid.get(tf_id)
            norm = numerics.norm(grad)
            if rid is None or norm is None:
                continue
            call.flow.append(FlowEntry(rid, encode_float(norm)))
            g = getattr(grad, "values", grad)
            if isinstance(g, EagerTensor) and g._id in self.tid:
                grad_of[self.tid[g._id]] = rid
        self.scope_backward_ops(first_backward_op, grad_of)
        if any(r.grad is None for r in call.results):
            self.explain_nones(state, call)

    def source_id(self, src, line) -> int:
        handle = getattr(src, "handle", None)
        obj = handle if isinstance(handle, EagerTensor) else src
        return self.tensor_id(obj, line)

    def scope_backward_ops(self, first_op: int, grad_of: dict) -> None:
        """Name backward ops after the forward layer they differentiate, as TF's graphs do.

        An op that consumes d target / d t belongs to the gradient of t's producer; ops that
        only consume other backward results inherit their producer's scope."""
        producer_scope = {}
        start = max(0, first_op - self.ops[0].id) if self.ops else 0
        for op in itertools.islice(self.ops, start, None):
            if op.phase != BACKWARD:
                continue
            scope = None
            for i in op.inputs:
                forward = grad_of.get(i)
                if forward is not None:
                    p = self.tensors.get(forward)
                    fop = self._op(p.producer) if p is not None and p.producer is not None else None
                    if fop is not None and fop.scope:
                        scope = "gradient_tape/" + fop.scope
                        break
                if i in producer_scope:
                    scope = scope or producer_scope[i]
            if scope and not op.scope:
                op.scope = scope
            for o in op.outputs:
                producer_scope[o] = op.scope

    def _op(self, op_id: int) -> Optional[Op]:
        if not self.ops or op_id < self.ops[0].id:
            return None
        op = self.ops[op_id - self.ops[0].id]
        return op if op.id == op_id else None

    def explain_nones(self, state, call: GradientCall) -> None:
        ops = list(self.ops)
        for r in call.results:
            if r.grad is None:
                r.none_reason = explain.none_reason(
                    ops=ops, tensors=self.tensors, tape=state.rec, targets=call.target,
                    source=r.source, program=self.source)

    def on_variable(self, next_creator, **kwargs):
        """variable_creator_scope hook: remember TF's name for each variable made."""
        variable = next_creator(**kwargs)
        handle = getattr(variable, "handle", None)
        if isinstance(handle, EagerTensor):
            parts = variable.name.split(":")[0].split("/")
            # "sequential/conv2d/kernel" -> "conv2d/kernel": the layer is what students see
            self.variable_names[handle._id] = "/".join(parts[-2:])
            self.trainable[handle._id] = bool(getattr(variable, "trainable", True))
        return variable

    def finish(self, stdout: str, error: Optional[Error], duration_s: float) -> Recording:
        for state in list(self.active):
            self.pause_span(state)
        for tf_id, rid in self.tid.items():
            rec = self.tensors.get(rid)
            if rec is not None and rec.kind == VARIABLE:
                rec.name = rec.name or self.variable_names.get(tf_id)
                rec.trainable = self.trainable.get(tf_id, rec.trainable)
        block_ends = _with_block_ends(self.source)
        for tape in self.tapes:
            tape.end_line = block_ends.get(tape.line, tape.end_line)
        kept = {op.id for op in self.ops}
        self.compact()
        for tape in self.tapes:
            tape.ops = [i for i in tape.ops if i in kept]
        dropped = {k: v for k, v in (("ops", self.dropped_ops), ("tapes", self.dropped_tapes))
                   if v}
        return Recording(source=self.source, stdout=stdout, error=error, ops=list(self.ops),
                         tensors=[self.tensors[k] for k in sorted(self.tensors)],
                         tapes=self.tapes, alerts=sorted(self.alerts, key=lambda a: a.op or 0),
                         warnings=self.warnings, dropped=dropped, duration_s=duration_s)


def _with_block_ends(source: str) -> dict:
    """Line of each `with` statement -> the last line of its block."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {}
    return {node.lineno: node.end_lineno for node in ast.walk(tree)
            if isinstance(node, (ast.With, ast.AsyncWith))}
