"""A NaN born in the backward pass
Every value in the forward pass here is finite, yet the gradient has a NaN.
The distance tf.norm(d) = sqrt(sum(d**2)) has gradient d / norm, and for two
points that coincide that is 0 / 0 = NaN. So the loss looks healthy and only
the backward pass breaks. A common fix is a small epsilon under the square
root: tf.sqrt(tf.reduce_sum(d * d, axis=1) + 1e-12).
"""
import tensorflow as tf

p = tf.Variable([[0.0, 0.0], [1.0, 1.0], [3.0, 4.0]])
q = tf.constant([[0.0, 0.0], [1.0, 2.0], [0.0, 0.0]])  # first pair coincides

with tf.GradientTape() as tape:
    d = p - q
    dist = tf.norm(d, axis=1)
    loss = tf.reduce_sum(dist)

grad = tape.gradient(loss, p)
print("loss =", loss.numpy())
print("grad =", grad.numpy())
print("grad has NaN:", bool(tf.reduce_any(tf.math.is_nan(grad))))
