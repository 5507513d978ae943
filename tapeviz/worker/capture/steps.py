"""The run's per-call summaries: every gradient call leaves one (the target's value, each
source's gradient norm, Nones and NaN/Inf), bounded apart from the ops, so a long loop's
every step can be charted after the op bound dropped its ops (Recording.steps).
"""
from __future__ import annotations

import math
import threading
from collections import deque, namedtuple
from typing import Optional

from tensorflow.python.util import nest

from .. import numerics
from .tensors import BIG, EagerTensor, handle_or_self
from ... import metrics
from ...recording import (MAX_STEP_HIST, MAX_STEP_NORMS, MAX_STEP_SOURCES, MAX_STEPS,
                          STEP_HIST_EVERY, CallSummary, StepSource, as_float, encode_float)


class StepLog:
    def __init__(self, max_steps: int = MAX_STEPS, max_norms: int = MAX_STEP_NORMS,
                 max_hist: int = MAX_STEP_HIST):
        self.max_steps, self.max_norms, self.max_hist = max_steps, max_norms, max_hist
        self.hist_cells = 0
        self.with_hist: deque = deque()   # the kept summaries that hold histograms, oldest first
        self.site_calls: dict = {}        # (file, line) of a call -> its calls so far
        self.kept: deque = deque()        # (CallSummary, [FlowEntry or None per source])
        self.norms = 0
        self.dropped = 0
        self.calls = 0
        self.sources: dict = {}           # recording id of a source -> its index in `named`
        self.named: list = []             # [StepSource]
        self.site_sources: dict = {}      # (file, line) of a call -> its last sources' indexes
        # summaries not yet streamed to the server (step_stream.py takes them from its thread)
        self.fresh: list = []
        self.fresh_lock = threading.Lock()
        self.last_anomaly = 0             # calls up to the newest anomalous one (keep.py)

    def add(self, session, state, call, target, flat_sources, flat_grads) -> None:
        """After `call` is finished (its results and flow filled): its summary. The norms of
        its sources are read now from the gradients TensorFlow returned (NumPy, no op), as
        for an unrecorded call, so the summary is whole when it is streamed (step_stream.py);
        the flow entries' norms may come only at finish (see flow_entry)."""
        positions, flow = [], []
        for src, result, grad in zip(flat_sources, call.results, flat_grads):
            positions.append(self._source(session, src, result.source))
            flow.append(_Norm(numerics.norm(grad)) if grad is not None else None)
        summary = CallSummary(self.calls, state.rec.id, len(state.rec.gradients) - 1,
                              call.kind, call.line, call.file, sources=positions,
                              hist=self.histograms((call.file, call.line), flat_grads))
        summary.target, summary.scalar = _target(target)
        summary.none = [[i, _reason_kind(r.none_reason)] for i, r in enumerate(call.results)
                        if r.grad is None]
        summary.error = call.error
        self.site_sources[(call.file, call.line)] = positions
        self._keep(summary, flow)

    def add_plain(self, session, tape_id: int, index: int, kind: str, where: tuple, target,
                  sources, results, error: Optional[str]) -> None:
        """The summary of a call on a tape that ran unrecorded (window.py), from what
        TensorFlow returned: the target's value and each result's norm, read with NumPy.
        A source the recording never met (a tensor made in this step) takes the place its
        position had in the last recorded call at the same line, so its series goes on."""
        file, line = where
        site = self.site_sources.get(where, ())
        positions = []
        for i, src in enumerate(nest.flatten(sources)):
            obj = handle_or_self(src)
            rid = session.tid.get(obj._id) if obj is not None else None
            positions.append(self._source(session, src, rid) if rid is not None
                             else site[i] if i < len(site) else -1)
        summary = CallSummary(self.calls, tape_id, index, kind, line, file, sources=positions)
        summary.error = error
        norms = []
        if results is not None:
            summary.target, summary.scalar = _target(target)
            grads = nest.flatten(results)
            summary.hist = self.histograms(where, grads)
            norms = [_Norm(numerics.norm(g)) if g is not None else None for g in grads]
            # Why a gradient is None needs the recorded graph: here the kind is not known
            summary.none = [[i, None] for i, g in enumerate(grads) if g is None]
        self._keep(summary, norms)

    def add_watched(self, tape: int, where: tuple, loss, variables: list, norms: list,
                    hist: list) -> CallSummary:
        """The summary of a step tapeviz saw no gradient call of: a compiled train step's, as
        keras_watch.py read it after the step (its loss, each variable's gradient norm, and
        on some steps their histograms). Its `index` is its step number among `tape`'s (one
        tape id a fit()); the rest as add_call."""
        return self.add_call(tape, self.calls, where, loss, variables, norms, hist)

    def add_call(self, tape: int, index: int, where: tuple, loss, variables: list,
                 norms: list, hist: list, error: Optional[str] = None) -> CallSummary:
        """The summary of a call from numbers read outside TensorFlow's tape (a fit() step,
        a PyTorch backward). `variables` is [(key, path)] per source: `key` a recording id,
        or any int that names that variable alone; None norms are None gradients."""
        file, line = where
        positions = [self._named(key, path) for key, path in variables]
        summary = CallSummary(self.calls, tape, index, "gradient", line, file,
                              sources=positions, hist=hist)
        if loss is not None:
            summary.target, summary.scalar = encode_float(float(loss)), True
        summary.none = [[i, None] for i, n in enumerate(norms) if n is None]
        summary.error = error
        self._keep(summary, [_Norm(n) if n is not None else None for n in norms])
        return summary

    def _keep(self, summary: CallSummary, flow: list) -> None:
        """Keep a summary, the newest MAX_STEPS (and MAX_STEP_NORMS norms) in all, its
        norms filled now (every one is known), and queue it for the stream."""
        self.calls += 1
        _fill(summary, flow)
        if self.anomalous(summary):
            self.last_anomaly = self.calls
        self.kept.append(summary)
        self.norms += len(flow)
        if summary.hist:
            self.with_hist.append(summary)
            self.hist_cells += _cells(summary)
        with self.fresh_lock:
            self.fresh.append(summary)
        while len(self.kept) > self.max_steps or (self.norms > self.max_norms
                                                  and len(self.kept) > 1):
            old = self.kept.popleft()
            self.norms -= len(old.norms)
            self.dropped += 1
            if self.with_hist and self.with_hist[0] is old:
                self.hist_cells -= _cells(self.with_hist.popleft())
        # past the bound the oldest histograms go, their summaries stay (already streamed)
        while self.hist_cells > self.max_hist and len(self.with_hist) > 1:
            old = self.with_hist.popleft()
            self.hist_cells -= _cells(old)
            old.hist = []

    def histograms(self, site: tuple, grads: list) -> list:
        """Every STEP_HIST_EVERY-th call at `site` (its first included), each gradient's
        values in the fixed bins (metrics.histogram), read with NumPy: no op runs. Counted
        per site: a GAN's two calls alternate, and every tenth call of the run would be
        the same one's."""
        n = self.site_calls.get(site, 0)
        self.site_calls[site] = n + 1
        if n % STEP_HIST_EVERY:
            return []
        out = []
        for g in grads:
            values = getattr(g, "values", g)    # IndexedSlices carry their rows in .values
            try:
                out.append(None if g is None else metrics.histogram(values))
            except Exception:                   # noqa: BLE001 - a tensor NumPy cannot read
                out.append(None)
        return out

    def take_fresh(self) -> list:
        """The summaries kept since the last call (the stream's thread asks)."""
        with self.fresh_lock:
            fresh, self.fresh = self.fresh, []
        return fresh

    def anomalous(self, summary: CallSummary) -> bool:
        """The cheap check that keeps a step whole (keep.py): a NaN/Inf or a None gradient,
        a non-finite loss, or an exception in the call."""
        return bool(summary.nan or summary.inf or summary.none or summary.error
                    or summary.target in _NON_FINITE)

    def _source(self, session, src, rid: int) -> int:
        if rid in self.sources:
            return self.sources[rid]
        obj = handle_or_self(src)
        path = getattr(src, "path", None)
        if not isinstance(path, str):
            path = session.variable_names.get(obj._id) if obj is not None else None
        return self._named(rid, path)

    def _named(self, rid: int, path: Optional[str]) -> int:
        """The index of source `rid` in `named`, named by its variable's path when new."""
        index = self.sources.get(rid)
        if index is None:
            if len(self.named) >= MAX_STEP_SOURCES:
                return -1
            index = self.sources[rid] = len(self.named)
            self.named.append(StepSource(rid, None, path,
                                         path.rsplit("/", 1)[0] if path and "/" in path else None))
        return index

    def finish(self, session) -> tuple:
        """(summaries, sources) once every norm is in; names from the tensors' records."""
        for source in self.named:
            rec = session.tensors.get(source.tensor)
            source.name = rec.name if rec is not None else None
        return list(self.kept), self.named


