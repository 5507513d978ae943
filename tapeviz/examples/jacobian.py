"""Jacobians of vector functions
tape.gradient sums over the target, so for a vector target it gives one number
per source element. tape.jacobian keeps every output separate instead: entry
[i, j] is d y[i] / d x[j]. For a batch where each example only depends on
itself, tape.batch_jacobian gives one Jacobian per example.
"""
import tensorflow as tf

x = tf.Variable([1.0, 2.0, 3.0])

with tf.GradientTape(persistent=True) as tape:
    y = x * x

# y[i] = x[i]**2, so the Jacobian is diagonal with 2 * x on it.
dy_dx = tape.jacobian(y, x)
print("dy_dx =", dy_dx.numpy())

w = tf.constant([[1.0, 2.0], [3.0, 4.0]])
xs = tf.Variable([[1.0, 1.0], [2.0, 0.5]])  # a batch of two examples

with tf.GradientTape() as batch_tape:
    ys = tf.matmul(xs, w)

# Each example's Jacobian of xs @ w is w transposed.
dys_dxs = batch_tape.batch_jacobian(ys, xs)
print("dys_dxs =", dys_dxs.numpy())
del tape
