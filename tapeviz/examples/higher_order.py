"""Second derivatives with nested tapes
Operations inside a tape's block are recorded even when they are themselves a
gradient computation. So an outer tape can differentiate the gradient that an
inner tape produced. For y = x**3 at x = 1, dy/dx = 3 * x**2 = 3 and
d2y/dx2 = 6 * x = 6.
"""
import tensorflow as tf

x = tf.Variable(1.0)

with tf.GradientTape() as outer_tape:
    with tf.GradientTape() as inner_tape:
        y = x * x * x
    # Computed inside the outer block, so the outer tape records it too.
    dy_dx = inner_tape.gradient(y, x)
d2y_dx2 = outer_tape.gradient(dy_dx, x)

print("dy_dx =", dy_dx.numpy())
print("d2y_dx2 =", d2y_dx2.numpy())
