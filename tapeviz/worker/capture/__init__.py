"""Worker side: what one run recorded, and the hooks that record it.

`Session` (session.py) is TensorFlow's op callback plus the bookkeeping behind the
instrumented tape, in parts: tensors (tensors.py), the program's names for them (names.py),
ops and tapes (ops.py), gradient calls and alerts (gradients.py).
"""
from .ops import function_call
from .session import DEFAULT_MAX_OPS, Session
from .tensors import EagerTensor, handle_or_self

__all__ = ["DEFAULT_MAX_OPS", "EagerTensor", "Session", "function_call", "handle_or_self"]
