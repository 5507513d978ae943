"""Numbers and tensors as a reader meets them: values as Python prints them, a gradient's
size in words, a tensor's or an op's name, a line's place, a list said as a sentence says it.
Used by the graph's labels, the sentences and the inspector alike. No Streamlit, no TensorFlow.
"""
from __future__ import annotations

import math
from typing import Optional

from ..recording import Recording, as_float
from .numbers import array_text


def line_words(rec: Recording, file: Optional[str], line: Optional[int]) -> str:
    """"line 6", or "line 6 of trainer/losses.py" when it is another file than the program's."""
    return place_words(rec.program, file, line)


def place_words(program: Optional[str], file: Optional[str], line: Optional[int]) -> str:
    """line_words for a drawn graph, whose G.graph["program"] is the recording's program."""
    if not _of_program(program, file):
        return f"line {line} of {file}"
    return f"line {line}"


def in_program(rec: Recording, file: Optional[str]) -> bool:
    """Whether a line of `file` is a line of the program the editor holds (not a module of it)."""
    return _of_program(rec.program, file)


def _of_program(program: Optional[str], file: Optional[str]) -> bool:
    return not file or not program or file == program


def lines_words(lines: list) -> str:
    """"line 7", "lines 9 and 11", "lines 9, 11 and 13"."""
    if len(lines) == 1:
        return f"line {lines[0]}"
    return f"lines {', '.join(map(str, lines[:-1]))} and {lines[-1]}"


def and_list(parts: list) -> str:
    """"a", "a and b", "a, b and c"."""
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def norm_words(grad: str, norm) -> str:
    """A flow's norm on a label: "size of grad 3.2"; a NaN or Inf one is no size but the
    alarm itself, "grad ⚠ NaN" (as a source's gradient says it), never "size of grad inf"."""
    if norm is not None and not math.isfinite(norm):
        return f"{grad} ⚠ " + ("NaN" if norm != norm else "Inf")
    return f"size of {grad} " + number_text(norm)


def grad_words(grad, kind: str = "gradient") -> str:
    """A source's gradient on its label: its signed numbers when small ("grad -2.5"), its
    size in words when big, "grad None" when there is none. A jacobian is a matrix whose
    norm teaches nothing: its numbers when small, else its shape ("jacobian 3×3")."""
    if grad is None:
        return "grad None"
    if grad.stats is not None and (grad.stats.nan or grad.stats.inf) and not small(grad):
        # its size would be the size of the finite part: a NaN must be said, not averaged
        return "grad ⚠ " + ("NaN" if grad.stats.nan else "Inf") + (f" ({shape_text(grad.shape)})" if grad.shape else "")
    if kind != "gradient":
        return "jacobian " + (short_value(grad) if small(grad) else shape_text(grad.shape) or "?")
    if not small(grad) and norm_of(grad) is not None:
        return "size of grad " + number_text(norm_of(grad))
    return "grad " + short_value(grad)


def grad_size(grad) -> Optional[float]:
    """A gradient's size (its L2 norm), None when its stats are unknown or not finite."""
    if grad.stats is not None and (grad.stats.nan or grad.stats.inf):
        return None
    return norm_of(grad)


LONG_SCALAR = 7      # characters past which a float scalar's label keeps 5 significant digits


def short_value(info) -> str:
    """A tensor in a few characters: its numbers when it has at most 4, else its shape and
    size (the L2 norm, said in words)."""
    if small(info):
        text = numbers_text(info.value, dtype=info.dtype)
        if isinstance(info.value, float) and len(text) > LONG_SCALAR:
            return number_text(info.value, 5)   # a loss's 2.2995503 as 2.2996: the hover has all
        return text
    norm = norm_of(info)
    if norm is None:
        return shape_text(info.shape)     # nothing known of its value (the bounds dropped it)
    return f"{shape_text(info.shape) or 'scalar'}, size {number_text(norm)}"


def small(info, most: int = 4) -> bool:
    return info.value is not None and (not isinstance(info.value, list) or count(info.value) <= most)


def value_words(info, most: int = 16) -> Optional[str]:
    """A tensor's numbers for a sentence, which has room for a 3×3 jacobian that a label has
    not; None past `most` numbers."""
    return numbers_text(info.value, dtype=info.dtype) if small(info, most) else None


def norm_of(info) -> Optional[float]:
    """The L2 norm, from the recorded mean and std: sqrt(n * (mean² + std²))."""
    s = info.stats
    if s is None or as_float(s.mean) is None or as_float(s.std) is None:
        return None
    n = math.prod(d or 1 for d in info.shape) if info.shape else 1
    mean, std = as_float(s.mean), as_float(s.std)
    return math.sqrt(n * (mean * mean + std * std))


def count(value) -> int:
    return sum(count(v) for v in value) if isinstance(value, list) else 1


def tensor_name(rec: Recording, t: int) -> str:
    """A tensor in words: its Python name, else "tensor 7"."""
    info = rec.tensor(t)
    return info.name if info is not None and info.name else f"tensor {t}"


def tensor_brief(rec: Recording, t: int) -> str:
    """A tensor with its shape, for lists of inputs and outputs: "x [2, 3]", "t7 [2]"."""
    info = rec.tensor(t)
    if info is None:
        return f"tensor {t}"
    return (info.name or f"t{t}") + f" {list(info.shape)}"


def op_brief(rec: Recording, op) -> str:
    """An op for lists of producers and consumers: "Mul (op 3, forward, line 4)"."""
    where = f", {line_words(rec, op.file, op.line)}" if op.line is not None else ""
    return f"{op.function or op.type} (op {op.id}, {op.phase}{where})"


def shape_text(shape) -> str:
    if not shape:
        return ""
    return "×".join("?" if d is None else str(d) for d in shape)


def number_text(x, digits: int = 4) -> str:
    """A summary number (a norm, a mean, a range's end) in words: `digits` significant digits
    for floats, which keep their point as Python prints a float ("3.0", not "3"); integers
    whole (a step count of 12345 is not 1.234e+04); nan/inf as Python writes them; "?" unknown."""
    x = as_float(x)
    if x is None:
        return "?"
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if isinstance(x, int):
        return str(x)
    text = f"{x:.{digits}g}"
    return text if any(c in text for c in ".en") else text + ".0"


def numbers_text(value, rows: bool = False, dtype: Optional[str] = None) -> str:
    """A recorded value as Python prints it (`numbers.array_text`): floats keep their point,
    `[[4.]]` and `2.0`; lists in brackets (with `rows`, a matrix a row per line, as the
    inspector shows it); a string tensor's own text quoted. Among strings only the
    recording's "nan", "inf" and "-inf" are numbers."""
    return array_text(value, dtype, rows)
