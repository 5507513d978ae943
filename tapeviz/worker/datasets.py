"""`tf.keras.datasets.mnist.load_data()` in a user's program, served from the app's data
chain (TAPEVIZ_MNIST_DIR, the Keras cache, Keras's download, scikit-learn's digits), so that
the TF guide's loop runs offline; the recording's warnings say where the digits came from.
"""
from __future__ import annotations

import contextlib

import numpy as np
import tensorflow as tf

from .. import data
from . import keras_download


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


@contextlib.contextmanager
def mnist_served(session):
    """While a program runs, `mnist.load_data()` goes through data.load_mnist; each call
    adds a warning at the program's line that made it."""
    modules = _mnist_modules()
    originals = [m.load_data for m in modules]
    keras_own = originals[0] if originals else None

    def load_data(path="mnist.npz"):
        digits = data.load_mnist(download=lambda: keras_download.load(load_data=keras_own))
        arrays = as_keras_arrays(digits)
        frame = session.user_frame()
        session.warnings.append({"line": frame.f_lineno if frame else None,
                                 "message": served_note(digits, arrays),
                                 "kind": "data"})
        return arrays

    for module in modules:
        module.load_data = load_data
    try:
        yield
    finally:
        for module, original in zip(modules, originals):
            module.load_data = original
