"""Tensors and names: each TF tensor's recording id, its description (shape, dtype, stats,
small values), and the user's Python names bound to tensors and variables.
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np
import tensorflow as tf
from tensorflow.python.eager import record as tape_record
from tensorflow.python.framework.ops import EagerTensor   # no eager context at import

from .. import numerics
from ...recording import (CONSTANT, INTERMEDIATE, VARIABLE, Alert, Tensor)

SMALL_VALUE = 64                  # tensors up to this many elements keep their full value
BIG = 16_384                      # tensors above this many elements: stats on the stats thread
LAZY_BUDGET = 64 * 2**20          # bytes of tensors held until we know they are kept

RESOURCE = tf.resource.as_datatype_enum


class _DtypeNames(dict):
    """TF dtype enum -> its name ("float32"), filled on first sight of each dtype."""

    def __missing__(self, enum):
        self[enum] = name = tf.dtypes.as_dtype(enum).name
        return name


_DTYPE_NAMES = _DtypeNames()


class _ItemSizes(dict):
    """dtype name -> bytes per element, for the byte budget of held tensors."""

    def __missing__(self, name):
        self[name] = size = tf.as_dtype(name).size
        return size


_ITEMSIZE = _ItemSizes()
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
        enum = t._datatype_enum()          # not .dtype, a Python property: this runs per tensor
        if enum == RESOURCE:
            rec = Tensor(rid, self.handle_names.get(tf_id), [], "resource", VARIABLE,
                         producer=producer, line=line, file=self.here)
        else:
            # Positional (id, name, shape, dtype, kind, value, stats, producer, line,
            # trainable, file): keywords cost more, and this runs for every tensor
            rec = Tensor(rid, None, list(t._shape_tuple()), _DTYPE_NAMES[enum],
                         INTERMEDIATE if producer is not None else CONSTANT,
                         None, None, producer, line, None, self.here)
            self.describe(rec, t)
        self.tensors[rid] = rec
        return rid

    def describe(self, rec: Tensor, t) -> None:
        """Describe `rec` from `t`, off the op callback's path where it can be: a big
        tensor's stats go to the stats thread; every other numeric tensor is held (within
        a byte budget) until the bounds decide whether its op is kept, so a kept one is
        described once, at finish, and a dropped one only gets the NaN/Inf check its
        alert needs. Tensors are immutable, so the value read later is the value now."""
        if rec.dtype in numerics.NON_NUMERIC_DTYPES:
            self.describe_non_numeric(rec, t)
            return
        size = math.prod(rec.shape)
        self.pending_stats.add(rec.id)
        if size > BIG:
            try:
                a = t._numpy_internal()   # a view, no copy; the job holds the tensor
            except Exception:
                self.pending_stats.discard(rec.id)
                return
            # Its NaN/Inf alert is decided on the stats thread; the earliest op per kind and
            # phase wins at finish.
            self.deferred.submit(self._describe_later(rec, self.op_phase), (a, t), a.nbytes)
            return
        nbytes = size * _ITEMSIZE[rec.dtype]
        self.lazy[rec.id] = (rec, t, self.op_phase, nbytes)
        self.lazy_bytes += nbytes
        while self.lazy_bytes > LAZY_BUDGET:
            self.settle(next(iter(self.lazy)), kept=True)

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

    def _describe_later(self, rec: Tensor, phase: str):
        def job(held):
            self.pending_stats.discard(rec.id)
            try:
                a = held[0]
                rec.stats = stats = numerics.stats(a)
                if a.size <= SMALL_VALUE:
                    rec.value = numerics.plain_value(
                        a, stats is not None and not (stats.nan or stats.inf))
            except Exception as e:    # on the stats thread too: a warning, never the program's
                rec.stats = rec.value = None
                self.fault(f"could not describe this {rec.dtype} tensor", e, rec.line, rec)
                return
            if stats is not None and rec.producer is not None and (stats.nan or stats.inf):
                for kind, count in (("nan", stats.nan), ("inf", stats.inf)):
                    if count:
                        self.late_alerts.append(Alert(kind, rec.producer, rec.id, rec.line, phase,
                                                     file=rec.file))
        return job

    def settle(self, rid: int, kept: bool) -> None:
        """Describe a held tensor (`kept`), or give a dropped one its NaN/Inf check alone."""
        rec, t, phase, nbytes = self.lazy.pop(rid)
        self.lazy_bytes -= nbytes
        self.pending_stats.discard(rid)
        try:
            a = t._numpy_internal()
        except Exception:
            return
        if kept or rid in self.norms_from_stats or (rec.producer is not None and a.dtype.kind in "fc"
                    and not np.isfinite(np.add.reduce(a.reshape(-1)))):
            self._describe_later(rec, phase)((a, t))    # a NaN/Inf (or overflow): count it

    def settle_dropped(self) -> None:
        """Held tensors that compaction forgot: only their NaN/Inf check is still owed."""
        for rid in [rid for rid in self.lazy if rid not in self.tensors]:
            self.settle(rid, kept=False)

    def settle_all(self) -> None:
        self.settle_dropped()
        for rid in list(self.lazy):
            self.settle(rid, kept=True)

    def merge_late_alerts(self) -> None:
        """Alerts found on the stats thread join the others: the first op per kind and phase."""
        if not self.late_alerts:
            return
        first = {}
        for alert in self.alerts + self.late_alerts:
            key = (alert.kind, alert.phase)
            if key not in first or (alert.op or 0) < (first[key].op or 0):
                first[key] = alert
        self.alerts = list(first.values())
        self.late_alerts = []

    def describe_variable(self, handle_rid, value, handle):
        var = self.tensors[handle_rid]
        if var.stats is None and handle_rid not in self.pending_stats:
            var.shape = list(value.shape.as_list())
            var.dtype = value.dtype.name
            self.describe(var, value)
        if var.name is None:
            var.name = self.handle_names.get(handle._id)
        if var.trainable is None:
            var.trainable = self.trainable.get(handle._id)

    def read_variable(self, rid, variable, handle) -> None:
        """Describe a variable from its current value, unseen by tapes and the recording."""
        if self.tensors[rid].stats is not None or rid in self.pending_stats:
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
