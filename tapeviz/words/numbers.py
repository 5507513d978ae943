"""A tensor's numbers as NumPy prints them (what `print(t.numpy())` shows the student):
floats keep their point (`[[4.]]`, `2.0`), integers do not, a float32 in its own shortest
digits (0.1, not 0.10000000149011612). Plain Python, no NumPy: the words room imports none.
"""
from __future__ import annotations

import math
import struct
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Optional

_NON_FINITE = ("nan", "inf", "-inf")     # how the recording writes them (encode_float)
_PRECISION = 8                           # NumPy's print precision: digits after the point


def _narrow(x: float, dtype: Optional[str]) -> Optional[str]:
    """The width the float was stored in: "f" (float32), "e" (float16), "b" (bfloat16) or
    None for float64. Without a dtype, a value float32 holds exactly is taken for one:
    tensors are float32 unless the program asked otherwise."""
    if dtype:
        return {"float32": "f", "float16": "e", "half": "e", "bfloat16": "b"}.get(dtype)
    return "f" if _round(x, "f") == x else None


def _round(x: float, width: str) -> float:
    try:
        if width == "b":             # bfloat16: float32's top 16 bits, rounded to nearest even
            bits = struct.unpack("<I", struct.pack("<f", x))[0]
            bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
            return struct.unpack("<f", struct.pack("<I", bits))[0]
        return struct.unpack("<" + width, struct.pack("<" + width, x))[0]
    except (OverflowError, struct.error):
        return math.nan


def shortest(x: float, dtype: Optional[str] = None) -> Decimal:
    """The fewest decimal digits that read back as the same number of the tensor's dtype:
    NumPy's (and Python's repr's) rule, at the dtype's own width."""
    width = _narrow(x, dtype)
    if width is None:
        return Decimal(repr(x))
    for digits in range(1, 18):
        text = f"{x:.{digits - 1}e}"
        if _round(float(text), width) == x:
            return Decimal(repr(float(text)))
    return Decimal(repr(x))


def scalar_text(x: float, dtype: Optional[str] = None) -> str:
    """A float scalar as `print()` shows it: "2.0", "0.1", "1e-05" (Python's repr rule)."""
    if not math.isfinite(x):
        return str(x)
    return repr(float(shortest(x, dtype)))


def _scientific(values: list) -> bool:
    """NumPy prints a whole array in e-notation when its finite nonzero sizes reach 1e8,
    go below 1e-4, or differ by more than 1000 times."""
    sizes = [abs(v) for v in values if math.isfinite(v) and v != 0]
    return bool(sizes) and (max(sizes) >= 1e8 or min(sizes) < 1e-4 or max(sizes) / min(sizes) > 1e3)


def element_text(x: float, dtype: Optional[str], exp: bool) -> str:
    """A float inside an array as NumPy writes it: "4.", "2.5", "1.e-05"."""
    if not math.isfinite(x):
        return str(x)
    d = shortest(x, dtype)
    if exp:
        if len(d.as_tuple().digits) > _PRECISION + 1:
            d = Decimal(f"{d:.{_PRECISION}e}")
        sign, digits, power = d.as_tuple()
        e = power + len(digits) - 1
        text = "".join(map(str, digits))
        mantissa = text[0] + "." + text[1:].rstrip("0")
        return ("-" if sign else "") + mantissa + f"e{'+' if e >= 0 else '-'}{abs(e):02d}"
    if d.as_tuple().exponent < -_PRECISION:
        d = d.quantize(Decimal(1).scaleb(-_PRECISION), ROUND_HALF_EVEN)
    return _trim(format(d, "f"))


def _trim(text: str) -> str:
    """NumPy's trim='.': trailing zeros go, the point stays ("4.", "2.5")."""
    if "." not in text:
        return text + "."
    return text.rstrip("0")


def _flat(value) -> list:
    return [x for v in value for x in _flat(v)] if isinstance(value, list) else [value]


def _number(v) -> Optional[float]:
    """A recorded element as a float when it is one ("nan" strings included), else None."""
    if isinstance(v, float):
        return v
    if isinstance(v, str) and v in _NON_FINITE:
        return float(v)
    return None


def array_text(value, dtype: Optional[str] = None, rows: bool = False) -> str:
    """A recorded value (nested lists, or one number) as NumPy prints it, with commas between
    numbers as its repr has them; with `rows`, a matrix a row per line, as the inspector
    shows it. A string tensor's own text is quoted."""
    floats = [f for f in (_number(v) for v in _flat(value)) if f is not None]
    exp = _scientific(floats)
    if not isinstance(value, list):
        f = _number(value)
        return scalar_text(f, dtype) if f is not None else _other(value)
    return _nested(value, dtype, exp, rows)


def _nested(value, dtype, exp: bool, rows: bool) -> str:
    if isinstance(value, list):
        joint = ",\n " if rows and value and all(isinstance(v, list) for v in value) else ", "
        return "[" + joint.join(_nested(v, dtype, exp, rows) for v in value) + "]"
    f = _number(value)
    return element_text(f, dtype, exp) if f is not None else _other(value)


def _other(value) -> str:
    if isinstance(value, (bool, int)) or value is None:
        return str(value)
    return repr(value)
