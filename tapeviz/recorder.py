"""Worker side: run a user's program under TensorFlow's op callbacks and an instrumented
GradientTape, and return a Recording. Imports TensorFlow; only a worker process (or the
command line, or tests) may import this module.
"""
from __future__ import annotations

import ast
import builtins
import contextlib
import io
import itertools
import linecache
import os
import re
import signal
import sys
import threading
import time
import traceback
import types
import weakref
from collections import deque
from typing import Optional

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.python import pywrap_tfe  # noqa: E402
from tensorflow.python.eager import context, record as tape_record  # noqa: E402
from tensorflow.python.framework import op_callbacks  # noqa: E402
from tensorflow.python.util import nest  # noqa: E402

from . import explain  # noqa: E402
from .recording import (BACKWARD, CONSTANT, FORWARD, INTERMEDIATE, VARIABLE, Alert,  # noqa: E402
                        Error, FlowEntry, GradientCall, GradResult, Op, Recording, Stats,
                        Tape, Tensor, encode_float)

DEFAULT_TIMEOUT_S = 30.0
DEFAULT_MAX_OPS = 20_000          # newest ops kept; a 10k-op train step fits whole
DEFAULT_MAX_STDOUT = 100_000      # characters of printed output kept (the newest)
SMALL_VALUE = 64                  # tensors up to this many elements keep their full value

_EagerTensor = type(tf.constant(0.0))
_RESOURCE = tf.resource.as_datatype_enum
# What TensorFlow's tape treats as differentiable (backprop_util.IsTrainable).
_TRAINABLE_ENUMS = {d.as_datatype_enum for d in (
    tf.float16, tf.bfloat16, tf.float32, tf.float64, tf.complex64, tf.complex128,
    tf.resource, tf.variant)}
_FUNCTION_NAME = re.compile(r"^(?:__inference_)?(__forward_|__backward_)?(.*?)(?:_\d+)+$")


class Timeout(BaseException):
    """Raised inside the user's program when its time is up.

    A BaseException so that a user's `except Exception:` cannot swallow it."""


# -- tensor facts, computed with NumPy only: no eager op may run inside an op callback ------------

def _stats(a: np.ndarray) -> Optional[Stats]:
    if a.dtype.kind not in "fciub" or a.dtype == object:
        if a.dtype.name == "bfloat16" or a.dtype.name.startswith("float8"):
            a = a.astype(np.float32)
        else:
            return None
    if a.size == 0:
        return Stats(None, None, None, None)
    if a.dtype.kind == "c":
        a = np.abs(a)
    elif a.dtype.kind in "iub":
        a = a.astype(np.float64)
    if a.size == 1:                        # most tensors of a small program: skip NumPy's reductions
        v = float(a.reshape(()))
        if v != v:
            return Stats(None, None, None, None, 1, 0)
        if v in (float("inf"), float("-inf")):
            return Stats(None, None, None, None, 0, 1)
        return Stats(v, v, v, 0.0)
    nan = inf = 0
    flat = a.reshape(-1)
    total = float(np.add.reduce(flat, dtype=np.float64))
    if not np.isfinite(total):             # NaN and Inf propagate into the sum
        nan = int(np.count_nonzero(np.isnan(flat)))
        inf = int(np.count_nonzero(np.isinf(flat)))
        flat = flat[np.isfinite(flat)]
        if flat.size == 0:
            return Stats(None, None, None, None, nan, inf)
        total = float(np.add.reduce(flat, dtype=np.float64))
    n = flat.size
    mean = total / n
    # One pass for the spread: E[x^2] - mean^2 in float64 (a dot product, no temporaries).
    f64 = flat if flat.dtype == np.float64 or n > 4096 else flat.astype(np.float64)
    square = float(np.dot(f64, f64)) / n
    std = float(np.sqrt(max(square - mean * mean, 0.0)))
    return Stats(float(flat.min()), float(flat.max()), mean, std, nan, inf)


def _plain_value(a: np.ndarray, finite: bool = False):
    if a.dtype.kind == "f" or a.dtype.name == "bfloat16":
        if finite:
            return a.astype(np.float64).tolist()
        flat = [encode_float(float(x)) for x in a.astype(np.float64).ravel()]
        return np.array(flat, dtype=object).reshape(a.shape).tolist() if a.ndim else flat[0]
    if a.dtype.kind == "c":
        return _plain_value(np.abs(a))
    if a.dtype.kind in "SO":
        return np.vectorize(lambda s: s.decode("utf-8", "replace") if isinstance(s, bytes)
                            else str(s), otypes=[object])(a).tolist()
    return a.tolist()


