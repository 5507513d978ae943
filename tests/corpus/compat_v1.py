"""TensorFlow 1 style eager code through tf.compat.v1 (as in the old eager guide)."""
import tensorflow.compat.v1 as tf

x = tf.constant(3.0)
with tf.GradientTape() as tape:
    tape.watch(x)
    y = tf.square(x)
print("grad square:", tape.gradient(y, x).numpy().tolist())

w = tf.Variable(5.0)
optimizer = tf.train.GradientDescentOptimizer(learning_rate=0.1)
for step in range(3):
    with tf.GradientTape() as tape:
        loss = (w - 2.0) ** 2
    grads = tape.gradient(loss, [w])
    print("grad step%d:" % step, grads[0].numpy().tolist())
    optimizer.apply_gradients(zip(grads, [w]))
print("w:", round(float(w.numpy()), 5))
print("eager:", tf.executing_eagerly())


def f(x, y):
    output = 1.0
    for i in range(y):
        if 1 < i < 5:
            output = tf.multiply(output, x)
    return output


def grad(x, y):
    with tf.GradientTape() as t:
        t.watch(x)
        out = f(x, y)
    return t.gradient(out, x)


x = tf.convert_to_tensor(2.0)
print("grad f6:", grad(x, 6).numpy().tolist())
print("grad f5:", grad(x, 5).numpy().tolist())
