"""Eager execution: operations run immediately
In TensorFlow 2 every operation runs as soon as Python reaches it and hands
back a concrete value, with no graph to build and no session to run. Tensors
and NumPy arrays mix freely: NumPy functions accept tensors, TensorFlow ops
accept arrays, and .numpy() gives you the plain array back.
"""
import numpy as np
import tensorflow as tf

print("executing eagerly:", tf.executing_eagerly())

# The result is available right away, not a symbolic placeholder.
m = tf.matmul([[1.0, 2.0], [3.0, 4.0]], [[1.0], [1.0]])
print("m =", m)

a = tf.constant([[1, 2], [3, 4]])
b = tf.add(a, 1)
print("b =", b)

# NumPy ops work on tensors; TensorFlow converts arrays the other way.
c = np.multiply(a, b)
print("c =", c)
print("b.numpy() =", b.numpy())
