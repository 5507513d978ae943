"""Strings, big values and small dtypes pass through eagerly, printed as usual."""
import tensorflow as tf

s = tf.constant("hello, world")
words = tf.strings.split(s, ", ")
print(words.numpy(), tf.strings.length(s).numpy(), tf.strings.upper(words).numpy())
tf.print("words:", words, "length:", tf.strings.length(s))
table = tf.constant([["a", "bb"], ["ccc", "dddd"]])
print(tf.strings.reduce_join(table, axis=1).numpy())
numbers = tf.strings.to_number(tf.constant(["1.5", "2.5"]))
print("numbers:", numbers.numpy())

big = tf.constant([1e20, -3e20, 5e20] * 100)
with tf.GradientTape() as tape:
    tape.watch(big)
    y = tf.reduce_sum(big * 2.0)
print("y:", y.numpy())
print("first gradients:", tape.gradient(y, big).numpy()[:3].tolist())
near = tf.constant(1000.0) + 0.01 * tf.random.stateless_normal([10000], seed=[1, 2])
print("std:", round(float(tf.math.reduce_std(near)), 4))
half = tf.constant([1.0, 2.0], tf.float16) * 3
print(half.dtype.name, half.numpy().tolist())
bits = tf.constant([True, False]) & tf.constant([True, True])
print(bits.numpy().tolist())
ragged = tf.ragged.constant([[1.0, 2.0], [3.0]])
print(ragged.to_list())
