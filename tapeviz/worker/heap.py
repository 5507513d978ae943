"""The heap as Python's garbage collector sees it while a program is recorded."""
from __future__ import annotations

import contextlib
import gc


@contextlib.contextmanager
def frozen():
    """While the program runs, the collector leaves alone what existed before it (TensorFlow,
    Keras, tapeviz, a notebook's own state): the recording's records trigger full
    collections that otherwise walk all of that (about a seventh of the recorded CNN loop's
    time, and of a small-op loop's through `tapeviz.capture()`). The program's own objects
    are collected as in a plain run; the frozen ones become collectable again after."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
