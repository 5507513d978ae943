"""Gradients of a linear function with tf.GradientTape
A GradientTape records the operations run inside its `with` block and can then
play them backwards to get gradients. Trainable tf.Variables are watched
automatically, so dz/dw and dz/db need no extra setup. For z = w * x + b the
gradient with respect to w is x, and with respect to b it is one per element.
"""
import tensorflow as tf

w = tf.Variable([[1.0, 2.0]])
b = tf.Variable([0.5, -1.0])
x = tf.constant([[3.0, 4.0]])

with tf.GradientTape() as tape:
    z = w * x + b

# Sources can be passed as a list; the result comes back in the same order.
dz_dw, dz_db = tape.gradient(z, [w, b])
print("z =", z.numpy())
print("dz_dw =", dz_dw.numpy())
print("dz_db =", dz_db.numpy())
