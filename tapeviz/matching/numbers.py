"""How far two recorded tensors are apart: the max relative difference of their values
(elementwise when both kept them, else of their stats), with NaN, Inf, a shape change and a
missing value as marks of their own rather than numbers. No TensorFlow here."""
from __future__ import annotations

import math
from typing import Optional

from ..recording import as_float

NAN, INF, NONE, SHAPE, NO_VALUE = "nan", "inf", "none", "shape", "no value"
BREAKS = (NAN, INF, NONE, SHAPE)    # marks that part two runs whatever the tolerance
ATOL = 1e-9     # elements closer than this are equal: 1e-12 against 0 is no difference


def flat(value) -> list:
    """A nested list of numbers as one flat list of floats (the recording's "nan" read back)."""
    if isinstance(value, list):
        return [x for v in value for x in flat(v)]
    x = as_float(value) if isinstance(value, (int, float, str)) else None
    return [float(x)] if isinstance(x, (int, float)) else []


def relative(a: float, b: float) -> float:
    """|a - b| relative to the larger of the two; 0 for equal numbers, ATOL-close ones too."""
    if a == b or abs(a - b) <= ATOL:
        return 0.0
    return abs(a - b) / max(abs(a), abs(b))


def non_finite(xs: list) -> tuple:
    """(NaN count, Inf count) of a flat list."""
    return sum(1 for x in xs if x != x), sum(1 for x in xs if x in (math.inf, -math.inf))


def values_apart(a: list, b: list) -> tuple:
    """(max relative difference of the finite pairs, mark) of two flat value lists of one size:
    NaN or Inf where the other has none is a mark, not a number."""
    worst = 0.0
    mark = None
    for x, y in zip(a, b):
        if x != x or y != y:
            if (x != x) != (y != y):
                mark = NAN
            continue
        if math.isinf(x) or math.isinf(y):
            if x != y:
                mark = mark or INF
            continue
        worst = max(worst, relative(x, y))
    return worst, mark


def stats_apart(sa, sb) -> tuple:
    """(max relative difference of min, max, mean and std, mark) for tensors kept as stats only."""
    if sa is None or sb is None:
        return None, NO_VALUE
    if bool(sa.nan) != bool(sb.nan):
        return None, NAN
    if bool(sa.inf) != bool(sb.inf):
        return None, INF
    worst = 0.0
    for field in ("min", "max", "mean", "std"):
        x, y = as_float(getattr(sa, field)), as_float(getattr(sb, field))
        if x is None or y is None or not (math.isfinite(x) and math.isfinite(y)):
            continue
        worst = max(worst, relative(x, y))
    return worst, None


def tensors_apart(ta, tb) -> tuple:
    """(max relative difference or None, mark or None) of two recorded tensors."""
    if ta is None or tb is None:
        return None, NO_VALUE
    if list(ta.shape) != list(tb.shape):
        return None, SHAPE
    va, vb = flat(ta.value), flat(tb.value)
    if va and len(va) == len(vb):
        return values_apart(va, vb)
    if ta.value is None and tb.value is None and ta.stats is None and tb.stats is None:
        return None, NO_VALUE       # a traced graph's tensors: shapes, no values
    return stats_apart(ta.stats, tb.stats)


def grads_apart(ga: Optional[tuple], gb: Optional[tuple]) -> tuple:
    """Two gradients as (value or None, norm) flow entries, or None where there is none."""
    if ga is None and gb is None:
        return None, None
    if ga is None or gb is None:
        return None, NONE
    va, vb = flat(ga[0]), flat(gb[0])
    if va and len(va) == len(vb):
        return values_apart(va, vb)
    na, nb = as_float(ga[1]), as_float(gb[1])
    if na is None or nb is None:
        return None, None
    if (na != na) != (nb != nb):
        return None, NAN
    if na != na:
        return 0.0, None
    if math.isinf(na) or math.isinf(nb):
        return (0.0, None) if na == nb else (None, INF)
    return relative(na, nb), None


def worse(x: Optional[float], y: Optional[float]) -> Optional[float]:
    """The larger of two differences, None counting as no number."""
    return y if x is None else x if y is None else max(x, y)
