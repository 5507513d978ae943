"""`tf.keras.datasets.mnist.load_data()` in a user's program: served from a local copy of
the real MNIST (TAPEVIZ_MNIST_DIR) only when it gives the very arrays Keras would return (60,000
training and 10,000 test digits, 28x28 uint8), and said so; otherwise Keras's own function
runs, as plainly (offline and without Keras's cache, its own failure). Fallback data
(scikit-learn's digits) belongs to the training page, where it is labelled.
"""
from __future__ import annotations

import contextlib
import os

import numpy as np
import tensorflow as tf

from .. import data


def _mnist_modules():
    """The module objects whose `load_data` a program can reach (tf.keras and keras)."""
    found = []
    for get in (lambda: tf.keras.datasets.mnist, lambda: __import__("keras").datasets.mnist):
        try:
            module = get()
        except (ImportError, AttributeError):
            continue
        if module not in found and hasattr(module, "load_data"):
            found.append(module)
    return found


def as_keras_arrays(digits: data.Digits):
    """((x_train, y_train), (x_test, y_test)) as Keras returns them: uint8 pixels 0..255,
    shape (N, H, W); uint8 labels. One-set sources are split 80/20 as data.split does."""
    x_train, y_train, x_test, y_test = data.split(digits)

    def pixels(x):
        return np.round(np.asarray(x)[..., 0] * 255.0).astype(np.uint8)

    return ((pixels(x_train), y_train.astype(np.uint8)),
            (pixels(x_test), y_test.astype(np.uint8)))


def served_note(digits: data.Digits, arrays) -> str:
    (x_train, _), (x_test, _) = arrays
    size = "x".join(str(n) for n in x_train.shape[1:])
    text = (f"mnist.load_data() was served by tapeviz from {digits.source}: "
            f"{len(x_train):,} training and {len(x_test):,} test digits of {size} pixels")
    if not digits.has_train:
        text += " (one set, split 80/20)"
    if digits.notes:
        text += ". Passed over: " + "; ".join(digits.notes)
    return text + "."


# What Keras's mnist.load_data() returns: (x_train, y_train), (x_test, y_test)
KERAS_SHAPES = (((60_000, 28, 28), (60_000,)), ((10_000, 28, 28), (10_000,)))


def keras_arrays_from_local_copy():
    """(digits, arrays) from TAPEVIZ_MNIST_DIR when they are MNIST as Keras returns it, else
    None."""
    local = os.environ.get(data.ENV_DIR)
    if not local:
        return None
    try:
        digits = data.load_user_path(local)
        if not digits.has_train:
            return None
        arrays = as_keras_arrays(digits)
    except Exception:               # not there, not readable: Keras's own function decides
        return None
    if tuple((x.shape, y.shape) for x, y in arrays) != KERAS_SHAPES or any(
            a.dtype != np.uint8 for pair in arrays for a in pair):
        return None
    return digits, arrays


@contextlib.contextmanager
def mnist_served(session):
    """While a program runs, `mnist.load_data()` is served from the local copy of MNIST when
    there is one (with a warning at the program's line that called it, kind "data", which
    `record` prints), else it is Keras's own."""
    modules = _mnist_modules()
    originals = [m.load_data for m in modules]

    def served(original):
        def load_data(*args, **kwargs):
            local = keras_arrays_from_local_copy()
            if local is None:
                return original(*args, **kwargs)
            digits, arrays = local
            frame = session.user_frame()
            session.warnings.append({"line": frame.f_lineno if frame else None,
                                     "message": served_note(digits, arrays), "kind": "data"})
            return arrays
        return load_data

    for module, original in zip(modules, originals):
        module.load_data = served(original)
    try:
        yield
    finally:
        for module, original in zip(modules, originals):
            module.load_data = original
