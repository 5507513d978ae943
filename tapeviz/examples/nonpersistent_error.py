"""Calling gradient twice on a non-persistent tape
By default a GradientTape frees what it recorded as soon as gradient() is
called once, to save memory. Asking the same tape for a second gradient
therefore fails with a RuntimeError. The fix is GradientTape(persistent=True),
or computing both gradients in one call: tape.gradient(z, [x, y]).
"""
import tensorflow as tf

x = tf.Variable(3.0)

with tf.GradientTape() as tape:
    y = x * x
    z = y * y

dz_dx = tape.gradient(z, x)
print("dz_dx =", dz_dx.numpy())

# The tape's resources are already released, so this raises RuntimeError.
dy_dx = tape.gradient(y, x)
print("dy_dx =", dy_dx.numpy())
