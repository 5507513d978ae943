"""TensorFlow op types in the words of the Python that made them: `Mul` is the `*` a student
wrote, `Sum` their `tf.reduce_sum`. The graph labels ops with these; TensorFlow's own name,
and what a jargon op does, go in the hover. Plain data, no TensorFlow.
"""
from __future__ import annotations

import re
from typing import Optional

# A variable's read: the words count it with its variable (`w`), as the graph draws it
READ_VARIABLE = "ReadVariableOp"

# op type: the Python spellings that make it, the usual one first. An op's own line picks
# among them (`tf.multiply(a, b)` rather than `*`); a line naming none gets the first.
PYTHON = {
    "Mul": ("*", "tf.multiply", "tf.math.multiply"),
    "AddV2": ("+", "tf.add", "tf.math.add"),
    "Add": ("+", "tf.add", "tf.math.add"),
    "Sub": ("-", "tf.subtract", "tf.math.subtract"),
    "RealDiv": ("/", "tf.divide", "tf.math.divide", "tf.realdiv"),
    "Div": ("/", "tf.divide", "tf.math.divide"),
    "DivNoNan": ("tf.math.divide_no_nan",),
    "FloorDiv": ("//", "tf.math.floordiv"),
    "FloorMod": ("%", "tf.math.floormod"),
    "Pow": ("**", "tf.pow", "tf.math.pow"),
    "Neg": ("-", "tf.negative", "tf.math.negative"),
    "MatMul": ("tf.matmul", "tf.linalg.matmul", "@"),
    "BatchMatMulV2": ("tf.matmul", "tf.linalg.matmul", "@"),
    "Square": ("tf.square", "tf.math.square"),
    "Sqrt": ("tf.sqrt", "tf.math.sqrt"),
    "Rsqrt": ("tf.math.rsqrt",),
    "Exp": ("tf.exp", "tf.math.exp"),
    "Log": ("tf.math.log", "tf.log"),
    "Abs": ("tf.abs", "tf.math.abs"),
    "Sin": ("tf.sin", "tf.math.sin"),
    "Cos": ("tf.cos", "tf.math.cos"),
    "Tanh": ("tf.tanh", "tf.math.tanh", "tf.nn.tanh"),
    "Sigmoid": ("tf.sigmoid", "tf.math.sigmoid", "tf.nn.sigmoid"),
    "Relu": ("tf.nn.relu",),
    "Softmax": ("tf.nn.softmax",),
    "Softplus": ("tf.nn.softplus", "tf.math.softplus"),
    "Reciprocal": ("tf.math.reciprocal",),
    "Maximum": ("tf.maximum", "tf.math.maximum"),
    "Minimum": ("tf.minimum", "tf.math.minimum"),
    "SquaredDifference": ("tf.math.squared_difference",),
    "Sum": ("tf.reduce_sum", "tf.math.reduce_sum"),
    "Mean": ("tf.reduce_mean", "tf.math.reduce_mean"),
    "Max": ("tf.reduce_max", "tf.math.reduce_max"),
    "Min": ("tf.reduce_min", "tf.math.reduce_min"),
    "Prod": ("tf.reduce_prod", "tf.math.reduce_prod"),
    "AddN": ("tf.add_n", "tf.math.add_n"),
    "Cast": ("tf.cast",),
    "Reshape": ("tf.reshape",),
    "Transpose": ("tf.transpose",),
    "Identity": ("tf.identity",),
    "StopGradient": ("tf.stop_gradient",),
    "ConcatV2": ("tf.concat",),
    "Pack": ("tf.stack",),
    "Range": ("tf.range",),
    "BroadcastTo": ("tf.broadcast_to",),
    "BiasAdd": ("tf.nn.bias_add",),
    "Conv2D": ("tf.nn.conv2d",),
    "ZerosLike": ("tf.zeros_like",),
    "OnesLike": ("tf.ones_like",),
    "Fill": ("tf.fill",),
    "Less": ("<", "tf.less", "tf.math.less"),
    "Greater": (">", "tf.greater", "tf.math.greater"),
    "LessEqual": ("<=", "tf.less_equal", "tf.math.less_equal"),
    "GreaterEqual": (">=", "tf.greater_equal", "tf.math.greater_equal"),
    "Equal": ("==", "tf.equal", "tf.math.equal"),
}

