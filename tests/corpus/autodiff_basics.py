"""Gradients of variables, layers and watched constants (in the style of the autodiff guide)."""
import tensorflow as tf

x = tf.Variable(3.0)
with tf.GradientTape() as tape:
    y = x ** 2
dy_dx = tape.gradient(y, x)
print("grad dy_dx:", dy_dx.numpy().tolist())

w = tf.Variable([[1.0, -2.0], [0.5, 3.0]], name="w")
b = tf.Variable([0.1, 0.2], name="b")
inputs = [[1.0, 2.0]]
with tf.GradientTape(persistent=True) as tape:
    out = inputs @ w + b
    loss = tf.reduce_mean(out ** 2)
grads = tape.gradient(loss, {"w": w, "b": b})
print("grad dl_dw:", grads["w"].numpy().tolist())
print("grad dl_db:", grads["b"].numpy().tolist())
del tape

tf.keras.utils.set_random_seed(1)
layer = tf.keras.layers.Dense(2, activation="tanh")
batch = tf.constant([[1.0, 2.0, 3.0]])
with tf.GradientTape() as tape:
    y = layer(batch)
    loss = tf.reduce_sum(y ** 2)
grad = tape.gradient(loss, layer.trainable_variables)
for var, g in zip(layer.trainable_variables, grad):
    print(var.name, g.shape)
print("grad dl_dkernel:", grad[0].numpy().tolist())

c = tf.constant(3.0)
with tf.GradientTape() as tape:
    tape.watch(c)
    y = c * c
print("grad dy_dc:", tape.gradient(y, c).numpy().tolist())

x0 = tf.Variable(0.0, name="x0")
x1 = tf.Variable(10.0, name="x1")
with tf.GradientTape(watch_accessed_variables=False) as tape:
    tape.watch(x1)
    y0 = tf.math.sin(x0)
    y1 = tf.nn.softplus(x1)
    y = y0 + y1
grads = tape.gradient(y, {"x0": x0, "x1": x1})
print("dy/dx0:", grads["x0"])
print("grad dy_dx1:", grads["x1"].numpy().tolist())
print([v.name for v in tape.watched_variables()])
