"""Gradients that come out None, and UnconnectedGradients.ZERO."""
import numpy as np
import tensorflow as tf

x = tf.Variable(2.0)
for epoch in range(2):
    with tf.GradientTape() as tape:
        y = x + 1
    print(type(x).__name__, ":", tape.gradient(y, x))
    x = x + 1

x = tf.Variable([[1.0, 2.0], [3.0, 4.0]])
with tf.GradientTape() as tape:
    x2 = x ** 2
    y = np.mean(x2, axis=0)
    y = tf.reduce_mean(y, axis=0)
print("numpy:", tape.gradient(y, x))

x = tf.constant(10)
with tf.GradientTape() as g:
    g.watch(x)
    y = x * x
print("int:", g.gradient(y, x))

x0 = tf.Variable(3.0)
x1 = tf.Variable(0.0)
with tf.GradientTape() as tape:
    x1.assign_add(x0)
    y = x1 ** 2
print("stateful:", tape.gradient(y, x0))

x = tf.Variable([2.0, 2.0])
y = tf.Variable(3.0)
with tf.GradientTape() as tape:
    z = y ** 2
print("none:", tape.gradient(z, x))
with tf.GradientTape() as tape:
    z = y ** 2
zero = tape.gradient(z, x, unconnected_gradients=tf.UnconnectedGradients.ZERO)
print("grad zero:", zero.numpy().tolist())

image = tf.Variable([[[0.5, 0.0, 0.0]]])
delta = tf.Variable(0.1)
with tf.GradientTape() as tape:
    new_image = tf.image.adjust_contrast(image, delta)
try:
    print(tape.gradient(new_image, [image, delta]))
    assert False
except LookupError as e:
    print(f"{type(e).__name__}: no gradient registered")
