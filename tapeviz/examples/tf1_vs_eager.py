"""TensorFlow 1 graphs and sessions versus eager code
In TensorFlow 1 you first built a graph with placeholders, then ran it in a
Session, feeding in the values. That style still works in TensorFlow 2 through
tf.compat.v1 inside an explicit graph. The eager rewrite below it is just a
Python function called with real values, and prints the same result.
"""
import tensorflow as tf

# TensorFlow 1 style: build the graph first, run it later.
g = tf.Graph()
with g.as_default():
    x_ph = tf.compat.v1.placeholder(tf.float32, shape=[None, 2])
    w_c = tf.constant([[1.0], [2.0]])
    y_op = tf.matmul(x_ph, w_c) + 1.0
    with tf.compat.v1.Session(graph=g) as sess:
        y_graph = sess.run(y_op, feed_dict={x_ph: [[3.0, 4.0]]})
print("TF1 graph + session:", y_graph)

# Eager style: no placeholders, no session; just call it.
def model(x):
    return tf.matmul(x, tf.constant([[1.0], [2.0]])) + 1.0

y = model(tf.constant([[3.0, 4.0]]))
print("TF2 eager:", y.numpy())
