"""Watching a constant with tape.watch
A tape automatically watches trainable tf.Variables, but not plain tensors such
as a tf.constant. Call tape.watch(x) inside the block to make the tape track x,
and then gradients with respect to it are available. For y = sum(x**2) the
gradient is 2 * x.
"""
import tensorflow as tf

x = tf.constant([1.0, 2.0, 3.0])

with tf.GradientTape() as tape:
    # Without this line tape.gradient(y, x) would return None.
    tape.watch(x)
    y = tf.reduce_sum(x * x)

dy_dx = tape.gradient(y, x)
print("y =", y.numpy())
print("dy_dx =", dy_dx.numpy())
