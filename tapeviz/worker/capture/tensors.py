"""Tensors and names: each TF tensor's recording id, its description (shape, dtype, stats,
small values), and the user's Python names bound to tensors and variables.
"""
from __future__ import annotations

from typing import Optional

import tensorflow as tf
from tensorflow.python.eager import record as tape_record

from .. import numerics
from ...recording import (CONSTANT, INTERMEDIATE, VARIABLE, Tensor)

SMALL_VALUE = 64                  # tensors up to this many elements keep their full value

EagerTensor = type(tf.constant(0.0))
RESOURCE = tf.resource.as_datatype_enum
# What TensorFlow's tape treats as differentiable (backprop_util.IsTrainable).
TRAINABLE_ENUMS = {d.as_datatype_enum for d in (
    tf.float16, tf.bfloat16, tf.float32, tf.float64, tf.complex64, tf.complex128,
    tf.resource, tf.variant)}


class TensorsAndNames:
    """Session's part that owns `tensors`, `tid`, `handle_names`, `variable_names` and
    `trainable`: what each tensor is, and what the user called it."""

    # -- names: the user's Python variables bound to tensors -----------------------------

    def scan_names(self, frame) -> None:
        if frame is None:
            return
        self.scan_namespace(frame.f_globals if frame.f_code.co_name == "<module>"
                            else frame.f_locals)

    def scan_namespace(self, namespace: dict) -> None:
        """Name the tensors and variables bound in `namespace` (first binding wins)."""
        try:
            self._scan_namespace(namespace)
        except Exception as e:        # a name is only a label: never fail the program for it
            self.fault("could not read the program's variable names", e)

    def _scan_namespace(self, namespace: dict) -> None:
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
            rec = self.tensors.get(self.tid.get(value._id))
            if rec is not None and rec.name is None:
                rec.name = name
        elif isinstance(value, tf.Variable) or type(value).__name__ == "Variable":
            try:
                handle = value.handle
            except Exception:
                return
            if isinstance(handle, EagerTensor):
                self.handle_names.setdefault(handle._id, name)
                rec = self.tensors.get(self.tid.get(handle._id))
                if rec is not None:
                    rec.name = self.handle_names[handle._id]

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
        if dtype.as_datatype_enum == RESOURCE:
            rec = Tensor(rid, self.handle_names.get(tf_id), [], "resource", VARIABLE,
                         producer=producer, line=line, file=self.here)
        else:
            rec = Tensor(rid, None, list(t._shape_tuple()), dtype.name,
                         INTERMEDIATE if producer is not None else CONSTANT,
                         producer=producer, line=line, file=self.here)
            self.describe(rec, t)
        self.tensors[rid] = rec
        return rid

    def describe(self, rec: Tensor, t) -> None:
        if rec.dtype in numerics.NON_NUMERIC_DTYPES:
            self.describe_non_numeric(rec, t)
            return
        try:
            a = t._numpy_internal()   # a view, no copy: read here and let go
        except Exception:
            return
        try:
            rec.stats = stats = numerics.stats(a)
            if a.size <= SMALL_VALUE:
                rec.value = numerics.plain_value(a, stats is not None and not (stats.nan or stats.inf))
        except Exception as e:        # tapeviz's fault, never the program's: say so, run on
            rec.stats = rec.value = None
            self.fault(f"could not describe this {rec.dtype} tensor", e, rec.line, rec)

    def describe_non_numeric(self, rec: Tensor, t) -> None:
        """Strings, variants, resources: dtype and shape, a short preview for strings."""
        if rec.dtype != "string":
            return
        try:
            a = t._numpy_internal()   # an object array of bytes; a scalar may come as bytes
            rec.preview = numerics.preview(a)
            if getattr(a, "size", 1) <= SMALL_VALUE:
                rec.value = numerics.string_value(a)
        except Exception as e:
            self.fault("could not read this string tensor", e, rec.line, rec)

    def fault(self, what: str, exc: BaseException, line=None, rec=None) -> None:
        """Record tapeviz's own failure as a warning (on the tensor too, when there is one)
        so that the program runs on exactly as it would plainly."""
        message = f"tapeviz {what} ({type(exc).__name__}: {exc})"[:300]
        if rec is not None:
            rec.warning = message
        if len(self.warnings) < 50 and not any(w.get("message") == message
                                               for w in self.warnings[-10:]):
            self.warnings.append({"line": line, "message": message})

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
