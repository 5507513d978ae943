"""Gradients through a tf.function
@tf.function traces a Python function into a TensorFlow graph that runs as one
fast call. The tape still sees that call and can differentiate through it,
just as it does for ordinary eager ops. For f(x) = x**2 + 2x the gradient is
2x + 2, which is 8 at x = 3.
"""
import tensorflow as tf


@tf.function
def f(x):
    return x * x + 2.0 * x


x = tf.Variable(3.0)

with tf.GradientTape() as tape:
    y = f(x)

dy_dx = tape.gradient(y, x)
print("y =", y.numpy())
print("dy_dx =", dy_dx.numpy())
