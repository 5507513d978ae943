"""tf.function with tensor, Python and string arguments; tf.print; retracing."""
import tensorflow as tf

traces = []


@tf.function
def power(x, n, label):
    traces.append((n, label))
    tf.print("inside", label, x)
    return x ** n


x = tf.Variable(2.0)
with tf.GradientTape() as tape:
    y = power(x, 3, "cube")
print("grad cube:", tape.gradient(y, x).numpy().tolist())
print(power(tf.constant(3.0), 2, "square").numpy())
print(power(tf.constant(4.0), 2, "square").numpy())
print("traces:", traces)


@tf.function
def greet(name):
    return tf.strings.join(["hello, ", name, "!"])


print(greet(tf.constant("tape")).numpy().decode())
print(greet("world").numpy())


@tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
def norm(v):
    return tf.sqrt(tf.reduce_sum(v * v))


v = tf.Variable([3.0, 4.0])
with tf.GradientTape() as tape:
    n = norm(v)
tf.print("norm:", n)
print("grad norm:", tape.gradient(n, v).numpy().tolist())
print(norm.get_concrete_function().structured_outputs)

@tf.function
def collatz(a):
    count = tf.constant(0)
    while a != 1:
        if a % 2 == 0:
            a = a // 2
        else:
            a = 3 * a + 1
        count += 1
    return count


print("collatz:", collatz(tf.constant(27)).numpy())
