"""Nested and persistent tapes: second derivatives and several targets."""
import tensorflow as tf

x = tf.Variable(1.5)
with tf.GradientTape() as outer:
    with tf.GradientTape() as inner:
        y = x * x * x
    dy_dx = inner.gradient(y, x)
d2y_dx2 = outer.gradient(dy_dx, x)
print("grad dy_dx:", dy_dx.numpy().tolist())
print("grad d2y_dx2:", d2y_dx2.numpy().tolist())

x = tf.constant([1.0, 3.0])
with tf.GradientTape(persistent=True) as tape:
    tape.watch(x)
    y = x * x
    z = y * y
print("grad dz_dx:", tape.gradient(z, x).numpy().tolist())
print("grad dy_dx:", tape.gradient(y, x).numpy().tolist())
del tape

x = tf.Variable(2.0)
with tf.GradientTape() as tape:
    y0 = x ** 2
    y1 = 1 / x
print("grad sum:", tape.gradient({"one": y0, "two": y1}, x).numpy().tolist())

x = tf.linspace(-2.0, 2.0, 5)
with tf.GradientTape() as tape:
    tape.watch(x)
    y = tf.nn.sigmoid(x)
print("grad dsig:", tape.gradient(y, x).numpy().tolist())

x = tf.Variable(1.0)
with tf.GradientTape() as tape:
    y = tf.stop_gradient(x * 2.0) + x * 3.0
print("grad stop:", tape.gradient(y, x).numpy().tolist())
