"""The forward side of a PyTorch run: every torch call the program makes, as an op.

A TorchFunctionMode sees each call at the level the program wrote it (`w * x` is `mul`,
`model(x)` reaches `linear` and `relu`); PyTorch pops the mode while it runs, so the calls
a torch function makes inside are not seen twice. Each output's autograd node gets the op's
id in its `metadata` (the node's own dict for tools), which is how backward.py names the
line of each backward node without holding the graph alive.
"""
from __future__ import annotations

import sys
import time

import torch
from torch.overrides import TorchFunctionMode

from ..frames import nearest_user_frame
from ...recording import FORWARD, PYTORCH, Op
from . import plainly
from .backward import GRADIENT_CALLS, Backward
from .tensors import Tensors

# Calls that read or print a tensor rather than compute one
_NOT_OPS = frozenset({"__get__", "__set__", "__repr__", "__format__", "__str__", "__len__",
                      "__iter__", "__bool__", "__hash__", "__index__", "__int__", "__float__",
                      "__reduce_ex__", "__deepcopy__", "__setstate__", "__array__",
                      "__contains__", "__dir__", "numpy", "tolist", "item", "size", "dim",
                      "stride", "data_ptr", "element_size", "register_hook", "retain_grad",
                      "requires_grad_", "detach_"})
META = "tapeviz"          # the key of our entry in an autograd node's metadata
_GRAD = torch.Tensor.grad  # the `.grad` property: its getter is a call the mode sees


def op_type(func) -> str:
    """The op's type in PyTorch's words: `Tensor.__mul__` is `mul`, `__rsub__` `rsub`,
    `__truediv__` `div`."""
    name = getattr(func, "__name__", None) or type(func).__name__
    if name.startswith("__") and name.endswith("__"):
        name = name[2:-2]
        if name.startswith("i") and name[1:] in _DUNDER_MATH:
            name = name[1:] + "_"                 # `x += 1`: in place
    return {"truediv": "div", "rtruediv": "rdiv"}.get(name, name)


_DUNDER_MATH = {"add", "sub", "mul", "truediv", "matmul", "pow", "floordiv", "mod", "and",
                "or", "xor", "lshift", "rshift"}


def _tensors(value) -> list:
    """The tensors in a call's argument or result (one level of list or tuple)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, torch.Tensor)]
    return []


class Capture(TorchFunctionMode):
    """The run's PyTorch recorder: entered when the program imports torch."""

    def __init__(self, session):
        super().__init__()
        self.session = session
        self.tensors = Tensors(session)
        self.ops_by_id: dict = {}     # op id -> Op, for the tapes' forward ops
        self.backward = Backward(session, self.tensors, self.full, self.ops_by_id)
        self.dropped = 0
        self.last = time.perf_counter()
        self.entered = False

    def full(self) -> bool:
        """Whether the op bound is reached: later steps leave their summaries alone."""
        return len(self.ops_by_id) >= self.session.max_ops

    def start(self) -> None:
        self.session.framework = PYTORCH
        self.__enter__()
        self.entered = True

    def stop(self) -> None:
        if self.entered:
            self.entered = False
            self.__exit__(None, None, None)
        if self.dropped:
            s = self.session
            s.dropped_ops += self.dropped

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        caller = plainly.caller_of(func, sys._getframe(1))    # the frame that made the call
        if func in GRADIENT_CALLS:
            return self.backward.call(func, args, kwargs, self.ops_by_id, caller)
        started = time.perf_counter()
        out = plainly.call(func, args, kwargs, caller)
        raw = getattr(func, "__name__", None)
        if out is None and getattr(func, "__self__", None) is _GRAD and args and not self.session.quiet:
            try:                       # `x.grad` read as None: the page says why
                self.backward.explain_none(args[0], caller)
            except Exception as e:     # noqa: BLE001 - a reason is a label only
                self.session.fault("could not say why a PyTorch .grad is None", e)
        if raw in _NOT_OPS or self.session.quiet:
            return out
        outputs = _tensors(out)
        if not outputs:
            return out
        name = op_type(func)
        try:
            self._record(name, args, kwargs, outputs, started, caller)
        except Exception as e:        # noqa: BLE001 - tapeviz's failure, not the program's
            self.session.fault(f"could not record PyTorch's {name}", e)
        return out

    def _record(self, name: str, args, kwargs, outputs: list, started: float, caller) -> None:
        s = self.session
        if self.full():
            self.dropped += 1          # the steps' summaries go on (backward.py)
            return
        frame, file = nearest_user_frame(caller, s.files)
        if frame is not caller and all(t.grad_fn is None for t in outputs):
            # a library's own work off the autograd graph (a DataLoader's indexing, an
            # optimizer's in-place update): not the program's ops. A value it changed in
            # place is recorded anew where the program next uses it (tensors.py)
            return
        line = frame.f_lineno if frame is not None else None
        given = [t for v in (*args, *kwargs.values()) for t in _tensors(v)]
        if not given and all(t.grad_fn is None for t in outputs):
            # `torch.tensor(2.0)`, `torch.zeros(3)`: made from Python values, as TensorFlow's
            # constants and variables are; the tensor is recorded where it was made
            for t in outputs:
                self.tensors.rid(t, line, file)
            return
        op_id = s.next_op
        s.next_op += 1
        inputs = [self.tensors.rid(t, line, file) for t in given]
        rids = [self.tensors.rid(t, line, file, producer=op_id) for t in outputs]
        op = Op(op_id, name, inputs, rids, line, None, [], FORWARD, started - self.last,
                file=file)
        self.last = time.perf_counter()
        s.ops.append(op)
        self.ops_by_id[op_id] = op
        for t, rid in zip(outputs, rids):
            node = t.grad_fn
            if node is not None:
                node.metadata.setdefault(META, (op_id, {}))[1][t.output_nr] = rid
