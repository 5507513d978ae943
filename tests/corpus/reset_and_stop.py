"""tape.reset, tape.stop_recording, and a tape per training step; the program then fails."""
import tensorflow as tf

x = tf.Variable(2.0)
y = tf.Variable(3.0)
with tf.GradientTape() as t:
    x_sq = x * x
    with t.stop_recording():
        y_sq = y * y
    z = x_sq + y_sq
grad = t.gradient(z, {"x": x, "y": y})
print("grad x:", grad["x"].numpy().tolist())
print("dz/dy:", grad["y"])

with tf.GradientTape(persistent=True) as tape:
    a = x * 3.0
    tape.reset()
    b = x * 5.0
print("after reset:", tape.gradient(a, x))
print("grad reset:", tape.gradient(b, x).numpy().tolist())
del tape

w = tf.Variable(0.0)
b = tf.Variable(0.0)
xs = tf.constant([1.0, 2.0, 3.0, 4.0])
ys = 2.0 * xs + 1.0
for step in range(20):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((w * xs + b - ys) ** 2)
    dw, db = tape.gradient(loss, [w, b])
    w.assign_sub(0.05 * dw)
    b.assign_sub(0.05 * db)
print("fitted:", round(float(w), 4), round(float(b), 4))

with tf.GradientTape() as tape:
    loss = w * 2.0
tape.gradient(loss, w)
print("asking twice")
tape.gradient(loss, w)
