"""A program that prints, records a tape and leaves through os._exit."""
import os
import sys

import tensorflow as tf

x = tf.Variable(4.0)
with tf.GradientTape() as tape:
    y = tf.sqrt(x)
print("grad sqrt:", tape.gradient(y, x).numpy().tolist())
sys.stdout.flush()
os._exit(0)
