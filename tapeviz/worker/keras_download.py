"""Keras's own MNIST download, the one step of the data chain that imports TensorFlow."""
from __future__ import annotations

import socket
from typing import Callable, Optional

import tensorflow as tf

from ..data import Digits, to_digits_arrays


def load(timeout: float = 10.0, load_data: Optional[Callable] = None) -> Digits:
    """`load_data` is Keras's own function, passed in while a user's program has
    `mnist.load_data` served from the data chain (`datasets.py`)."""
    # Keras's urlretrieve takes no timeout; a socket default bounds a dead network.
    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(timeout)
    try:
        (x_train, y_train), (x_test, y_test) = (load_data or tf.keras.datasets.mnist.load_data)()
    finally:
        socket.setdefaulttimeout(previous)
    train = to_digits_arrays(x_train, y_train, "download")
    test = to_digits_arrays(x_test, y_test, "download")
    return Digits(*test, source="MNIST downloaded by Keras", train_images=train[0],
                  train_labels=train[1])
