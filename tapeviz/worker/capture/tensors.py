"""Tensors: each TF tensor's recording id and its description (shape, dtype, stats, small
values), held cheaply until the recording's bounds decide what is kept.
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
# TF dtype enum -> bytes per element, for the numeric dtypes new_tensor holds directly
_NUMERIC_ITEMSIZE = {d.as_datatype_enum: d.size for d in (
    tf.float16, tf.bfloat16, tf.float32, tf.float64, tf.complex64, tf.complex128,
    tf.int8, tf.int16, tf.int32, tf.int64, tf.uint8, tf.uint16, tf.uint32, tf.uint64,
    tf.bool)}
# What TensorFlow's tape treats as differentiable (backprop_util.IsTrainable).
TRAINABLE_ENUMS = {d.as_datatype_enum for d in (
    tf.float16, tf.bfloat16, tf.float32, tf.float64, tf.complex64, tf.complex128,
    tf.resource, tf.variant)}


def handle_or_self(x):
    """The EagerTensor TensorFlow's tape knows `x` by: a variable's resource handle, else `x`
    itself when it is an EagerTensor, else None. A tensor is asked first: getattr(t,
    "handle", None) on one goes through Tensor.__getattr__ and two AttributeErrors, about
    a microsecond each time, and a gradient call asks this of every source and flow tensor."""
    if x.__class__ is EagerTensor:
        return x
    handle = getattr(x, "handle", None)
    if isinstance(handle, EagerTensor):
        return handle
    return x if isinstance(x, EagerTensor) else None


def _record(rid: int, t, producer: Optional[int], line: Optional[int],
            file: Optional[str]) -> Tensor:
    """A tensor's record as first seen: shape, dtype, where; described later."""
    # Positional (id, name, shape, dtype, kind, value, stats, producer, line, trainable,
    # file): keywords cost more
    return Tensor(rid, None, list(t._shape_tuple()), _DTYPE_NAMES[t._datatype_enum()],
                  CONSTANT if producer is None else INTERMEDIATE, None, None, producer, line,
                  None, file)


def _held_record(rid: int, a, enum: int, producer: Optional[int], line: Optional[int],
                 file: Optional[str]) -> Tensor:
    """_record of a held tensor, from its value (the tensor itself is not kept)."""
    return Tensor(rid, None, list(a.shape), _DTYPE_NAMES[enum],
                  CONSTANT if producer is None else INTERMEDIATE, None, None, producer, line,
                  None, file)


