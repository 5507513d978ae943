"""Facts about tensor values, computed with NumPy only.

The recorder calls these from inside TensorFlow's op callback, where no eager op
may run; they import no TensorFlow, so they are tested on plain arrays.
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

from ..recording import Stats, encode_float


# dtypes that have no numbers to summarise: recorded with dtype, shape and a preview only
NON_NUMERIC_DTYPES = frozenset({"string", "variant", "resource"})
PREVIEW_CHARS = 80                # a string tensor's preview, and each string value kept


def stats(a: np.ndarray) -> Optional[Stats]:
    """min, max, mean, std of the finite values, and counts of NaN and Inf. Sums accumulate
    in float64 (a big float32 tensor's in float32 blocks first, see _sums). Never returns a
    non-finite number: overflow is written as "inf"."""
    if not isinstance(a, (np.ndarray, np.generic)):
        return None                        # e.g. a scalar string's bytes
    if a.dtype.kind not in "fciub" or a.dtype == object:
        if a.dtype.name == "bfloat16" or a.dtype.name.startswith("float8"):
            a = a.astype(np.float32)
        else:
            return None
    if a.size == 0:
        return Stats(None, None, None, None)
    if a.dtype.kind == "c":
        a = np.abs(a)
    elif a.dtype.kind == "b":
        a = a.astype(np.float64)
    if a.size == 1:                        # most tensors of a small program: skip NumPy's reductions
        v = float(a.reshape(()))
        if v != v:
            return Stats(None, None, None, None, 1, 0)
        if v in (float("inf"), float("-inf")):
            return Stats(None, None, None, None, 0, 1)
        return Stats(v, v, v, 0.0)
    if a.size <= SMALL_SUMS and a.dtype.kind in "fiu":
        small = _small_stats(a.reshape(-1).tolist())
        if small is not None:
            return small
    nan = inf = 0
    flat = a.reshape(-1)
    lo, hi = float(flat.min()), float(flat.max())   # NaN and Inf show up here
    if flat.dtype.kind == "f" and not (math.isfinite(lo) and math.isfinite(hi)):
        nan = int(np.count_nonzero(np.isnan(flat)))
        inf = int(np.count_nonzero(np.isinf(flat)))
        flat = flat[np.isfinite(flat)]
        if flat.size == 0:
            return Stats(None, None, None, None, nan, inf)
        lo, hi = float(flat.min()), float(flat.max())
    n = flat.size
    scale = max(abs(lo), abs(hi))
    if scale > 1e150:
        # sums of squares would overflow float64: the same facts on a scaled copy (rare)
        with np.errstate(all="ignore"):
            scaled = flat / scale
            mean = float(np.mean(scaled, dtype=np.float64)) * scale
            std = float(np.std(scaled, dtype=np.float64)) * scale
        return Stats(lo, hi, encode_float(mean), encode_float(std), nan, inf)
    total, squares, exact = _sums(flat)
    mean, square = total / n, squares / n
    var = square - mean * mean
    if lo == hi:
        mean, var = lo, 0.0          # a filled tensor (ones_like, a broadcast constant)
    elif var < (1e-8 if exact else 1e-4) * square:
        # The one-pass form cancels for values far from zero (1000 + 0.01 * noise): two
        # passes, in float64
        mean = float(np.mean(flat, dtype=np.float64))
        var = float(np.var(flat, dtype=np.float64))
    return Stats(lo, hi, mean, float(np.sqrt(max(var, 0.0))), nan, inf)


SMALL_SUMS = 32     # up to this many elements, Python's float sums beat NumPy's call costs


def _small_stats(xs: list) -> Optional[Stats]:
    """Stats of a few finite numbers in plain Python: an exact sum (fsum) and a two-pass
    spread, in float64. None when a NaN, an Inf or huge values need NumPy's path."""
    try:
        total = math.fsum(xs)
    except (OverflowError, ValueError):
        return None
    if not math.isfinite(total):
        return None
    lo, hi = min(xs), max(xs)
    if max(-lo, hi) > 1e150:
        return None
    n = len(xs)
    mean = total / n
    var = math.fsum([(x - mean) * (x - mean) for x in xs]) / n
    return Stats(float(lo), float(hi), mean, math.sqrt(var))


_CHUNK = 1 << 16    # float64 elements: 512 KiB stays in L2. Few chunks matter more than
                    # small ones: the stats thread takes the GIL back between NumPy calls,
                    # and each take stalls a Python-heavy eager program (measured: 8192-element
                    # chunks cost the CNN loop ~40% more than 65536)
_BLOCK = 256        # float32 elements summed in float32 before float64 takes over
_FLOAT32_FROM = 8192   # elements: smaller tensors are summed in float64 throughout


def _sums(flat: np.ndarray) -> tuple:
    """(sum, sum of squares, exact): exact when accumulated in float64 throughout.

    A big float32 tensor (an activation, its gradient) is summed in float32 within blocks of
    256 elements and in float64 across the blocks, which keeps the relative error near 1e-9
    on activations and gradients (tests hold it to 1e-7). The blocks' sums and sums of
    squares are einsum's: its C loops are SIMD, make no temporary and start no thread, but
    accumulate in order, so the blocks are short. They cost the stats thread a fifth of what
    NumPy's pairwise `add.reduce` along 4,096-element rows and a squared copy did
    (`python bench/record_cost.py stats`: 100 against 450 us for a 32x26x26x16 activation), and on a
    2-core machine every microsecond there is taken from TensorFlow's kernels. (np.dot
    would be faster still, but any BLAS call wakes OpenBLAS's worker threads, which then
    spin on a core the program needs.) Everything else, and the blocks' remainder,
    accumulates in float64."""
    if flat.dtype == np.float32 and flat.size >= _FLOAT32_FROM:
        whole = flat.size - flat.size % _BLOCK
        blocks = flat[:whole].reshape(-1, _BLOCK)
        add = np.add.reduce
        total = float(add(np.einsum("ij->i", blocks), dtype=np.float64))
        squares = float(add(np.einsum("ij,ij->i", blocks, blocks), dtype=np.float64))
        if whole < flat.size:
            rest_total, rest_squares = _float64_sums(flat[whole:])
            total, squares = total + rest_total, squares + rest_squares
        return total, squares, False
    return (*_float64_sums(flat), True)


def _float64_sums(flat: np.ndarray) -> tuple:
    """Sum and sum of squares of `flat`, accumulated in float64, in one pass: each chunk is
    cast to float64 once (in cache), summed, squared in place and summed again. Two
    reductions over a float32 tensor with dtype=float64 cast it twice, in NumPy's small
    buffers; float32 BLAS would lose the spread; and any BLAS call (np.dot) wakes
    OpenBLAS's worker threads, which then spin on a core the program needs (measured: a
    core busy for the whole recorded CNN loop). NumPy's own pairwise sums start no thread."""
    add, square = np.add.reduce, np.square
    if flat.dtype == np.float64:
        return float(add(flat)), float(add(square(flat)))
    total = squares = 0.0
    f64 = np.float64
    for start in range(0, flat.size, _CHUNK):
        chunk = flat[start:start + _CHUNK].astype(f64)
        total += float(add(chunk))
        squares += float(add(square(chunk, out=chunk)))
    return total, squares


def norm_from_stats(s: Optional[Stats], shape) -> Optional[float]:
    """The L2 norm of the tensor `s` describes: its finite values' mean and spread give the
    sum of squares (n (std^2 + mean^2)); a NaN makes it NaN and an Inf infinite, as
    `norm` would. None when the tensor was not described."""
    if s is None:
        return None
    if s.nan:
        return math.nan
    if s.inf:
        return math.inf
    if s.mean is None:
        return 0.0
    n = math.prod(shape)
    mean, std = float(s.mean), float(s.std)
    return math.sqrt(n * (std * std + mean * mean))


def preview(a) -> str:
    """A short text of a string tensor's value(s), for the recording's `preview`."""
    if isinstance(a, np.ndarray) and a.ndim:
        items = a.reshape(-1)[:8]
        text = "[" + ", ".join(_text(x) for x in items) + (", ...]" if a.size > 8 else "]")
    else:
        text = _text(a.reshape(()).item() if isinstance(a, np.ndarray) else a)
    return text if len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS - 1] + "\u2026"


def _text(x) -> str:
    s = x.decode("utf-8", "replace") if isinstance(x, bytes) else str(x)
    return repr(s if len(s) <= PREVIEW_CHARS else s[:PREVIEW_CHARS] + "\u2026")


def string_value(a):
    """Nested lists of str (each cut to PREVIEW_CHARS) for a small string tensor."""
    if not isinstance(a, np.ndarray):
        s = a.decode("utf-8", "replace") if isinstance(a, bytes) else str(a)
        return s if len(s) <= PREVIEW_CHARS else s[:PREVIEW_CHARS] + "\u2026"
    return np.vectorize(string_value, otypes=[object])(a).tolist() if a.ndim \
        else string_value(a.reshape(()).item())


def plain_value(a: np.ndarray, finite: bool = False):
    if a.dtype.kind == "f" or a.dtype.name == "bfloat16":
        if finite and a.dtype.kind == "f":
            return a.tolist()          # float16/32/64 -> Python floats, exactly; no copy
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
    # the sum of squares of _sums: no float64 copy of the whole gradient
    return math.sqrt(_sums(a.reshape(-1))[1]) if a.size else 0.0
