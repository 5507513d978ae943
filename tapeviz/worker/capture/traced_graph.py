"""Traced tapes' graphs: the ops TensorFlow builds into a tf.function's graph while a tape
entered during the trace is inside its `with` block, or its gradient call runs. Recorded as
ops with shapes and dtypes and no values (nothing ran: the graph runs later, as one op),
each marked `traced` with the tf.function's name. Read from the op callback TensorFlow
calls as it builds each graph op, which returns None: the graph is the program's own.
"""
from __future__ import annotations

import math
import sys
import weakref
from typing import Optional

import tensorflow as tf
from tensorflow.python.framework import tensor_util
from tensorflow.python.util import nest

from ...recording import (BACKWARD, CONSTANT, FORWARD, INTERMEDIATE, GradResult, GradientCall,
                          Op, Tensor)
from .. import numerics
from ..traced import traced_line
from .tensors import SMALL_VALUE, EagerTensor, handle_or_self

# Placeholders are the function's arguments and the captured values (variables, constants)
# it reads: drawn as the tensors they stand for, not as ops of their own
_PLACEHOLDER = "Placeholder"
TAPE_SCOPE = "gradient_tape"      # TensorFlow's scope for a gradient's ops
TRACED_NONE = ("None in the traced graph: TensorFlow found no path from the target to it "
               "(record with --eager to see why, op by op)")


def _keras_path() -> str:
    """The Keras layer path open now ("regressor/dense"), if Keras is in use; Keras keeps it
    apart from TensorFlow's name scopes, without the graph's suffixes."""
    scopes = sys.modules.get("keras.src.backend.common.name_scope")
    return scopes.current_path() if scopes is not None else ""


