"""The picture's own words, in markdown: its legend, what it draws, the op a step reached.
The caller says what the view draws, as plain data.
"""
from __future__ import annotations

from typing import Optional

from ..recording import Recording
from . import values
from .markdown import literal

_SHAPES = ("Circles are tensors (orange: variables, red-orange: watched constants, grey: constants, "
           "blue: results), squares are ops, named as the Python that made them (`*`, `tf.square`; "
           "hover for TensorFlow's own name, such as Mul), diamonds the backward ops a gradient call "
           "ran, hollow squares ops in a tape's block that it did not record; arrows point from an op's inputs to its "
           "outputs; “×2” on an arrow means the tensor is used twice. A big square “* ×3000, line 6” "
           "is one line's ops repeated by a loop (click it to unfold). Hidden unless asked for: "
           "*plumbing*, the bookkeeping TensorFlow does to create and assign variables.")


def legend(rec: Recording, chosen=None, traced: Optional[str] = None) -> str:
    """The picture's legend in words: of the gradient call `chosen` when one is drawn, of
    the graph tf.function `traced` traced when the tape's ops are in one."""
    if traced:
        return (f"The graph tf.function `{literal(traced, 200)}` traced: each label shows a "
                f"tensor's shape (no values: its ops ran inside the compiled function) and, for "
                f"a gradient call's sources, the shape of their gradient. " + _SHAPES)
    if chosen is None:
        return "Each label shows the tensor's value. " + _SHAPES
    target = literal(", ".join(values.tensor_name(rec, t) for t in chosen.target), 200)
    sources = literal(", ".join(values.tensor_name(rec, t) for t in chosen.sources), 200)
    if chosen.kind != "gradient":
        return (f"Each label shows the tensor's value; {sources} also shows its {chosen.kind}, the matrix of "
                f"∂{target}\\[i\\]/∂{sources}\\[j\\] (its numbers when they fit, else its shape; the sentence "
                f"above gives them). Between them, **grad of sum({target})** is ∂sum({target})/∂(that tensor): "
                f"what `tape.gradient` would give, one number per element. Colour is its size (dark purple "
                f"small, yellow large, log scale); grey: no gradient reaches it; red: NaN or Inf. " + _SHAPES)
    return (f"Each label shows the tensor's value and, below it, its gradient: **grad** is ∂{target}/∂(that tensor), "
            f"exact and signed for {sources}; elsewhere **size of grad** is how big it is (its L2 norm). Colour is the size of the gradient "
            "(dark purple small, yellow large, log scale) and the rim's colour says what kind of node it is; "
            "grey: no gradient reaches it; red: NaN or Inf. " + _SHAPES)


def drawn_words(ops: int, tensors: int) -> str:
    return f"{ops} op{'s' * (ops != 1)} and {tensors} tensor{'s' * (tensors != 1)} drawn"


def step_words(label: str, phase: str, place: str = "") -> str:
    """The op node a step reached: its label's first line, its phase and its line's place."""
    where = f", {place}" if place else ""
    return literal(f"{label.splitlines()[0]} ({phase}{where})", 300)
