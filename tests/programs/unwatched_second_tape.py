import tensorflow as tf

x = tf.constant(3.0)
with tf.GradientTape() as tape:
    tape.watch(x)
    y = x * x
dy_dx = tape.gradient(y, x)
print("watched:", dy_dx)
with tf.GradientTape() as tape2:
    y2 = x * x
dy2_dx = tape2.gradient(y2, x)
print("unwatched:", dy2_dx)