def _cells(summary: CallSummary) -> int:
    return sum(len(h) for h in summary.hist if h)


# A norm known when the call is summarized, read as a FlowEntry's
_Norm = namedtuple("_Norm", "norm")
_NON_FINITE = ("nan", "inf", "-inf")


def _fill(summary: CallSummary, flow: list) -> None:
    """A summary's norms (rounded) and its NaN/Inf positions, from its sources' norms."""
    norms = [as_float(e.norm) if e is not None else None for e in flow]
    summary.norms = [_rounded(n) for n in norms]
    summary.nan = [i for i, n in enumerate(norms) if n is not None and n != n]
    summary.inf = [i for i, n in enumerate(norms) if n is not None and math.isinf(n)]


def _target(target) -> tuple:
    """(its value when a scalar, else its norm; is it a scalar). Read after TensorFlow
    computed the gradient, so the value is there; None for a big or non-tensor target."""
    if isinstance(target, (list, tuple)) and len(target) == 1:
        target = target[0]
    if not isinstance(target, EagerTensor):
        return None, False
    try:
        a = target._numpy()
    except Exception:          # noqa: BLE001 - a resource or string target: no number
        return None, False
    if a.size == 1 and a.dtype.kind in "fiuc":
        return encode_float(float(a.reshape(-1)[0].real)), True
    if a.size > BIG:
        return None, False
    norm = numerics.norm(a)
    return (encode_float(norm) if norm is not None else None), False


def _rounded(norm: Optional[float]):
    """Seven significant digits (a float32's): a long run's norms in half the JSON."""
    if norm is None:
        return None
    if not math.isfinite(norm):
        return encode_float(norm)
    return float(f"{norm:.7g}")


def _reason_kind(reason: Optional[str]) -> Optional[str]:
    """The first clause of a None reason ("a non-differentiable op on the path"): its kind."""
    if not reason:
        return None
    return reason.split(":", 1)[0].split(". ", 1)[0][:80]
