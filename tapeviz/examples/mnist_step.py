"""One training step of a small Keras CNN
A custom training step is a forward pass under a GradientTape, a loss, the
gradients of that loss with respect to the model's trainable variables, and an
optimizer update. The batch here is synthetic (fixed random 28x28 images and
labels) so the program runs anywhere without downloading MNIST.
"""
import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
images = rng.random((32, 28, 28, 1), dtype=np.float32)
labels = rng.integers(0, 10, size=(32,))

model = tf.keras.Sequential([
    tf.keras.Input(shape=(28, 28, 1)),
    tf.keras.layers.Conv2D(16, 3, activation="relu"),
    tf.keras.layers.Conv2D(16, 3, activation="relu"),
    tf.keras.layers.GlobalAveragePooling2D(),
    tf.keras.layers.Dense(10),
])
optimizer = tf.keras.optimizers.Adam()
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

with tf.GradientTape() as tape:
    logits = model(images, training=True)
    loss = loss_fn(labels, logits)

grads = tape.gradient(loss, model.trainable_variables)
optimizer.apply_gradients(zip(grads, model.trainable_variables))
print("loss =", float(loss))
