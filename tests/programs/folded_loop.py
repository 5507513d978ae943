import tensorflow as tf
x = tf.Variable(1.0)
with tf.GradientTape() as tape:
    y = x
    for i in range(12):
        y = y * 1.5 + x
g = tape.gradient(y, x)
