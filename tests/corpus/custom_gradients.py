"""tf.custom_gradient: clipping a gradient and a numerically stable log(1 + e^x)."""
import tensorflow as tf


@tf.custom_gradient
def clip_gradients(y):
    def backward(dy):
        return tf.clip_by_norm(dy, 0.5)
    return y, backward


v = tf.Variable(2.0)
with tf.GradientTape() as t:
    output = clip_gradients(v * v)
print("grad clipped:", t.gradient(output, v).numpy().tolist())


@tf.custom_gradient
def log1pexp(x):
    e = tf.exp(x)

    def grad(upstream):
        return upstream * (1 - 1 / (1 + e))
    return tf.math.log(1 + e), grad


x = tf.constant(100.0)
with tf.GradientTape() as tape:
    tape.watch(x)
    value = log1pexp(x)
print("value:", value.numpy())
print("grad stable:", tape.gradient(value, x).numpy().tolist())


@tf.function
@tf.custom_gradient
def scaled_identity(x):
    return tf.identity(x), lambda dy: 3.0 * dy


w = tf.Variable([1.0, 2.0])
with tf.GradientTape() as tape:
    y = tf.reduce_sum(scaled_identity(w) ** 2)
print("grad scaled:", tape.gradient(y, w).numpy().tolist())
