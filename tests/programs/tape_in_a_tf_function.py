import tensorflow as tf
@tf.function
def grad_of_square(x):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = x * x
    return tape.gradient(y, x)
print(grad_of_square(tf.constant(2.0)).numpy())
print(grad_of_square(tf.constant(3.0)).numpy())
