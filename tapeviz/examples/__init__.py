"""The gallery of example programs offered on the debugger page.

Each example is a plain TensorFlow 2 program in this folder; its module
docstring gives the title (first line) and a short explanation. This module
only reads the files as text and never imports TensorFlow.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

_HERE = Path(__file__).parent

# Teaching order: eager execution first, then the tape from its simplest use
# to its pitfalls, then tf.function, debugging, and a real training step.
_ORDER = (
    "eager_basics",
    "tf1_vs_eager",
    "fizzbuzz",
    "linear_gradient",
    "pytorch_vs_tape",
    "watch_constant",
    "persistent_tape",
    "nonpersistent_error",
    "higher_order",
    "jacobian",
    "none_gradients",
    "tf_function",
    "nan_hunt",
    "mnist_step",
)


@dataclass(frozen=True)
class Example:
    """One example program: what the page shows beside the editor, and the code."""

    name: str
    title: str
    explanation: str
    source: str
    # the same lesson written for PyTorch (pytorch/NAME.py), which the page records beside it
    twin: Optional[str] = None


def names() -> list[str]:
    """Example names in teaching order, then any other files alphabetically."""
    on_disk = {p.stem for p in _HERE.glob("*.py") if not p.stem.startswith("_")}
    ordered = [n for n in _ORDER if n in on_disk]
    return ordered + sorted(on_disk - set(ordered))


def load(name: str) -> Example:
    """Read one example; KeyError when there is no example of that name."""
    # Checking against names() also keeps names like "../x" off the filesystem.
    if name not in names():
        raise KeyError(name)
    source = (_HERE / f"{name}.py").read_text(encoding="utf-8")
    doc = ast.get_docstring(ast.parse(source)) or ""
    title, _, rest = doc.partition("\n")
    # Unwrap the explanation's hard line breaks so the page can reflow it.
    explanation = " ".join(rest.split())
    twin = _HERE / "pytorch" / f"{name}.py"
    return Example(name=name, title=title.strip(), explanation=explanation, source=source,
                   twin=split_docstring(twin.read_text(encoding="utf-8"))[1] if twin.exists() else None)


def split_docstring(source: str) -> tuple[str, str]:
    """(docstring, code): a module docstring and the program after it, blank lines trimmed.
    Programs without one come back whole."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return "", source
    doc = ast.get_docstring(tree, clean=True)
    if not doc or not tree.body:
        return "", source
    end = tree.body[0].end_lineno
    code = "\n".join(source.splitlines()[end:]).lstrip("\n")
    return doc, code + ("\n" if source.endswith("\n") and not code.endswith("\n") else "")


def code(name: str) -> str:
    """What the editor shows for an example: its program, its explanation left out."""
    return split_docstring(load(name).source)[1]
