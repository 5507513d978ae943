"""Facts about tensor values, computed with NumPy only.

The recorder calls these from inside TensorFlow's op callback, where no eager op
may run; they import no TensorFlow, so they are tested on plain arrays.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..recording import Stats, encode_float


def stats(a: np.ndarray) -> Optional[Stats]:
    if a.dtype.kind not in "fciub" or a.dtype == object:
        if a.dtype.name == "bfloat16" or a.dtype.name.startswith("float8"):
            a = a.astype(np.float32)
        else:
            return None
    if a.size == 0:
        return Stats(None, None, None, None)
    if a.dtype.kind == "c":
        a = np.abs(a)
    elif a.dtype.kind in "iub":
        a = a.astype(np.float64)
    if a.size == 1:                        # most tensors of a small program: skip NumPy's reductions
        v = float(a.reshape(()))
        if v != v:
            return Stats(None, None, None, None, 1, 0)
        if v in (float("inf"), float("-inf")):
            return Stats(None, None, None, None, 0, 1)
        return Stats(v, v, v, 0.0)
    nan = inf = 0
    flat = a.reshape(-1)
    total = float(np.add.reduce(flat, dtype=np.float64))
    if not np.isfinite(total):             # NaN and Inf propagate into the sum
        nan = int(np.count_nonzero(np.isnan(flat)))
        inf = int(np.count_nonzero(np.isinf(flat)))
        flat = flat[np.isfinite(flat)]
        if flat.size == 0:
            return Stats(None, None, None, None, nan, inf)
        total = float(np.add.reduce(flat, dtype=np.float64))
    n = flat.size
    mean = total / n
    # One pass for the spread: E[x^2] - mean^2 in float64 (a dot product, no temporaries).
    f64 = flat if flat.dtype == np.float64 or n > 4096 else flat.astype(np.float64)
    square = float(np.dot(f64, f64)) / n
    std = float(np.sqrt(max(square - mean * mean, 0.0)))
    return Stats(float(flat.min()), float(flat.max()), mean, std, nan, inf)


def plain_value(a: np.ndarray, finite: bool = False):
    if a.dtype.kind == "f" or a.dtype.name == "bfloat16":
        if finite:
            return a.astype(np.float64).tolist()
        flat = [encode_float(float(x)) for x in a.astype(np.float64).ravel()]
        return np.array(flat, dtype=object).reshape(a.shape).tolist() if a.ndim else flat[0]
    if a.dtype.kind == "c":
        return plain_value(np.abs(a))
    if a.dtype.kind in "SO":
        return np.vectorize(lambda s: s.decode("utf-8", "replace") if isinstance(s, bytes)
                            else str(s), otypes=[object])(a).tolist()
    return a.tolist()


def norm(g) -> Optional[float]:
    """The L2 norm of a gradient (a tensor, an array, or IndexedSlices), in float64."""
    if g is None:
        return None
    values = getattr(g, "values", g)       # IndexedSlices carry their rows in .values
    try:
        a = np.asarray(values)
    except Exception:                      # a CompositeTensor we cannot flatten
        return None
    if a.dtype.kind == "c":
        a = np.abs(a)
    return float(np.sqrt(np.sum(np.square(a, dtype=np.float64)))) if a.size else 0.0
