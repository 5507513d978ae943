"""Three ways to get a None gradient
tape.gradient returns None, not an error, when the target does not depend on a
source in a way the tape can differentiate. Integer tensors are never
differentiable; a variable that the target never used has no path to it; and a
value that went through NumPy is a new constant the tape knows nothing about.
"""
import tensorflow as tf

k = tf.constant(3)  # integer dtype
v = tf.Variable(2.0)
u = tf.Variable(5.0)  # never used below
x = tf.Variable(4.0)

with tf.GradientTape(persistent=True) as tape:
    tape.watch(k)
    a = k * k
    b = v * 2.0
    # x.numpy() leaves TensorFlow, so y is not connected to x on the tape.
    y = tf.constant(x.numpy()) * 2.0

da_dk = tape.gradient(a, k)
db_du = tape.gradient(b, u)
dy_dx = tape.gradient(y, x)
print("da_dk =", da_dk)
print("db_du =", db_du)
print("dy_dx =", dy_dx)
del tape