def _grad_norm(g) -> Optional[float]:
    if g is None:
        return None
    values = getattr(g, "values", g)       # IndexedSlices carry their rows in .values
    try:
        a = np.asarray(values)
    except Exception:                      # a CompositeTensor we cannot flatten
        return None
    if a.dtype.kind == "c":
        a = np.abs(a)
    return float(np.sqrt(np.sum(np.square(a, dtype=np.float64)))) if a.size else 0.0


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


class _BoundedText(io.TextIOBase):
    """A stdout that keeps the newest `limit` characters and counts what it dropped."""

    def __init__(self, limit: int):
        self.limit, self.parts, self.size, self.dropped = limit, deque(), 0, 0

    def writable(self):
        return True

    def write(self, s):
        s = str(s)
        self.parts.append(s)
        self.size += len(s)
        while self.size > self.limit and self.parts:
            extra = self.size - self.limit
            head = self.parts[0]
            if len(head) <= extra:
                self.parts.popleft()
                self.size -= len(head)
                self.dropped += len(head)
            else:
                self.parts[0] = head[extra:]
                self.size -= extra
                self.dropped += extra
        return len(s)

    def text(self) -> str:
        body = "".join(self.parts)
        if self.dropped:
            return f"[... {self.dropped} earlier characters dropped ...]\n" + body
        return body


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
        items = frame.f_globals.items() if frame.f_code.co_name == "<module>" else \
            frame.f_locals.items()
        for name, value in list(items):
            if name.startswith("__"):
                continue
            if isinstance(value, (list, tuple)) and 0 < len(value) <= 64:
                for i, v in enumerate(value):
                    self._name_one(f"{name}[{i}]", v)
            else:
                self._name_one(name, value)

    def _name_one(self, name, value):
        if isinstance(value, _EagerTensor):
            rid = self.tid.get(value._id)
            if rid is not None and self.tensors[rid].name is None:
                self.tensors[rid].name = name
        elif isinstance(value, tf.Variable) or type(value).__name__ == "Variable":
            try:
                handle = value.handle
            except Exception:
                return
            if isinstance(handle, _EagerTensor):
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
        rec.stats = stats = _stats(a)
        if a.size <= SMALL_VALUE:
            rec.value = _plain_value(a, stats is not None and not (stats.nan or stats.inf))

    # -- the op callback -------------------------------------------------------------------
    def on_op(self, op_type, inputs, attrs, outputs, op_name=None, graph=None):
        if graph is not None or self.quiet:
            return None          # graph building inside tf.function, or tapeviz's own work
        now = time.perf_counter()
        if isinstance(op_type, bytes):
            op_type = op_type.decode()
        function = None
        phase = BACKWARD if self.grad_depth else FORWARD
        forward_function = False
        if op_type.startswith("__"):
            m = _FUNCTION_NAME.match(op_type)
            if m:
                function = m.group(2)
                forward_function = m.group(1) == "__forward_"
                if m.group(1) == "__backward_" or function.startswith("__backward_"):
                    function = function.replace("__backward_", "")
                    phase = BACKWARD
                    function = _FUNCTION_NAME.match(function + "_0").group(2)
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
            self.describe_variable(in_ids[0], outputs[0], scope, inputs[0])
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
            if not isinstance(handle, _EagerTensor):
                continue
            op_id = self.next_op
            self.next_op += 1
            handle_rid = self.tensor_id(handle, line)
            out = self.tensor_id(t, line, op_id)
            self.describe_variable(handle_rid, t, None, handle)
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

    def describe_variable(self, handle_rid, value, scope, handle):
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
            self.describe_variable(rid, value, None, handle)
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
            if enum not in _TRAINABLE_ENUMS:
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
            obj = handle if isinstance(handle, _EagerTensor) else t
            if not isinstance(obj, _EagerTensor):
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
        return [i for i in ids if state.held[i].dtype.as_datatype_enum in _TRAINABLE_ENUMS
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
                if isinstance(getattr(grad, "values", grad), _EagerTensor) else None
            call.results.append(GradResult(rid, gid))
            call.flow.append(FlowEntry(rid, encode_float(_grad_norm(grad))))
        grad_of = {}
        for tf_id, grad in zip(flow_ids, flow_grads):
            rid = self.tid.get(tf_id)
            norm = _grad_norm(grad)
            if rid is None or norm is None:
                continue
            call.flow.append(FlowEntry(rid, encode_float(norm)))
            g = getattr(grad, "values", grad)
            if isinstance(g, _EagerTensor) and g._id in self.tid:
                grad_of[self.tid[g._id]] = rid
        self.scope_backward_ops(first_backward_op, grad_of)
        if any(r.grad is None for r in call.results):
            self.explain_nones(state, call)

    def source_id(self, src, line) -> int:
        handle = getattr(src, "handle", None)
        obj = handle if isinstance(handle, _EagerTensor) else src
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
        if isinstance(handle, _EagerTensor):
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


# -- the instrumented tape ---------------------------------------------------------------------

def make_tape_class(session: Session):
    """A tf.GradientTape subclass bound to one run's session.

    It is a real GradientTape (isinstance holds, results are TensorFlow's own); it only
    tells the session what happens. Made per run so that no global state is patched."""

    class GradientTape(tf.GradientTape):
        __doc__ = tf.GradientTape.__doc__
        _tapeviz_inner = 0

        def _tracked(self) -> bool:
            return context.executing_eagerly() and not self._tapeviz_inner

        def __enter__(self):
            result = super().__enter__()
            if self._tracked():
                session.open_tape(self, session.user_frame(sys._getframe(1)))
            return result

        def __exit__(self, typ, value, tb):
            result = super().__exit__(typ, value, tb)
            if self._tracked():
                frame = session.user_frame(sys._getframe(1))
                session.scan_names(frame)
                session.close_tape(self, frame)
            return result

        def watch(self, tensor):
            super().watch(tensor)
            if self._tracked():
                session.watch(self, tensor, session.user_frame(sys._getframe(1)))

        @contextlib.contextmanager
        def stop_recording(self):
            state = session.state_of(self)
            with super().stop_recording():
                if state is not None:
                    session.pause_span(state)
                try:
                    yield
                finally:
                    if state is not None:
                        session.resume_span(state)

        def reset(self):
            super().reset()
            state = session.state_of(self)
            if state is not None:
                state.ids.clear()
                state.held.clear()
                state.edges.clear()

        def gradient(self, target, sources, output_gradients=None,
                     unconnected_gradients=tf.UnconnectedGradients.NONE):
            state = session.state_of(self)
            if not self._tracked() or state is None:
                return super().gradient(target, sources, output_gradients,
                                        unconnected_gradients)
            frame = session.user_frame(sys._getframe(1))
            call = self._begin_call("gradient", target, sources, frame)
            flat_sources = nest.flatten(sources)
            # Ask TensorFlow for d target / d t of the tensors between sources and target in the
            # same call: the backward pass computes them anyway, so the user's results and the
            # ops it runs are unchanged, and nothing extra is recorded on any tape.
            flow_ids = []
            if self._tape is not None:
                flow_ids = session.between(state, self._flat_ids(target),
                                           self._flat_ids(flat_sources))
            flow_tensors = [state.held[i] for i in flow_ids]
            first = session.next_op
            session.grad_depth += 1
            session.grad_call = len(state.rec.gradients) - 1
            try:
                both = super().gradient(target, [sources, flow_tensors], output_gradients,
                                        unconnected_gradients)
            except Exception as e:
                call.error = f"{type(e).__name__}: {e}"
                raise
            finally:
                session.grad_depth -= 1
                if not self._persistent:
                    state.release()
            grads, flow_grads = both
            session.quiet += 1
            try:
                session.finish_call(state, call, flat_sources, nest.flatten(grads), flow_ids,
                                    flow_grads, first)
            finally:
                session.quiet -= 1
            return grads

        def jacobian(self, target, sources, unconnected_gradients=tf.UnconnectedGradients.NONE,
                     parallel_iterations=None, experimental_use_pfor=True):
            return self._jacobian_call("jacobian", target, sources, dict(
                unconnected_gradients=unconnected_gradients,
                parallel_iterations=parallel_iterations,
                experimental_use_pfor=experimental_use_pfor))

        def batch_jacobian(self, target, source,
                           unconnected_gradients=tf.UnconnectedGradients.NONE,
                           parallel_iterations=None, experimental_use_pfor=True):
            return self._jacobian_call("batch_jacobian", target, source, dict(
                unconnected_gradients=unconnected_gradients,
                parallel_iterations=parallel_iterations,
                experimental_use_pfor=experimental_use_pfor))

        # -- helpers ----------------------------------------------------------------------
        def _jacobian_call(self, kind, target, sources, kwargs):
            method = getattr(super(), kind)
            state = session.state_of(self)
            if not self._tracked() or state is None:
                return method(target, sources, **kwargs)
            frame = session.user_frame(sys._getframe(2))
            call = self._begin_call(kind, target, sources, frame)
            flow_ids = session.between(state, self._flat_ids(target),
                                       self._flat_ids(nest.flatten(sources))) \
                if self._tape is not None else []
            first = session.next_op
            session.grad_depth += 1
            session.grad_call = len(state.rec.gradients) - 1
            self._tapeviz_inner += 1     # jacobian calls self.gradient inside: pass it through
            try:
                result = method(target, sources, **kwargs)
            except Exception as e:
                call.error = f"{type(e).__name__}: {e}"
                raise
            finally:
                self._tapeviz_inner -= 1
                session.grad_depth -= 1
            flow_grads = []
            if self._persistent and flow_ids:
                # The flow of a jacobian is d sum(target) / d t, asked separately: with every
                # tape stopped and the callback quiet, nothing of it lands in the recording.
                session.quiet += 1
                try:
                    with tape_record.stop_recording():
                        flow_grads = super().gradient(target, [state.held[i] for i in flow_ids])
                finally:
                    session.quiet -= 1
            elif flow_ids:
                call.note = ("gradient flow of a jacobian needs a persistent tape "
                             "(tf.GradientTape(persistent=True)): a non-persistent tape can "
                             "answer only one question")
                flow_ids = []
            flat_sources = nest.flatten(sources)
            flat_results = [_jacobian_part(r) for r in nest.flatten(result)]
            session.quiet += 1
            try:
                session.finish_call(state, call, flat_sources, flat_results, flow_ids,
                                    flow_grads, first)
            finally:
                session.quiet -= 1
            return result

        def _begin_call(self, kind, target, sources, frame) -> GradientCall:
            state = session.state_of(self)
            line = frame.f_lineno if frame else None
            call = GradientCall(line, kind,
                                [session.source_id(t, line) for t in nest.flatten(target)
                                 if _is_tensorlike(t)],
                                [session.source_id(s, line) for s in nest.flatten(sources)
                                 if _is_tensorlike(s)])
            if self._recording and self._persistent:
                call.warning = explain.PERSISTENT_INSIDE_HINT
                session.warnings.append({"line": line, "message": explain.PERSISTENT_INSIDE_HINT})
            state.rec.gradients.append(call)
            session.scan_names(frame)      # names for targets and sources first seen here
            return call

        @staticmethod
        def _flat_ids(structure) -> set:
            ids = set()
            for t in nest.flatten(structure):
                handle = getattr(t, "handle", None)
                obj = handle if isinstance(handle, _EagerTensor) else t
                if isinstance(obj, _EagerTensor):
                    ids.add(obj._id)
            return ids

    GradientTape.__module__ = "tensorflow"
    GradientTape.__qualname__ = "GradientTape"
    return GradientTape


def _is_tensorlike(x) -> bool:
    return isinstance(x, _EagerTensor) or isinstance(getattr(x, "handle", None), _EagerTensor)


def _jacobian_part(r):
    """A jacobian result stands in for the gradient: None stays None."""
    return r


# -- the view of `tensorflow` that user code imports ----------------------------------------------

class _Overlay(types.ModuleType):
    """A module that answers a few names itself and forwards the rest to the real module."""

    def __init__(self, real, overrides: dict):
        super().__init__(real.__name__, getattr(real, "__doc__", None))
        self.__dict__["_real"] = real
        self.__dict__.update(overrides)

    def __getattr__(self, name):
        return getattr(self.__dict__["_real"], name)

    def __dir__(self):
        return sorted(set(dir(self.__dict__["_real"])) | set(self.__dict__))


def make_import(tape_class):
    """An __import__ for the user's globals: `tensorflow` comes with the instrumented tape.

    Only the user's program sees it; sys.modules and every library keep the real module."""
    autodiff = _Overlay(tf.autodiff, {"GradientTape": tape_class})
    overlay = _Overlay(tf, {"GradientTape": tape_class, "autodiff": autodiff})
    real_import = builtins.__import__

    def tapeviz_import(name, globals=None, locals=None, fromlist=(), level=0):
        module = real_import(name, globals, locals, fromlist, level)
        if level == 0 and (name == "tensorflow" or name.startswith("tensorflow.")):
            if name == "tensorflow" or not fromlist:
                return overlay           # `import tensorflow.x as y` walks attributes from here
            if name == "tensorflow.autodiff":
                return autodiff
        return module

    return tapeviz_import


# -- running a program ---------------------------------------------------------------------------

def _user_line(tb, filename) -> Optional[int]:
    line = None
    for frame, lineno in traceback.walk_tb(tb):
        if frame.f_code.co_filename == filename:
            line = lineno
    return line


def _error(session: Session, exc: BaseException, filename: str, timeout: float) -> Error:
    lines = session.source.splitlines()
    if isinstance(exc, Timeout):
        line = _user_line(exc.__traceback__, filename)
        err = Error("Timeout", f"the program ran longer than its time limit of {timeout:g} s "
                    "and was stopped", line)
    elif isinstance(exc, SyntaxError) and exc.filename == filename:
        err = Error(type(exc).__name__, f"{exc.msg}", exc.lineno)
    else:
        line = _user_line(exc.__traceback__, filename)
        message = str(exc).strip() or type(exc).__name__
        err = Error(type(exc).__name__, message, line)
    text = lines[err.line - 1] if err.line and 0 < err.line <= len(lines) else ""
    err.hint = explain.error_hint(err.type, err.message, text)
    return err


@contextlib.contextmanager
def _time_limit(seconds: Optional[float]):
    """Raise Timeout in the user's program after `seconds` (main thread only)."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_alarm(signum, frame):
        # Again a second later, in case the program catches BaseException and goes on.
        signal.setitimer(signal.ITIMER_REAL, 1.0)
        raise Timeout()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def record(source: str, filename: str = "program.py", timeout: Optional[float] = DEFAULT_TIMEOUT_S,
           max_ops: int = DEFAULT_MAX_OPS, max_stdout: int = DEFAULT_MAX_STDOUT,
           namespace: Optional[dict] = None) -> Recording:
    """Run `source` as a program under the recorder and return what it recorded.

    Never raises for a fault of the program: syntax errors, exceptions and timeouts are
    reported in `Recording.error`, with everything recorded up to that point. `namespace`,
    if given, receives the program's globals (tests compare them with a plain run)."""
    started = time.perf_counter()
    session = Session(source, filename, max_ops)
    out = _BoundedText(max_stdout)
    error = None
    try:
        code = compile(source, filename, "exec", dont_inherit=True)
    except SyntaxError as exc:        # includes IndentationError
        return session.finish("", _error(session, exc, filename, timeout or 0),
                              time.perf_counter() - started)
    except ValueError as exc:         # e.g. source with NUL bytes
        return session.finish("", Error("SyntaxError", str(exc), None,
                                        "The program text is not valid Python source."),
                              time.perf_counter() - started)
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    user_builtins = dict(builtins.__dict__)
    user_builtins["__import__"] = make_import(make_tape_class(session))
    namespace = {} if namespace is None else namespace
    namespace.update({"__name__": "__main__", "__file__": filename,
                      "__builtins__": user_builtins})
    session.module_globals = namespace
    callback = session.on_op
    op_callbacks.add_op_callback(callback)
    try:
        with contextlib.redirect_stdout(out), _time_limit(timeout), \
                tf.variable_creator_scope(session.on_variable):
            exec(code, namespace)
    except (Exception, Timeout, KeyboardInterrupt, SystemExit) as exc:
        if isinstance(exc, SystemExit) and exc.code in (None, 0):
            error = None
        else:
            error = _error(session, exc, filename, timeout or 0)
    finally:
        op_callbacks.remove_op_callback(callback)
        linecache.cache.pop(filename, None)
    session.quiet += 1
    try:
        _scan_module(session, namespace)
    finally:
        session.quiet -= 1
    return session.finish(out.text(), error, time.perf_counter() - started)


def _scan_module(session: Session, namespace: dict) -> None:
    frame = types.SimpleNamespace(f_globals=namespace,
                                  f_code=types.SimpleNamespace(co_name="<module>"))
    session.scan_names(frame)
