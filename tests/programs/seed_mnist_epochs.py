# The eager guide's MNIST loop typed as a student would: three epochs of 60,000 digits. The
# shared copy holds MNIST's 10,000 test digits, read from its IDX files: six of them make the
# 60,000 load_data() gives (Keras's download is offline here).
import gzip
import os
import numpy as np
import tensorflow as tf

def idx(name, offset):
    with gzip.open(os.environ["TAPEVIZ_MNIST_DIR"] + '/' + name) as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset)
# the local copy holds MNIST's 10,000 test digits: six of them make the 60,000 a student's
# load_data() gives
mnist_images = np.tile(idx('t10k-images-idx3-ubyte.gz', 16).reshape(-1, 28, 28), (6, 1, 1))
mnist_labels = np.tile(idx('t10k-labels-idx1-ubyte.gz', 8), 6)

dataset = tf.data.Dataset.from_tensor_slices(
  (tf.cast(mnist_images[...,tf.newaxis]/255, tf.float32),
   tf.cast(mnist_labels,tf.int64)))
dataset = dataset.shuffle(1000).batch(32)

mnist_model = tf.keras.Sequential([
  tf.keras.layers.Conv2D(16,[3,3], activation='relu',
                         input_shape=(None, None, 1)),
  tf.keras.layers.Conv2D(16,[3,3], activation='relu'),
  tf.keras.layers.GlobalAveragePooling2D(),
  tf.keras.layers.Dense(10)
])

optimizer = tf.keras.optimizers.Adam()
loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

loss_history = []

def train_step(images, labels):
  with tf.GradientTape() as tape:
    logits = mnist_model(images, training=True)

    # Add asserts to check the shape of the output.
    tf.debugging.assert_equal(logits.shape, (32, 10))

    loss_value = loss_object(labels, logits)

  loss_history.append(loss_value.numpy().mean())
  grads = tape.gradient(loss_value, mnist_model.trainable_variables)
  optimizer.apply_gradients(zip(grads, mnist_model.trainable_variables))

def train(epochs):
  for epoch in range(epochs):
    for (batch, (images, labels)) in enumerate(dataset):
      train_step(images, labels)
    print ('Epoch {} finished'.format(epoch))

train(epochs = 3)
