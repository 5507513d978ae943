"""The recording's bound in bytes: a finished recording (its plain dict) is cut to fit the
one message that carries it back, dropping the oldest first, so the program's output, status
and newest steps always come back however much it recorded.

What goes, in order, until the JSON fits (and the tensors are within their count bound):
1. the gradient flow of tapes none of whose ops are kept (the op bound dropped them already;
   a long loop's flows were most of a big recording), oldest tape first;
2. the gradient flow of the other tapes, oldest first;
3. the ops outside any tape (a rollout between train steps), oldest first;
4. the oldest ops of tapes, so newer tapes keep theirs;
5. the oldest tapes, whole.
Tensors nothing kept refers to go with them. `dropped` counts each kind. Never touched:
source, stdout, stderr, error, warnings: they are bounded where they are made.
"""
from __future__ import annotations

import json
from bisect import bisect_right
from collections import deque


_NOTE = "its gradient flow was dropped to keep the recording within its size"


def _size(item) -> int:
    # json's defaults, as the channel sends: ASCII (characters are bytes), and ", " between
    # a list's items
    return len(json.dumps(item, allow_nan=False)) + 2


def _referenced(rec: dict) -> set:
    """Recording ids of the tensors something kept refers to."""
    keep = set()
    for op in rec["ops"]:
        keep.update(op.get("inputs", ()))
        keep.update(op.get("outputs", ()))
    for tape in rec["tapes"]:
        keep.update(tape.get("watched", ()))
        for reset in tape.get("resets", ()):
            keep.update(reset.get("watched", ()))
        for call in tape.get("gradients", ()):
            keep.update(call.get("target", ()))
            keep.update(call.get("sources", ()))
            keep.update(r["grad"] for r in call.get("results", ()) if r.get("grad") is not None)
            keep.update(f["tensor"] for f in call.get("flow", ()))
    keep.update(a["tensor"] for a in rec.get("alerts", ()))
    return keep


def _outside_tapes(rec: dict) -> set:
    """Ids of the ops outside any tape: on no tape, not a gradient's, and outside every
    tape's recording spans (an op in a `with` block that its tape did not record stays
    with the block's)."""
    spans = sorted((start, end) for tape in rec["tapes"]
                   for start, end in tape.get("recording_spans", ()))
    starts = [start for start, _ in spans]
    reach, ends = 0, []
    for _, end in spans:                 # the furthest end of any span opened by then
        reach = max(reach, end)
        ends.append(reach)
    outside = set()
    for op in rec["ops"]:
        if op.get("tapes") or op.get("phase") == "backward":
            continue
        i = bisect_right(starts, op["id"]) - 1
        if i < 0 or ends[i] <= op["id"]:
            outside.add(op["id"])
    return outside


class _Cutter:
    def __init__(self, rec: dict, max_bytes: int, max_tensors: int):
        self.rec, self.max_bytes, self.max_tensors = rec, max_bytes, max_tensors
        self.total = len(json.dumps(rec, allow_nan=False))
        self.counts = {"flow entries": 0, "ops": 0, "tapes": 0, "tensors": 0}

    def fits(self) -> bool:
        return self.total <= self.max_bytes and len(self.rec["tensors"]) <= self.max_tensors

    def forget_tensors(self) -> None:
        """Drop the tensors nothing kept refers to any more (each one's JSON measured only
        here: a recording that fits is measured once, whole)."""
        keep = _referenced(self.rec)
        kept = []
        for t in self.rec["tensors"]:
            if t["id"] in keep:
                kept.append(t)
            else:
                self.total -= _size(t)
                self.counts["tensors"] += 1
        self.rec["tensors"] = kept

    def drop_flows(self, tapes) -> None:
        for tape in tapes:
            for call in tape.get("gradients", ()):
                if call.get("flow"):
                    self.total -= sum(_size(f) for f in call["flow"])
                    self.counts["flow entries"] += len(call["flow"])
                    call["flow"] = []
                    self.total += _size(_NOTE) - _size(call.get("note") or "")
                    call["note"] = _NOTE
            self.forget_tensors()
            if self.fits():
                return

    def drop_ops(self) -> None:
        ops = self.rec["ops"]
        outside = _outside_tapes(self.rec)
        order = deque([op for op in ops if op["id"] in outside]
                      + [op for op in ops if op["id"] not in outside])
        gone = set()
        # ops go in batches (a tenth of what is over, at least one), then unreferenced tensors
        while order and not self.fits():
            over = max(self.total - self.max_bytes, 0)
            freed = 0
            while order and (freed <= over // 10 or not freed):
                op = order.popleft()
                gone.add(op["id"])
                freed += _size(op)
                self.counts["ops"] += 1
            self.total -= freed
            self.rec["ops"] = [op for op in ops if op["id"] not in gone]
            kept = {op["id"] for op in self.rec["ops"]}
            for tape in self.rec["tapes"]:
                tape["ops"] = [i for i in tape.get("ops", ()) if i in kept]
            self.forget_tensors()

    def drop_tapes(self) -> None:
        tapes = self.rec["tapes"]
        while tapes and not self.fits():
            self.total -= _size(tapes.pop(0))
            self.counts["tapes"] += 1
            self.forget_tensors()


def fit(rec: dict, max_bytes: int, max_tensors: int) -> dict:
    """`rec` (a Recording's dict), cut in place so that its JSON is at most `max_bytes` and it
    holds at most `max_tensors` tensors; what was cut is added to rec["dropped"]."""
    cut = _Cutter(rec, max_bytes, max_tensors)
    # the running total is an estimate (a list's last item has no ", "): measured again after
    # each round, and a round more taken if it is still over
    while not cut.fits():
        before = sum(cut.counts.values())
        kept_ops = {op["id"] for op in rec["ops"]}
        for step in (
                lambda: cut.drop_flows([t for t in rec["tapes"]
                                        if not any(i in kept_ops for i in t.get("ops", ()))]),
                lambda: cut.drop_flows(rec["tapes"]),
                cut.drop_ops,
                cut.drop_tapes):
            if cut.fits():
                break
            step()
        cut.total = len(json.dumps(rec, allow_nan=False))
        if sum(cut.counts.values()) == before:
            break                        # nothing droppable is left: what stays is bounded
    if not any(cut.counts.values()):
        return rec
    dropped = rec.setdefault("dropped", {})
    for kind, n in cut.counts.items():
        if n:
            dropped[kind] = dropped.get(kind, 0) + n
    return rec
