"""A TensorFlow leak that the gradient flow set off on every step, and its repair.

When `tape.gradient` returns one gradient tensor for several distinct sources, TensorFlow
(2.21 here) leaks one reference to it per source after the first, so it is never freed.
That happens wherever an op's gradient passes the incoming one through: the input of a
BiasAdd, an Identity, an Add of equal shapes, a variable's read. A program meets it only
when it names both tensors of such a pair. The flow view asks for every tensor between the
sources and the target, so on every step it named such pairs: on the eager guide's CNN
loop the gradients of the two convolutions' outputs (1.3 MB each) stayed alive, and the
recorded loop's memory grew by about 3 MB a step (`python bench/record_cost.py memory`).

`release` gives back the references that tapeviz's own extra sources cost, and leaves
those of the sources the program named as TensorFlow leaves them. How many references
TensorFlow leaks is measured once per process on a small pair (`leak_per_source`), so a
TensorFlow that no longer leaks gets nothing released.
"""
from __future__ import annotations

import ctypes
import sys
from typing import Optional

from .capture import EagerTensor, handle_or_self

_decref = ctypes.pythonapi.Py_DecRef
_decref.argtypes = [ctypes.py_object]
_decref.restype = None

_leak: Optional[int] = None     # references leaked per extra source sharing a gradient


def leak_per_source() -> int:
    """References TensorFlow leaks for each extra source that shares a gradient: measured
    on first use (an Identity pair; the caller keeps the op callback quiet)."""
    global _leak
    if _leak is None:
        _leak = _measure()
    return _leak


def _measure() -> int:
    import tensorflow as tf
    from tensorflow.python.eager import backprop   # the real tape, not the program's
    x = tf.constant([[1.0, 2.0]])
    with backprop.GradientTape() as tape:
        tape.watch(x)
        a = tf.identity(x)
        b = tf.identity(a)                 # d y / d a is d y / d b, the same tensor
        y = tf.reduce_sum(b * b)
    grad_a, grad_b = tape.gradient(y, [a, b])
    del tape
    if grad_a is not grad_b:
        return 0                           # not shared: nothing can leak
    # held here by grad_a and grad_b, and by getrefcount's own argument
    leaked = max(0, sys.getrefcount(grad_a) - 3)
    for _ in range(leaked):                # the probe's own leak goes back too
        _decref(grad_a)
    return leaked


def _source_key(source) -> Optional[int]:
    """The tensor id TensorFlow knows a source by: a variable's handle's, else its own."""
    obj = handle_or_self(source)
    return obj._id if obj is not None else None


def release(sources: list, grads: list, named: int) -> int:
    """After `tape.gradient(target, sources)` returned `grads`: give back what TensorFlow
    leaked for the sources after the first `named` (the program named those; the rest are
    tapeviz's). Returns the references given back."""
    shared: dict = {}          # id(gradient) -> (gradient, named source ids, extra source ids)
    for i, (source, grad) in enumerate(zip(sources, grads)):
        if not isinstance(grad, EagerTensor):
            continue           # None, IndexedSlices: never seen shared
        key = _source_key(source)
        if key is None:
            continue
        entry = shared.setdefault(id(grad), (grad, set(), set()))
        entry[1 if i < named else 2].add(key)
    released = 0
    for grad, by_program, by_us in shared.values():
        extra = len(by_us - by_program)    # one source asked twice is one source to TF
        ours = extra if by_program else extra - 1
        if ours <= 0:
            continue
        count = ours * leak_per_source()
        for _ in range(count):
            _decref(grad)
        released += count
    return released
