"""The recording state of one run: TensorFlow's op callback plus the bookkeeping behind
the instrumented tape, assembled from its three parts (tensors and names, ops and tapes,
gradient calls and alerts), and the finished Recording.
"""
from __future__ import annotations

import ast
import sys
import time
from collections import deque
from typing import Optional

from ...recording import FORWARD, VARIABLE, Error, Recording
from .deferred import Deferred
from .gradients import GradientsAndAlerts
from .ops import OpsAndTapes
from .tensors import TensorsAndNames

DEFAULT_MAX_OPS = 20_000          # newest ops kept; a 10k-op train step fits whole


class Session(TensorsAndNames, OpsAndTapes, GradientsAndAlerts):
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
        self.deferred = Deferred()       # big tensors' stats, off the op callback's path
        self.pending_stats: set = set()  # recording ids whose stats the deferred jobs owe
        self.late_alerts: list = []      # NaN/Inf found by deferred jobs
        self.lazy: dict = {}             # recording id -> mid-size tensor held for its stats
        self.lazy_bytes = 0
        self.op_phase = FORWARD          # the phase of the op being recorded now

    # -- where in the user's program are we? ---------------------------------------------

    def user_frame(self, frame=None):
        f = frame or sys._getframe(2)
        filename = self.filename
        while f is not None:
            if f.f_code.co_filename == filename:
                return f
            f = f.f_back
        return None

    def finish(self, stdout: str, error: Optional[Error], duration_s: float) -> Recording:
        self.deferred.drain()
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
        self.settle_all()
        self.merge_late_alerts()
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
