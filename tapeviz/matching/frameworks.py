"""A PyTorch recording beside a TensorFlow one: which ops the two have in common, in one
vocabulary. A tape records `ReadVariableOp` where PyTorch reads a leaf directly, and each
side's backward ops are its own (TensorFlow's gradient ops, PyTorch's autograd nodes), so
across frameworks the forward ops on a tape (or autograd graph) are matched, by TensorFlow's
name for them and in execution order, and the gradients by what each call returned.
Plain data; no TensorFlow, no PyTorch."""
from __future__ import annotations

from typing import Optional

from ..recording import FORWARD, PYTORCH, Recording

# PyTorch's name for an op (forward.py's op_type) -> TensorFlow's op type for the same math
TORCH_AS_TF = {
    "add": "AddV2", "sub": "Sub", "rsub": "Sub", "mul": "Mul", "div": "RealDiv",
    "rdiv": "RealDiv", "neg": "Neg", "pow": "Pow", "matmul": "MatMul", "mm": "MatMul",
    "exp": "Exp", "log": "Log", "sqrt": "Sqrt", "square": "Square", "abs": "Abs",
    "sin": "Sin", "cos": "Cos", "tanh": "Tanh", "sigmoid": "Sigmoid", "relu": "Relu",
    "sum": "Sum", "mean": "Mean", "max": "Max", "min": "Min", "maximum": "Maximum",
    "minimum": "Minimum", "reshape": "Reshape", "view": "Reshape", "transpose": "Transpose",
    "t": "Transpose", "softmax": "Softmax", "log_softmax": "LogSoftmax", "conv2d": "Conv2D",
}
# TensorFlow's other names for the same math
_TF_SAME = {"Add": "AddV2", "Div": "RealDiv"}
_TF_TYPES = frozenset(TORCH_AS_TF.values())


def across(a: Recording, b: Recording) -> bool:
    """Whether the two were made by different frameworks' autograd."""
    return a.framework != b.framework


def common_type(rec: Recording, op) -> Optional[str]:
    """The op's type in TensorFlow's words when the other framework has it too, else None."""
    if rec.framework == PYTORCH:
        return TORCH_AS_TF.get(op.type)
    kind = _TF_SAME.get(op.type, op.type)
    return kind if kind in _TF_TYPES else None


def comparable(rec: Recording, ops: list) -> list:
    """The forward ops on a tape that the other framework has a name for, in order."""
    return [op for op in ops if op.phase == FORWARD and op.tapes and common_type(rec, op)]
