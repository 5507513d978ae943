"""Ops and tapes: TensorFlow's op callback, and which user tapes recorded each op, decided
as TensorFlow's tape decides; the tapes' lifetimes and spans (the op log's bound: op_log.py).
"""
from __future__ import annotations

import operator
import os
import re
import sys
import weakref
from time import perf_counter as _perf_counter
from typing import Optional

import tensorflow as tf
from tensorflow.python import pywrap_tfe
from tensorflow.python.eager import context
from tensorflow.python.util import nest

from ...recording import (BACKWARD, FORWARD, Op, Tape)
from ...words import reasons
from ..frames import library_train_step, nearest_user_frame
from ..traced import traced_at
from .tensors import RESOURCE, TRAINABLE_ENUMS, EagerTensor, handle_or_self

_FUNCTION_SUFFIX = re.compile(r"(?:_\d+)+$")
_NEVER_VARIABLES = frozenset({float, int, bool, type(None), EagerTensor})
_TF_ID = operator.attrgetter("_id")      # a C call per tensor, where a comprehension is a frame


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

def _text(op_type) -> str:
    return op_type.decode(errors="replace") if isinstance(op_type, bytes) else str(op_type)


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


class OpsAndTapes:
    """Session's part that owns `ops`, `tapes` and `active`: what ran, and on which tape."""

    # -- the op callback -------------------------------------------------------------------

    def on_op(self, op_type, inputs, attrs, outputs, op_name=None, graph=None):
        # Runs once per eager op: every line here is paid thousands of times a second (so
        # the op is recorded here, not in a method this calls: a call per op is worth saving)
        if graph is not None or self.quiet:
            # graph building inside tf.function (kept only in a traced tape's block or
            # gradient call), or tapeviz's own work
            if graph is not None and not self.quiet and (self.traced_open or self.traced_call):
                try:
                    self.on_graph_op(op_type, inputs, outputs, graph, sys._getframe(1))
                except Exception as e:
                    self.fault(f"could not note a traced {_text(op_type)} op", e)
            return None
        try:
            now = _perf_counter()
            if op_type.__class__ is bytes:
                op_type = op_type.decode()
            function = role = None
            if op_type.startswith("__"):
                function, role = function_call(op_type)
            phase = self.op_phase = BACKWARD if self.grad_depth or role == "backward" else FORWARD
            caller = sys._getframe(1)         # the frame that ran the op
            frame, self.here = nearest_user_frame(caller, self.files)
            if frame is None:
                line = None
            elif frame.f_code is self.last_code and frame.f_lasti == self.last_lasti:
                line = self.last_line             # the same call as the last op's (a layer's ops)
            else:
                line = self.line_of(frame)
            tid = self.tid
            # Tuples, not lists, while recording: a tuple of ints leaves the collector's
            # lists at its first pass, where a list stays. An op's records live until the op
            # bound drops them, so they reach the oldest generation, and what reaches it
            # decides when a full collection walks the whole heap (TensorFlow's ~700k
            # objects: 0.2-0.4 s each). finish() gives the Recording its lists back.
            in_ids = tuple(map(tid.get, map(_TF_ID, inputs)))
            if None in in_ids:
                if self.is_op_wrapper(caller.f_code):
                    self.fast_path_reads(caller, inputs, line)
                tensor_id = self.tensor_id        # (fast_path_reads may have named some of them)
                in_ids = tuple([tensor_id(t, line) if rid is None else rid
                                for rid, t in zip(in_ids, inputs)])
            op_id = self.next_op
            self.next_op = op_id + 1
            if frame is not None and self.scanned.get(id(frame)) != line:
                self.scanned[id(frame)] = line     # a new statement: earlier ones have bound names
                self.scan_names(frame)
            # An op's outputs are new tensors (tensor_id's lookup would only miss)
            out_ids = tuple(self.new_tensors(outputs, line, op_id))
            tapes = self.which_tapes(inputs, outputs, role == "forward") if self.active else ()
            scope = self.eager_thread.scope_name
            if scope:
                scope = scope.rstrip("/") or None
            if op_type == "ReadVariableOp" and in_ids:
                self.describe_variable(in_ids[0], outputs[0], inputs[0])
            # The duration stays in seconds here; finish rounds it to microseconds for kept ops.
            # (append_op, inlined: a method call per op is worth saving here.)
            ops = self.ops
            ops.append(Op(op_id, function or op_type, in_ids, out_ids, line, scope or None, tapes,
                          phase, now - self.last_time, function,
                          self.grad_call if phase == BACKWARD else None, self.here))
            if not self.active and phase is FORWARD:
                self.outside.append(op_id)        # outside any tape: the first to go
            if len(ops) > self.max_ops:
                self.drop_oldest_op()
            self.last_time = _perf_counter()
        except Exception as e:   # TF would raise it from the program's op: a warning instead
            self.fault(f"could not record a {_text(op_type)} op", e, self._fault_line())
        return None

    def _fault_line(self) -> Optional[int]:
        """The program's line that ran the op the callback failed on (None if not found)."""
        try:
            frame = self.user_frame(sys._getframe(2))
            return frame.f_lineno if frame is not None else None
        except Exception:
            return None

    def line_of(self, frame) -> int:
        """frame.f_lineno, cached per instruction: f_lineno scans the code's line table from
        its start, which is costly per op at a long program's top level. The last answer is
        kept apart: a layer's ops all come from one call in the program."""
        code = frame.f_code
        known = self.code_lines.get(id(code))
        if known is None or known[0] is not code:
            known = self.code_lines[id(code)] = (code, {})
        lines = known[1]
        lasti = frame.f_lasti
        line = lines.get(lasti)
        if line is None:
            line = lines[lasti] = frame.f_lineno
        self.last_code, self.last_lasti, self.last_line = code, lasti, line
        return line

    def is_op_wrapper(self, code) -> bool:
        """Is `code` one of TF's generated op wrappers (gen_math_ops.py...), which run ops
        through the C++ fast path? Cached per code object for the run."""
        known = self.wrapper_codes.get(code)
        if known is None:
            known = self.wrapper_codes[code] = os.path.basename(
                code.co_filename).startswith("gen_")
        return known

    def fast_path_reads(self, wrapper, inputs, line) -> None:
        """Make visible the variable reads that TF's C++ fast path did without a callback.

        `tf.multiply(2.0, v)` reads `v` inside C++ (recorded on the tape as ReadVariableOp)
        and hands the op a tensor we have never seen. The generated op wrapper's arguments
        line up with the op's inputs, so the variable behind each unseen input is known."""
        code = wrapper.f_code
        args = []
        local = wrapper.f_locals    # a new dict at each read of f_locals: read it once
        # Generated wrappers take the op's inputs first, then its attrs.
        for name in code.co_varnames[:code.co_argcount]:
            if len(args) >= len(inputs):
                break
            value = local.get(name)
            args.extend(value if isinstance(value, (list, tuple)) else [value])
        if len(args) != len(inputs):
            return
        tid = self.tid
        for arg, t in zip(args, inputs):
            # isinstance(arg, tf.Variable) goes through TF's metaclass: skip it for the
            # arguments most calls pass (Python numbers, tensors)
            if t._id in tid or arg.__class__ in _NEVER_VARIABLES or not isinstance(
                    arg, tf.Variable):
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
            self.append_op(Op(op_id, "ReadVariableOp", (handle_rid,), (out,), line,
                              context.context().scope_name.rstrip("/") or None, tapes,
                              BACKWARD if self.grad_depth else FORWARD, 0.0, file=self.here))

    def which_tapes(self, inputs, outputs, forward_function) -> tuple:
        """The user tapes that record this op, decided as TensorFlow's tape decides (a tuple:
        see on_op)."""
        if not self.active:
            return ()
        if pywrap_tfe.TFE_Py_TapeSetIsStopped() and not forward_function:
            return ()   # tf.function forward calls run stopped, then are recorded explicitly
        if not forward_function and not pywrap_tfe.TFE_Py_TapeSetShouldRecordBackprop(inputs):
            return ()
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
        return tuple(result)

    @staticmethod
    def _watches_any(state, tape, inputs) -> bool:
        refreshed = False
        for t in inputs:
            enum = t._datatype_enum()      # not .dtype: a Python property, per input per op
            if enum not in TRAINABLE_ENUMS:
                continue
            if t._id in state.ids:
                return True
            if enum == RESOURCE and not refreshed and tape._tape is not None:
                # variables are watched on access (watch_accessed_variables) or by watch()
                refreshed = True
                for v in tape._tape.watched_variables():
                    state.ids.add(v.handle._id)
                    state.held[v.handle._id] = v
                if t._id in state.ids:
                    return True
        return False

    # -- tapes ------------------------------------------------------------------------------

    @staticmethod
    def state_of(tape) -> Optional[_TapeState]:
        # Kept on the tape itself: id(tape) is reused once a loop's old tapes are freed.
        return tape.__dict__.get("_tapeviz_state")

    def open_tape(self, tape, frame) -> _TapeState:
        state = self.state_of(tape)
        if state is None:
            parent = self.active[-1].rec.id if self.active else None
            rec = Tape(self.new_tape_id(), frame.f_lineno if frame else None, tape._persistent,
                       tape._watch_accessed_variables, parent, file=self.here)
            self.tapes.append(rec)
            state = _TapeState(rec, tape)
            # Kept in the tape's own __dict__ and nowhere else once the tape is closed, so
            # the tensors it holds go with the tape (weakref.finalize cost 5 us a tape)
            tape.__dict__["_tapeviz_state"] = state
            if len(self.tapes) > self.max_tapes:
                self.drop_oldest_tape()
        self.active.append(state)
        self.resume_span(state)
        return state

    def traced_tape(self, tape, frame) -> None:
        """A tape entered while a tf.function is traced: TensorFlow records it into the
        function's graph, so its ops run inside the function's one op. Listed (once per
        trace) with the tf.function's name, the file and line of its `with`, and its real
        parent; a warning at that line says how to see its ops (--eager)."""
        if tape.__dict__.get("_tapeviz_traced"):
            return
        at = traced_at(frame, self.files)
        library = at.file is None and library_train_step(frame.f_code)
        if library:     # fit()'s default train_step: its tape is where the program called fit
            user = self.user_frame(frame)
            at = at._replace(file=self.here, line=user.f_lineno if user else None)
        outer = self.traced_open[-1] if self.traced_open else (
            self.active[-1].rec if self.active else None)
        rec = Tape(self.new_tape_id(), at.line, tape._persistent,
                   tape._watch_accessed_variables, outer.id if outer is not None else None,
                   file=at.file)
        rec.function = at.function or at.python or "a tf.function"
        self.tapes.append(rec)
        self.traced_open.append(rec)
        tape.__dict__["_tapeviz_traced_rec"] = tape.__dict__["_tapeviz_traced"] = rec
        # the ops its block builds into this graph are its traced graph (traced_graph.py)
        self.traced_graphs[rec.id] = weakref.ref(tf.compat.v1.get_default_graph())
        tape.__dict__["_tapeviz_traced_from"] = self.next_op
        if (at.file, at.line) not in self.traced_lines:
            self.traced_lines.add((at.file, at.line))
            self.warnings.append({"line": at.line, "file": at.file, "kind": "traced",
                                  "message": reasons.traced_tape_note(rec.function, at.python,
                                                                         library)})
        if len(self.tapes) > self.max_tapes:
            self.drop_oldest_tape()

    def new_tape_id(self) -> int:
        """The next tape's id; tapes a window left unrecorded take theirs too, so their step
        summaries name a tape no recorded one shares."""
        self.next_tape += 1
        return self.next_tape - 1

    def traced_tape_exit(self, tape) -> None:
        rec = tape.__dict__.pop("_tapeviz_traced_rec", None)
        if rec is not None and rec in self.traced_open:
            self.traced_open.remove(rec)
            rec.recording_spans.append([tape.__dict__.pop("_tapeviz_traced_from"), self.next_op])

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

    def reset_tape(self, tape, frame) -> None:
        """tape.reset(): TensorFlow drops what the tape recorded and, inside its block,
        records afresh. The recording keeps what was dropped in `resets`, and a new span."""
        state = self.state_of(tape)
        if state is None:
            return
        recording = state.span_start is not None
        self.pause_span(state)
        rec = state.rec
        rec.resets.append({"line": frame.f_lineno if frame else None, "op": self.next_op,
                           "ops": rec.ops, "watched": rec.watched})
        rec.ops, rec.watched = [], []
        state.ids.clear()
        state.held.clear()
        state.edges.clear()
        if recording:
            self.resume_span(state)

    def watch(self, tape, tensors, frame) -> None:
        state = self.state_of(tape)
        if state is None:
            return
        line = frame.f_lineno if frame else None
        for t in nest.flatten(tensors):
            obj = handle_or_self(t)
            if obj is None:
                continue
            variable = obj is not t             # watched by its resource handle
            rid = self.tensor_id(obj, line)
            if variable:
                self.read_variable(rid, t, obj)
            state.ids.add(obj._id)
            state.held[obj._id] = t if variable else obj
            if rid not in state.rec.watched:
                state.rec.watched.append(rid)
        self.scan_names(frame)