# What an op a student did not write does, said where its name appears (the hover).
MEANING = {
    "AddN": "adds several tensors at once: the gradient sums the paths that meet at one tensor",
    "BroadcastTo": "repeats a tensor to a bigger shape (how a sum's gradient reaches every element)",
    "ReadVariableOp": "reads a variable's current value",
    "VarHandleOp": "plumbing: TensorFlow's handle to a variable, made when the variable is",
    "AssignVariableOp": "plumbing: writes a new value into a variable (assign, an optimizer step)",
    "AssignAddVariableOp": "writes a variable's value plus a tensor into it (assign_add)",
    "AssignSubVariableOp": "writes a variable's value minus a tensor into it (assign_sub)",
    "VarIsInitializedOp": "plumbing: checks a variable already has a value",
    "DestroyResourceOp": "plumbing: frees a variable TensorFlow no longer needs",
    "NoOp": "plumbing: an op that does nothing, kept for ordering",
    "_EagerConst": "plumbing: copies a Python number or list into a tensor (tf.constant)",
    "OnesLike": "a tensor of ones of the same shape: the gradient of the target with respect to itself",
    "ZerosLike": "a tensor of zeros of the same shape: where no gradient flows",
    "BiasAdd": "adds a layer's bias to each row",
    "Identity": "passes its input through unchanged",
    "Shape": "reads a tensor's shape",
    "Reshape": "the same numbers in another shape",
    "Tile": "repeats a tensor along its axes",
    "SquaredDifference": "(a - b)², element by element",
    "SparseSoftmaxCrossEntropyWithLogits": "softmax and cross-entropy loss in one op",
    "SqrtGrad": "the gradient of tf.sqrt: the incoming gradient times 1 / (2·sqrt(x)), Inf at x = 0",
}


def _found(spelling: str, line: str) -> bool:
    if spelling[0].isalpha():
        return re.search(r"(?<![\w.])" + re.escape(spelling) + r"\s*\(", line) is not None
    if spelling in ("*", "/", "-", "<", ">"):   # not the first character of **, //, ->, <=, >=
        return re.search(r"(?<![*/<>=-])" + re.escape(spelling) + r"(?![*/=>])", line) is not None
    return spelling in line


def python_name(op_type: str, line_text: str = "", guess: bool = True) -> str:
    """The Python that makes an op of this type, as written on its line when the line says
    which spelling; else its usual spelling, or with guess False (an op inside a Keras
    layer, whose line is `model(x)`) TensorFlow's own name, as it is when none is known."""
    spellings = PYTHON.get(op_type)
    if not spellings:
        return op_type
    code = line_text.split("#")[0]
    words = [s for s in spellings if s[0].isalpha()]
    symbols = [s for s in spellings if not s[0].isalpha()]
    return next((s for s in words + symbols if _found(s, code)), spellings[0] if guess else op_type)


# A call on a line, `tf.norm(` or `tf.keras.losses.mse(`: what a student wrote when the op
# itself is one of the several that call ran.
_CALL = re.compile(r"(?<![\w.])(tf(?:\.\w+)+)\s*\(")


def line_call(line_text: str) -> Optional[str]:
    """The one TensorFlow function the line calls (`tf.norm`), None for none or several."""
    calls = set(_CALL.findall(line_text.split("#")[0]))
    return calls.pop() if len(calls) == 1 else None


def backward_name(op_type: str) -> Optional[str]:
    """A backward op in the words of the forward Python it differentiates: SqrtGrad is the
    "grad of tf.sqrt", ReluGrad the "grad of tf.nn.relu"; AddN sums the gradients of paths
    that meet, a "+". None when the type says no more than its own name."""
    if op_type == "AddN":
        return "+"
    for suffix in ("Grad", "GradV2", "BackpropInput", "BackpropFilter"):
        base = op_type[:-len(suffix)] if op_type.endswith(suffix) else None
        if base in PYTHON:
            return "grad of " + PYTHON[base][0]
    return None


def meaning(op_type: str) -> Optional[str]:
    return MEANING.get(op_type)


def hover_lines(op_type: str, shown: str) -> list:
    """TensorFlow's name for an op labelled in Python, and what a jargon op does."""
    lines = [] if shown == op_type else [f"TensorFlow op: {op_type}"]
    if op_type in MEANING:
        lines.append(MEANING[op_type])
    return lines
