"""The recording state of one run: TensorFlow's op callback plus the bookkeeping behind
the instrumented tape, assembled from its parts (tensors, names, ops and tapes, gradient
calls and alerts), and the finished Recording.
"""
from __future__ import annotations

import ast
import re
import sys
import threading
import time
from collections import deque
from typing import Optional

from tensorflow.python.eager import context

from ...recording import FORWARD, TENSORFLOW, VARIABLE, Error, Recording
from ..frames import UserFiles, nearest_user_frame
from .steps import StepLog
from .deferred import Deferred
from .gradients import GradientsAndAlerts
from .op_log import OpLog
from .ops import OpsAndTapes
from .names import Names
from .tensors import Tensors
from .traced_graph import TracedGraphs

DEFAULT_MAX_OPS = 20_000          # newest ops kept; a 10k-op train step fits whole
_NAMES_TAPE = re.compile(r"\bGradientTape\b")


class Session(Tensors, Names, OpsAndTapes, OpLog, GradientsAndAlerts, TracedGraphs):
    """The recording state of one run, and the hooks that fill it."""

    def __init__(self, source: str, filename: str, max_ops: int = DEFAULT_MAX_OPS):
        self.source = source
        self.filename = filename
        self.max_ops = max_ops
        self.max_tapes = max(16, max_ops // 20)
        self.dropped_tapes = 0
        self.next_tape = 0               # tape ids, recorded or not (new_tape_id)
        self.ops: deque = deque()
        self.dropped_ops = 0
        self.outside: deque = deque()    # ids of the kept ops outside any tape, oldest first
        self.dropped_flow = 0            # flow entries of tapes whose every op was dropped
        self.dropped_steps = 0           # recorded steps the keep policy let go (keep.py)
        self.spans_dropped = 0           # their ops since the last compaction
        self.tensors: dict = {}          # recording id -> Tensor
        self.tid: dict = {}              # TF tensor id -> recording id
        self.tapes: list = []            # Tape records, in creation order
        self.active: list = []           # states of entered tapes, innermost last
        self.traced_open: list = []      # Tape records of traced tapes inside their `with`
        self.traced_lines: set = set()   # (file, line) of traced tapes already warned about
        self.traced_graphs: dict = {}    # traced tape id -> weakref to the graph it is in
        self.traced_call = None          # (tape, call index, weakref to graph) while one runs
        self.captured: dict = {}         # id(graph) -> (weakref, {placeholder id: eager tensor})
        self.traced_lines_cache: dict = {}   # (generated file, line) -> the user's (file, line)
        self.graph_scopes: dict = {}     # a graph's unique scope -> the Keras path it stands for
        self.steps = StepLog()           # every gradient call's summary (Recording.steps)
        self.on_torch = None             # starts PyTorch's capture while the program runs
        self.framework = TENSORFLOW      # PYTORCH once the program imported torch (autograd/)
        self.alerts: list = []
        self.warnings: list = []
        self.handle_names: dict = {}     # TF handle id -> the user's name, for variables
        self.variable_names: dict = {}   # TF handle id -> TF's own name ("conv2d/kernel")
        self.trainable: dict = {}        # TF handle id -> the variable's trainable flag
        self.bindings: dict = {}         # a Python name -> the handle id of the variable it held
        self.rebound: set = set()        # loop targets, names seen holding two different variables
        self.loop_codes: dict = {}       # id(code) -> code whose loop targets are in `rebound`
        self.nameable: dict = {}         # id(class) -> (weakref, TENSOR/VARIABLE/""): _name_one
        self.next_op = 0
        self.next_tensor = 0
        self.grad_depth = 0              # >0 while a gradient/jacobian call runs
        self.grad_call: Optional[int] = None
        self.quiet = 0                   # >0 while tapeviz itself runs ops
        self.wrapper_codes: dict = {}    # code object -> is it a gen_*_ops.py op wrapper
        self.scanned: dict = {}          # id(frame) -> last line whose locals were scanned
        self.code_lines: dict = {}       # id(code) -> (code, {f_lasti: line}), see line_of
        self.last_code = self.last_lasti = self.last_line = None   # line_of's last answer
        self.last_time = time.perf_counter()
        self.module_globals: Optional[dict] = None
        self.files = UserFiles(filename)  # the user's project files, named for the recording
        self.here: Optional[str] = None  # the file of the last user frame found: ops, tensors
        self.window = None               # a TapeWindow when only some top-level tapes record
        self.deferred = Deferred()       # big tensors' stats, off the op callback's path
        self.pending_stats: set = set()  # big tensors' recording ids whose stats jobs are queued
        self.late_alerts: list = []      # NaN/Inf found by deferred jobs
        # recording id -> [its Tensor (None for a held one until settle makes it), then the
        # FlowEntries whose norm (and, for a dense gradient, signed value) its record gives at
        # finish]; such a tensor is described even if its op is dropped
        self.norms_from_stats: dict = {}
        # recording id -> (tensor, phase, bytes, producer, line, file): held, described later;
        # its Tensor record, if made yet, is in `tensors`
        self.lazy: dict = {}
        self.lazy_bytes = 0
        # finish() runs on the main thread, or on the watchdog's while the program still
        # runs (watchdog.py), and may run twice: never at once, and its steps idempotent
        self.finishing = threading.Lock()
        self.timed = set()               # ops whose duration finish() already made µs
        self.op_phase = FORWARD          # the phase of the op being recorded now
        # TF's eager context's per-thread data, read for each op's name scope: one attribute
        # read, where context.context().scope_name is two calls per op
        self.eager_thread = context.context()._thread_local_data

    def torch_imported(self) -> None:
        """The program imported torch: PyTorch's capture starts (autograd.armed sets it)."""
        if self.on_torch is not None:
            self.on_torch()

    # -- where in the user's program are we? ---------------------------------------------

    def user_frame(self, frame=None):
        """The nearest frame in a file of the user's project (library frames skipped); its
        file's name is left in `self.here` for what is stamped next."""
        f, self.here = nearest_user_frame(frame or sys._getframe(2), self.files)
        return f

    def finish(self, stdout: str, error: Optional[Error], duration_s: float) -> Recording:
        with self.finishing:
            return self._finish(stdout, error, duration_s)

    def _finish(self, stdout: str, error: Optional[Error], duration_s: float) -> Recording:
        self.deferred.drain()
        for state in list(self.active):
            self.pause_span(state)
        for tf_id, rid in self.tid.items():
            rec = self.tensors.get(rid)
            if rec is not None and rec.kind == VARIABLE:
                rec.name = self.variable_name(tf_id, rec.name)
                rec.trainable = self.trainable.get(tf_id, rec.trainable)
        files = self.files.sources(self.source)
        block_ends = {}
        for tape in self.tapes:
            text = files.get(tape.file, self.source) if tape.file else self.source
            if text not in block_ends:
                block_ends[text] = _with_block_ends(text)
            tape.end_line = block_ends[text].get(tape.line, tape.end_line)
        self.trim_ops()
        kept = set()
        for op in self.ops:
            kept.add(op.id)
            if op.duration_us is not None and op.id not in self.timed:   # None: traced
                op.duration_us = round(op.duration_us * 1e6, 1)   # the callback keeps seconds
                self.timed.add(op.id)
            # the contract's lists (the op callback keeps tuples: see on_op)
            op.inputs, op.outputs, op.tapes = list(op.inputs), list(op.outputs), list(op.tapes)
        self.settle_all(self.compact())
        self.fill_norms_from_stats()
        self.merge_late_alerts()
        for tape in self.tapes:
            tape.ops = [i for i in tape.ops if i in kept]
        if not self.tapes and _NAMES_TAPE.search(self.source) and error is None:
            self.warnings.append({"line": None, "message": (
                "the program names GradientTape but tapeviz recorded no tape: a tape used "
                "inside a tf.function is traced into a graph rather than run eagerly, and a "
                "tape the program never enters with `with` is not followed")})
        steps, step_sources = self.steps.finish(self)
        dropped = {k: v for k, v in (("ops", self.dropped_ops), ("tapes", self.dropped_tapes),
                                     ("flow entries", self.dropped_flow),
                                     ("steps", self.steps.dropped)) if v}
        return Recording(source=self.source, stdout=stdout, error=error, ops=list(self.ops),
                         tensors=[self.tensors[k] for k in sorted(self.tensors)],
                         tapes=self.tapes, alerts=sorted(self.alerts, key=lambda a: a.op or 0),
                         warnings=self.warnings, dropped=dropped, duration_s=duration_s,
                         program=self.files.main, files=files,
                         skipped=self.window.skipped() if self.window is not None else {},
                         steps=steps, step_sources=step_sources, framework=self.framework)

def _with_block_ends(source: str) -> dict:
    """Line of each `with` statement -> the last line of its block."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {}
    return {node.lineno: node.end_lineno for node in ast.walk(tree)
            if isinstance(node, (ast.With, ast.AsyncWith))}
