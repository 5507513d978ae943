"""A persistent tape for several gradients
With persistent=True the tape keeps its recording, so gradient() can be called
more than once on it. Here y = x * x and z = y * y at x = 3, giving
dz/dx = 4 * x**3 = 108 and dy/dx = 2 * x = 6. Delete the tape when done so its
memory is released.
"""
import tensorflow as tf

x = tf.constant(3.0)

with tf.GradientTape(persistent=True) as tape:
    tape.watch(x)
    y = x * x
    z = y * y

dz_dx = tape.gradient(z, x)
dy_dx = tape.gradient(y, x)
print("dz_dx =", dz_dx.numpy())
print("dy_dx =", dy_dx.numpy())

# A persistent tape holds on to its resources until it is garbage collected.
del tape