class Tensors:
    """Session's part that owns `tensors`, `tid` and the held values: what each tensor is."""

    def tensor_id(self, t, line: Optional[int], producer: Optional[int] = None) -> int:
        rid = self.tid.get(t._id)
        return rid if rid is not None else self.new_tensor(t, line, producer)

    def new_tensor(self, t, line: Optional[int], producer: Optional[int] = None) -> int:
        """Give a tensor seen for the first time its recording id (see new_tensors)."""
        return self.new_tensors((t,), line, producer)[0]

    def new_tensors(self, ts, line: Optional[int], producer: Optional[int] = None) -> list:
        """Give tensors seen for the first time their recording ids. Runs for the outputs of
        every op (one call per op, not per tensor: a call is worth saving there), so the
        common case, a small numeric tensor, makes no record yet: its value is held with what
        its record needs (see `record`) until the bounds decide. The value, not the tensor:
        `_numpy_internal()` aliases the tensor's buffer without a copy (about 1 us) and keeps
        the buffer alone alive, so a tensor the program lets go of dies as it does plainly
        (weakrefs to it clear, TensorFlow's assert_no_new_tensors counts nothing)."""
        tid, lazy, phase, here = self.tid, self.lazy, self.op_phase, self.here
        rids = []
        for t in ts:
            rid = self.next_tensor
            self.next_tensor = rid + 1
            rids.append(rid)
            tf_id = t._id
            tid[tf_id] = rid
            enum = t._datatype_enum()      # not .dtype, a Python property: this runs per tensor
            itemsize = _NUMERIC_ITEMSIZE.get(enum)
            if itemsize is not None:
                size = t._num_elements()
                if size <= BIG:
                    try:
                        a = t._numpy_internal()
                    except Exception:          # no host value (a remote device's): no stats
                        self.tensors[rid] = _record(rid, t, producer, line, here)
                        continue
                    nbytes = size * itemsize
                    lazy[rid] = (a, enum, phase, nbytes, producer, line, here)
                    self.lazy_bytes += nbytes
                    if self.lazy_bytes > LAZY_BUDGET:
                        self.settle_oldest()
                    continue
            if enum == RESOURCE:
                self.tensors[rid] = Tensor(rid, self.handle_names.get(tf_id), [], "resource",
                                           VARIABLE, producer=producer, line=line, file=here)
                continue
            rec = self.tensors[rid] = _record(rid, t, producer, line, here)
            self.describe(rec, t)
        return rids

    def record(self, rid: Optional[int]) -> Optional[Tensor]:
        """The Tensor record of `rid`, made now for a held tensor that has none yet."""
        rec = self.tensors.get(rid)
        if rec is None and rid in self.lazy:
            a, enum, _, _, producer, line, file = self.lazy[rid]
            rec = self.tensors[rid] = _held_record(rid, a, enum, producer, line, file)
        return rec

    def producer_of(self, rid: Optional[int]) -> Optional[int]:
        """The op that made `rid`, read without making a held tensor's record."""
        held = self.lazy.get(rid)
        if held is not None:
            return held[4]
        rec = self.tensors.get(rid)
        return rec.producer if rec is not None else None

    def records(self) -> dict:
        """Every Tensor record, held tensors' made now: for the rare reader of them all."""
        for rid in self.lazy:
            self.record(rid)
        return self.tensors

    def describe(self, rec: Tensor, t) -> None:
        """Describe `rec` from `t`, off the op callback's path where it can be: a big
        tensor's stats go to the stats thread; every other numeric tensor is held (within
        a byte budget) until the bounds decide whether its op is kept, so a kept one is
        described once, at finish, and a dropped one only gets the NaN/Inf check its
        alert needs. Tensors are immutable, so the value read later is the value now.
        (new_tensor holds small ones itself, the same way.)"""
        if rec.dtype in numerics.NON_NUMERIC_DTYPES:
            self.describe_non_numeric(rec, t)
            return
        size = math.prod(rec.shape)
        if size > BIG:
            try:
                a = t._numpy_internal()   # a view, no copy: the job holds the buffer alone
            except Exception:
                return
            # Its NaN/Inf alert is decided on the stats thread; the earliest op per kind and
            # phase wins at finish.
            self.pending_stats.add(rec.id)
            self.deferred.submit(self._describe_later(rec, self.op_phase), (a,), a.nbytes)
            return
        try:
            a = t._numpy_internal()
        except Exception:
            return
        nbytes = size * _ITEMSIZE[rec.dtype]
        self.lazy[rec.id] = (a, t._datatype_enum(), self.op_phase, nbytes, rec.producer,
                             rec.line, rec.file)
        self.lazy_bytes += nbytes
        if self.lazy_bytes > LAZY_BUDGET:
            self.settle_oldest()

    def settle_oldest(self) -> None:
        while self.lazy_bytes > LAZY_BUDGET:
            self.settle(next(iter(self.lazy)), kept=True)

    def owes_stats(self, rid: int) -> bool:
        """Will `rid` be described later (held, or queued on the stats thread)?"""
        return rid in self.lazy or rid in self.pending_stats

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
        a, enum, phase, nbytes, producer, line, file = self.lazy.pop(rid)
        self.lazy_bytes -= nbytes
        owed = self.norms_from_stats.get(rid)
        if not (kept or owed is not None or (
                producer is not None and a.dtype.kind in "fc"
                and not np.isfinite(np.add.reduce(a.reshape(-1))))):
            return                            # dropped, and no NaN/Inf (or overflow) in it
        rec = self.tensors.get(rid) or (owed[0] if owed is not None else None)
        if rec is None:
            try:
                rec = _held_record(rid, a, enum, producer, line, file)
            except Exception as e:            # at finish: a warning, never a lost recording
                rec = Tensor(rid, None, [], "unknown", CONSTANT if producer is None
                             else INTERMEDIATE, producer=producer, line=line, file=file)
                self.fault("could not read this tensor", e, line, rec)
            if kept:
                self.tensors[rid] = rec
        if owed is not None:
            owed[0] = rec                     # the norms flow_entry left come from its stats
        self._describe_later(rec, phase)((a,))

    def settle_dropped(self, keep: set) -> None:
        """Held tensors that compaction forgot (not in `keep`): only their NaN/Inf check is
        still owed."""
        for rid in [rid for rid in self.lazy if rid not in keep]:
            self.settle(rid, kept=False)

    def settle_all(self, keep: set) -> None:
        self.settle_dropped(keep)
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
        if var.stats is None and not self.owes_stats(handle_rid):
            var.shape = list(value.shape.as_list())
            var.dtype = value.dtype.name
            self.describe(var, value)
        if var.name is None:
            var.name = self.handle_names.get(handle._id)
        if var.trainable is None:
            var.trainable = self.trainable.get(handle._id)

    def read_variable(self, rid, variable, handle) -> None:
        """Describe a variable from its current value, unseen by tapes and the recording."""
        if self.tensors[rid].stats is not None or self.owes_stats(rid):
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
