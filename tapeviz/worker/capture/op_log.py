"""The op log's bound: the newest `max_ops` ops are kept, those outside any tape (a long
eager rollout between train steps) going first, so the tapes keep their ops; what no kept op,
tape or gradient names is then forgotten.
"""
from __future__ import annotations

import operator
from bisect import bisect_left
from collections import deque
from typing import Optional

from ...recording import FORWARD, Op

_OP_ID = operator.attrgetter("id")


class OpLog:
    """Session's part that bounds `ops` (appended by the op callbacks) and keeps `outside`,
    the ids of the kept ops outside any tape, oldest first."""

    def append_op(self, op: Op) -> None:
        self.ops.append(op)
        if not op.tapes and op.phase is FORWARD and not self.active and not self.traced_open:
            self.outside.append(op.id)
        if len(self.ops) > self.max_ops:
            self.drop_oldest_op()

    def drop_oldest_op(self) -> None:
        """Over the op bound: the oldest op outside any tape goes, so that a long eager loop
        between train steps (a rollout) never pushes out the steps' tapes; with no such op
        kept, the oldest op. Those from between tape ops go a tenth of the bound at once
        (walking the log costs a pass over it), the log up to that much over its bound
        meanwhile: trim_ops() brings it to the bound for the recording."""
        ops, outside = self.ops, self.outside
        if outside and ops[0].id != outside[0]:
            if len(ops) <= self.max_ops + max(1, self.max_ops // 10):
                return
            self._count_dropped(self._drop_outside(len(ops) - self.max_ops))
        else:
            self._count_dropped(self._drop_front())

    def trim_ops(self) -> None:
        """The log within its bound, the ops outside any tape first to go."""
        over = len(self.ops) - self.max_ops
        if over > 0:
            self._count_dropped(self._drop_outside(over) + self._drop_front())

    def _drop_front(self) -> int:
        """Drop the oldest ops while over the bound and none outside any tape is kept behind
        them."""
        ops, outside, n = self.ops, self.outside, 0
        while len(ops) > self.max_ops and (not outside or ops[0].id == outside[0]):
            if ops.popleft().id == (outside[0] if outside else None):
                outside.popleft()
            n += 1
        return n

    def _drop_outside(self, n: int) -> int:
        """Drop the `n` oldest ops outside any tape, from wherever they are in the log."""
        outside = self.outside
        gone = {outside.popleft() for _ in range(min(n, len(outside)))}
        kept = [op for op in self.ops if op.id not in gone]
        self.ops.clear()
        self.ops.extend(kept)
        return len(gone)

    def drop_span(self, span) -> None:
        """Take back one recorded step the keep policy let go (worker/keep.py's Span): its
        ops, tapes and owed gradient norms, by their id ranges; the tensors they alone named
        are forgotten at the next compaction, once a quarter of the bound went so."""
        first, end = span.first_op, span.end_op
        ops = self.ops
        if ops and ops[-1].id >= first and ops[0].id < end:
            kept = [op for op in ops if not first <= op.id < end]
            self.spans_dropped += len(ops) - len(kept)
            ops.clear()
            ops.extend(kept)
            if self.outside and self.outside[-1] >= first:
                self.outside = deque(i for i in self.outside if not first <= i < end)
        self.tapes = [t for t in self.tapes if not span.first_tape <= t.id < span.end_tape]
        owed = self.norms_from_stats
        if owed:
            self.norms_from_stats = {rid: v for rid, v in owed.items()
                                     if not span.first_tensor <= rid < span.end_tensor}
        self.dropped_steps += 1
        if self.spans_dropped >= max(1, self.max_ops // 4):
            self.spans_dropped = 0
            self.settle_dropped(self.compact())

    def _count_dropped(self, n: int) -> None:
        before = self.dropped_ops
        self.dropped_ops += n
        if self.dropped_ops // self.max_ops != before // self.max_ops:
            self.settle_dropped(self.compact())     # every max_ops dropped: forget their tensors

    def compact(self) -> set:
        """Forget tensors that no kept op, tape or gradient refers to (bounds memory); returns
        the recording ids kept."""
        keep = set()
        for op in self.ops:
            keep.update(op.inputs)
            keep.update(op.outputs)
        first = self.ops[0].id if self.ops else self.next_op
        for tape in self.tapes:
            # A tape whose every op is dropped keeps no gradient flow either: in a long loop
            # those flows, and the tensors they name, were most of what was kept
            if tape.ops and tape.ops[-1] < first:
                for call in tape.gradients:
                    if call.flow:
                        self.dropped_flow += len(call.flow)
                        call.flow = []
                        call.note = "its gradient flow was dropped with the tape's ops"
        for tape in self.tapes:
            keep.update(tape.watched)
            for call in tape.gradients:
                keep.update(call.target)
                keep.update(call.sources)
                keep.update(r.grad for r in call.results if r.grad is not None)
                keep.update(f.tensor for f in call.flow)
        for tape in self.tapes:
            if tape.ops and tape.ops[0] < first:
                tape.ops = [i for i in tape.ops if i >= first]
        self.tensors = {k: v for k, v in self.tensors.items() if k in keep}
        self.tid = {k: v for k, v in self.tid.items() if v in keep}
        return keep

    def ops_since(self, first_op: int) -> list:
        """The kept ops from id `first_op` on, read from the newest end: a deque is cheap to
        walk from its ends and costly to index into its middle."""
        newer = []
        for op in reversed(self.ops):
            if op.id < first_op:
                break
            newer.append(op)
        newer.reverse()
        return newer

    def _op(self, op_id: int) -> Optional[Op]:
        ops = self.ops
        if not ops or op_id < ops[0].id:
            return None
        i = op_id - ops[0].id
        if i < len(ops) and ops[i].id == op_id:
            return ops[i]
        i = bisect_left(ops, op_id, key=_OP_ID)  # ops outside tapes went from between
        return ops[i] if i < len(ops) and ops[i].id == op_id else None