class TracedGraphs:
    """Session's part that owns `traced_graphs`, `traced_call` and `captured`: what each
    traced tape's block and gradient call built into the function's graph."""

    def traced_open_on(self, graph) -> list:
        """The traced tapes inside their `with` block in `graph` (not in a nested one)."""
        return [rec for rec in self.traced_open
                if (ref := self.traced_graphs.get(rec.id)) is not None and ref() is graph]

    def on_graph_op(self, op_type, inputs, outputs, graph, caller) -> None:
        """One op TensorFlow just built into `graph`: recorded when a traced tape's block or
        its gradient call built it. Runs while tracing only, once per op per trace."""
        call = self.traced_call
        backward = call is not None and call[2]() is graph
        tapes = self.traced_open_on(graph)
        if not (backward or tapes):
            return
        if op_type.__class__ is bytes:
            op_type = op_type.decode()
        if op_type == _PLACEHOLDER:
            return
        file, line, frame = traced_line(caller, self.files, self.traced_lines_cache)
        if frame is not None and self.scanned.get(id(frame)) != line:
            self.scanned[id(frame)] = line        # the user's names for the graph's tensors
            self.scan_names(frame)
        if op_type == "Const" and len(outputs) == 1:
            self.graph_constant(outputs[0], line, file)     # a constant, as eagerly: no op
            return
        op_id = self.next_op
        self.next_op = op_id + 1
        in_ids = [self.graph_tensor_id(t, graph, line, file) for t in inputs]
        out_ids = [self.new_graph_tensor(t, line, file, op_id) for t in outputs]
        if op_type == "ReadVariableOp" and in_ids and out_ids:
            self.shape_variable(in_ids[0], outputs[0])
        scope = self.graph_scope(outputs[0].name.rsplit(":", 1)[0] if outputs else "")
        function = next((rec.function for rec in tapes), None) or (
            call[0].function if call is not None else None)
        for rec in tapes:
            rec.ops.append(op_id)
        self.append_op(Op(op_id, op_type, in_ids, out_ids, line, scope,
                          [rec.id for rec in tapes], BACKWARD if backward else FORWARD, None,
                          None, call[1] if backward else None, file, function))

    def graph_scope(self, name: str) -> Optional[str]:
        """The op's scope as eagerly: a graph makes scope names unique ("regressor_1/dense_1"
        for Keras's layer "dense" of model "regressor"), so the Keras layer path open now
        replaces that prefix, which is remembered for the gradient's ops
        ("gradient_tape/regressor_1/dense_1/MatMul" -> "gradient_tape/regressor/dense")."""
        if "/" not in name:
            return None
        parts = name.split("/")[:-1]
        keras = _keras_path()
        if keras:
            k = keras.count("/") + 1
            if len(parts) >= k:
                self.graph_scopes["/".join(parts[:k])] = keras
                return "/".join([keras, *parts[k:]])
        head = [parts.pop(0)] if parts[0] == TAPE_SCOPE else []
        for k in range(len(parts), 0, -1):
            known = self.graph_scopes.get("/".join(parts[:k]))
            if known is not None:
                return "/".join([*head, known, *parts[k:]])
        return "/".join(head + parts) or None

    def graph_tensor_id(self, t, graph, line, file) -> int:
        """The recording id of a graph op's input: a value the function captured (a
        variable's handle, a constant) is the eager tensor it stands for, so the traced
        graph meets the program's variables by their names."""
        rid = self.tid.get(t._id)
        if rid is not None:
            return rid
        external = self.captured_value(t, graph)
        if external is not None:
            rid = self.tensor_id(external, line)
        else:
            rid = self.new_graph_tensor(t, line, file, None)
            if t.op.type == _PLACEHOLDER:        # an argument of the function: its name
                self.tensors[rid].name = t.op.name
        self.tid[t._id] = rid
        return rid

    def captured_value(self, t, graph) -> Optional[EagerTensor]:
        """The eager tensor `graph` captured as its placeholder `t`, or None."""
        table = self.captured.get(id(graph))
        if table is None or table[0]() is not graph or t._id not in table[1]:
            table = self.captured[id(graph)] = (weakref.ref(graph), {
                inner._id: outer for outer, inner in getattr(graph, "captures", ())
                if isinstance(outer, EagerTensor)})
        return table[1].get(t._id)

    def new_graph_tensor(self, t, line, file, producer) -> int:
        rid = self.next_tensor
        self.next_tensor = rid + 1
        self.tid[t._id] = rid
        shape = t.shape
        self.tensors[rid] = Tensor(rid, None, shape.as_list() if shape.rank is not None else None,
                                   t.dtype.name, INTERMEDIATE, producer=producer, line=line,
                                   file=file)
        return rid

    def graph_constant(self, t, line, file) -> None:
        """A constant built into the graph: its value is in the op's attribute (no op runs
        to read it), kept as an eager constant's is when it is small."""
        rid = self.new_graph_tensor(t, line, file, None)
        rec = self.tensors[rid]
        rec.kind = CONSTANT
        if rec.shape is not None and math.prod(rec.shape) <= SMALL_VALUE \
                and rec.dtype not in numerics.NON_NUMERIC_DTYPES:
            a = tensor_util.MakeNdarray(t.op.get_attr("value"))
            rec.stats = numerics.stats(a)
            rec.value = numerics.plain_value(a)

    def shape_variable(self, rid, value) -> None:
        """A variable first seen in a traced graph: its shape and dtype from the read."""
        var = self.tensors.get(rid)
        if var is not None and var.dtype == "resource":
            var.shape = value.shape.as_list() if value.shape.rank is not None else None
            var.dtype = value.dtype.name

    # -- a traced tape's gradient call -----------------------------------------------------

    def traced_gradient(self, tape, target, sources, compute, caller):
        """`tape.gradient` of a traced tape, as the function is traced: TensorFlow builds the
        backward ops into the graph; each is recorded (phase backward), and the call names
        its target, sources and the graph tensors that will hold their gradients."""
        rec = tape.__dict__["_tapeviz_traced"]
        graph = tf.compat.v1.get_default_graph()
        call = self.quietly("could not note this traced gradient call", self._traced_call,
                            rec, target, sources, caller)
        outer = self.traced_call
        if call is not None:
            self.traced_call = (rec, len(rec.gradients) - 1, weakref.ref(graph))
        try:
            grads = compute()
        except Exception as e:
            if call is not None:
                call.error = f"{type(e).__name__}: {e}"
            raise
        finally:
            self.traced_call = outer
        if call is not None:
            self.quietly("could not note this traced gradient call", self._traced_results,
                         call, sources, grads)
        return grads

    def _traced_call(self, rec, target, sources, caller) -> GradientCall:
        file, line, frame = traced_line(caller, self.files, self.traced_lines_cache)
        self.scan_names(frame)                  # names for the target and sources
        call = GradientCall(line, "gradient", self._traced_ids(target, line, file),
                            self._traced_ids(sources, line, file), file=file,
                            note="traced: its ops were built into the tf.function's graph "
                                 "and ran there, so no values were recorded")
        rec.gradients.append(call)
        return call

    def _traced_ids(self, structure, line, file, keep_none: bool = False) -> list:
        """Recording ids of the tensors and variables in `structure` (a variable by its
        handle); with `keep_none`, None in the place of anything else."""
        graph = tf.compat.v1.get_default_graph()
        out = []
        for obj in nest.flatten(structure):
            if isinstance(obj, tf.IndexedSlices):   # a sparse gradient: its values
                obj = obj.values
            t = handle_or_self(obj)            # (never `or`: a tensor's truth runs it)
            if t is None and isinstance(obj, tf.Tensor):
                t = obj
            if t is not None:
                out.append(self.tensor_id(t, line) if isinstance(t, EagerTensor)
                           else self.graph_tensor_id(t, graph, line, file))
            elif keep_none:
                out.append(None)
        return out

    def _traced_results(self, call, sources, grads) -> None:
        source_ids = self._traced_ids(sources, call.line, call.file, keep_none=True)
        grad_ids = self._traced_ids(grads, call.line, call.file, keep_none=True)
        for source, grad in zip(source_ids, grad_ids):
            if source is not None:
                call.results.append(GradResult(source, grad, None if grad is not None
                                               else TRACED_NONE))

    def quietly(self, what, fn, *args):
        """Bookkeeping whose failure becomes a warning, never the program's exception."""
        try:
            return fn(*args)
        except Exception as e:
            self.fault(what, e)
            return None
