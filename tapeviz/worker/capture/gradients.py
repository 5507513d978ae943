"""Gradient calls: each `gradient`/`jacobian` call's results, the gradient flow through
the tape, the scopes of backward ops, and None reasons. (NaN/Inf alerts are decided where
tensors are described, in tensors.py, once their stats exist.)
"""
from __future__ import annotations

from ...words import reasons
from .. import numerics
from ...recording import BACKWARD, FlowEntry, GradientCall, GradResult, encode_float
from .tensors import BIG, RESOURCE, SMALL_VALUE, TRAINABLE_ENUMS, EagerTensor, handle_or_self

# What a gradient can flow through between sources and target: trainable, not a variable
FLOWING_ENUMS = TRAINABLE_ENUMS - {RESOURCE}


def _values(grad):
    """An IndexedSlices' values, else `grad` itself. A tensor first: getattr's default on a
    missing attribute costs an exception, and Tensor's own __getattr__, per gradient."""
    return grad if grad.__class__ is EagerTensor else getattr(grad, "values", grad)


def _flows(t) -> bool:
    """Can a gradient flow through `t` (trainable, not a variable's handle)?"""
    if isinstance(t, EagerTensor):       # _datatype_enum(): .dtype is a Python property
        return t._datatype_enum() in FLOWING_ENUMS
    return t.dtype.as_datatype_enum in FLOWING_ENUMS      # a watched tf.Variable


# A dense gradient's flow entry whose signed value its tensor's record gives at finish
_VALUE_OWED = object()


def _signed(a):
    """A small real gradient's own numbers (signs kept, non-finite encoded), else None: the
    norm alone cannot tell the student that d z / d y is -2, not 2."""
    if a is None or a.size > SMALL_VALUE or not (a.dtype.kind == "f" or a.dtype.name == "bfloat16"):
        return None
    return numerics.plain_value(a)


class GradientsAndAlerts:
    """Session's part that fills gradient calls and `alerts`."""

    # -- gradient flow -----------------------------------------------------------------------
    def between(self, state, target_ids: set, source_ids: set) -> list:
        """TF ids of tensors on the tape on a path from a source to a target."""
        down = set(source_ids)
        for ins, outs in state.edges:
            if not down.isdisjoint(ins):         # a C loop, where any() is a generator frame
                down.update(outs)
        up = set(target_ids)
        for ins, outs in reversed(state.edges):
            if not up.isdisjoint(outs):
                up.update(ins)
        held = state.held
        return [i for i in (down & up) - source_ids if i in held and _flows(held[i])]

    def finish_call(self, state, call: GradientCall, flat_sources, flat_grads, flow_ids,
                    flow_grads, first_backward_op: int) -> None:
        line = call.line
        for src, grad in zip(flat_sources, flat_grads):
            rid = self.source_id(src, line)
            if grad is None:
                call.results.append(GradResult(rid, None, None))   # reason filled in below
                continue
            g = _values(grad)
            gid = self.tensor_id(g, line) if isinstance(g, EagerTensor) else None
            call.results.append(GradResult(rid, gid))
            call.flow.append(self.flow_entry(rid, grad))
        grad_of = {}
        for tf_id, grad in zip(flow_ids, flow_grads):
            rid = self.tid.get(tf_id)
            entry = self.flow_entry(rid, grad) if rid is not None else None
            if entry is None:
                continue
            call.flow.append(entry)
            g = _values(grad)
            if isinstance(g, EagerTensor) and g._id in self.tid:
                grad_of[self.tid[g._id]] = rid
        self.scope_backward_ops(first_backward_op, grad_of)
        if any(r.grad is None for r in call.results):
            self.explain_nones(state, call)

    def flow_entry(self, rid: int, grad):
        """The flow entry of d target / d tensor `rid`, or None when `grad` has no norm. The
        norm is mostly not computed here, so the user's `gradient` call returns without
        waiting for it: when the gradient is a recorded tensor (a backward op's output), its
        stats give the norm at finish (||g||^2 = n (std^2 + mean^2)) and its recorded value
        the signed one; a big one that is not goes to the stats thread. A small dense
        gradient keeps its signed value too (an IndexedSlices' rows are not the gradient)."""
        g = _values(grad)
        dense = g is grad
        if isinstance(g, EagerTensor):
            gid = self.tid.get(g._id)
            described = self.tensors.get(gid)     # None for a held one without a record yet
            if self.owes_stats(gid) or (described is not None and described.stats is not None):
                # A backward op's output, described anyway: its stats give the norm at finish.
                # (settle gives a held one its record then.)
                # (one flat list per tensor, the value owed marked on the entry itself: the
                # collector tracks each list and pair until finish, see on_op)
                entry = FlowEntry(rid, None, _VALUE_OWED if dense else None)
                owed = self.norms_from_stats.get(gid)
                if owed is None:
                    self.norms_from_stats[gid] = [described, entry]
                else:
                    owed.append(entry)
                return entry
            try:
                a = g._numpy_internal()       # a view, no copy: the job holds the buffer alone
            except Exception:
                a = None
            if a is not None and a.size > BIG:
                entry = FlowEntry(rid, None)

                def job(held, entry=entry):
                    entry.norm = encode_float(numerics.norm(held[0]))
                self.deferred.submit(job, (a,), a.nbytes)
                return entry
            if a is not None and dense:
                norm = numerics.norm(a)
                return FlowEntry(rid, encode_float(norm), _signed(a)) if norm is not None else None
        norm = numerics.norm(grad)
        return FlowEntry(rid, encode_float(norm)) if norm is not None else None

    def fill_norms_from_stats(self) -> None:
        """At finish, once every big tensor's stats are in: the norms flow_entry left."""
        for rec, *entries in self.norms_from_stats.values():
            if rec is None:           # a held tensor that could not be read at settle
                for entry in entries:
                    entry.value = None
                continue
            norm = encode_float(numerics.norm_from_stats(rec.stats, rec.shape))
            value = rec.value if rec.dtype.startswith(("float", "bfloat")) else None   # a real one
            for entry in entries:
                entry.norm = norm
                if entry.value is _VALUE_OWED:
                    entry.value = value
        self.norms_from_stats = {}

    def source_id(self, src, line) -> int:
        obj = handle_or_self(src)
        return self.tensor_id(src if obj is None else obj, line)

    def scope_backward_ops(self, first_op: int, grad_of: dict) -> None:
        """Name backward ops after the forward layer they differentiate, as TF's graphs do.

        An op that consumes d target / d t belongs to the gradient of t's producer; ops that
        only consume other backward results inherit their producer's scope."""
        producer_scope = {}
        for op in self.ops_since(first_op):
            if op.phase != BACKWARD:
                continue
            scope = None
            for i in op.inputs:
                forward = grad_of.get(i)
                if forward is not None:
                    producer = self.producer_of(forward)
                    fop = self._op(producer) if producer is not None else None
                    if fop is not None and fop.scope:
                        scope = "gradient_tape/" + fop.scope
                        break
                if i in producer_scope:
                    scope = scope or producer_scope[i]
            if scope and not op.scope:
                op.scope = scope
            for o in op.outputs:
                producer_scope[o] = op.scope

    def explain_nones(self, state, call: GradientCall) -> None:
        ops = list(self.ops)
        for r in call.results:
            if r.grad is None:
                r.none_reason = reasons.none_reason(
                    ops=ops, tensors=self.records(), tape=state.rec, targets=call.target,
                    source=r.source, program=self.source)
