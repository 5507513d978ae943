"""Python's garbage collector around a recorded run, left as the program sees it.

A full collection walks every tracked object in the process: after TensorFlow's import
about 400k, 0.2-0.4 s of CPU each time. It runs once the objects that survived into the
oldest generation since the last one reach a quarter of those that were there then, and
a recording's records are such survivors. So the worker collects once before a job, when
the import's survivors would otherwise leave the first full collection due early in the
program; and it collects nothing while it builds the recording after the program ended.
Neither is something the program can tell apart from a plain run (`gc.freeze` was: it
hid the heap from `gc.get_objects()`).
"""
from __future__ import annotations

import contextlib
import gc


def settle() -> None:
    """Collect now, before a program runs: the next full collection is then as far off as
    the heap's size puts it (a forked worker inherits its zygote's settled heap)."""
    gc.collect()


@contextlib.contextmanager
def paused():
    """No collection inside: for the recorder's own work once the program has ended (its
    exit steps run, its threads joined), whose records would otherwise trigger full
    collections of the whole heap. Left as the program left it after."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
