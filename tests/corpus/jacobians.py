"""Jacobians and batch Jacobians (in the style of the advanced autodiff guide)."""
import tensorflow as tf

x = tf.linspace(-3.0, 3.0, 7)
delta = tf.Variable(0.0)
with tf.GradientTape() as tape:
    y = tf.nn.sigmoid(x + delta)
dy_dx = tape.jacobian(y, delta)
print("grad jac_delta:", dy_dx.numpy().tolist())

tf.keras.utils.set_random_seed(2)
x = tf.random.normal([3, 4])
layer = tf.keras.layers.Dense(2, activation=tf.nn.relu)
with tf.GradientTape(persistent=True) as tape:
    y = layer(x)
j = tape.jacobian(y, layer.kernel)
print("jacobian shape:", j.shape)
g = tape.gradient(y, layer.kernel)
print("kernel gradient:", g.numpy().round(4).tolist())
print("sum matches:", bool(tf.reduce_max(abs(g - tf.reduce_sum(j, axis=[0, 1]))) < 1e-5))
del tape

x = tf.random.normal([5, 3])
layer1 = tf.keras.layers.Dense(4, activation=tf.nn.elu)
layer2 = tf.keras.layers.Dense(3, activation=tf.nn.elu)
with tf.GradientTape(persistent=True, watch_accessed_variables=False) as tape:
    tape.watch(x)
    y = layer2(layer1(x))
bj = tape.batch_jacobian(y, x)
print("batch jacobian shape:", bj.shape)
full = tape.jacobian(y, x)
print("diag equal:", bool(tf.reduce_max(abs(bj - tf.einsum("bxby->bxy", full))) < 1e-6))
del tape

x = tf.Variable(2.0)
with tf.GradientTape() as t2:
    with tf.GradientTape() as t1:
        y = x ** 3
    dy = t1.gradient(y, x)
print("grad hessian:", t2.jacobian(dy, x).numpy().tolist())
