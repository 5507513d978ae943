"""A small regression model trained by Keras's own fit(), in the style of Keras's "training
& evaluation with the built-in methods" guide: no custom train_step, so the GradientTape is
Keras's. Prints the per-epoch losses and the final weights' checksums, so a plain run and a
recorded one can be compared. With FIT_REFERENCE=path it runs its tf.functions eagerly and,
before fit, saves the first batch's loss and gradients as a plain tape.gradient computes
them from the same weights (the reference for `record --eager`)."""
import os

import numpy as np
import tensorflow as tf
import keras

keras.utils.set_random_seed(0)
BATCH = 16
x = np.random.default_rng(0).normal(size=(64, 4)).astype("float32")
y = x @ np.array([[1.0], [-2.0], [0.5], [3.0]], "float32") + 0.25

model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"),
                          keras.layers.Dense(1)], name="regressor")
model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")

REFERENCE = os.environ.get("FIT_REFERENCE")
if REFERENCE:
    tf.config.run_functions_eagerly(True)
    with tf.GradientTape() as tape:
        loss = keras.losses.MeanSquaredError()(y[:BATCH], model(x[:BATCH], training=True))
    grads = tape.gradient(loss, model.trainable_weights)
    np.savez(REFERENCE, float(loss), *[g.numpy() for g in grads])

history = model.fit(x, y, batch_size=BATCH, epochs=2, shuffle=False, verbose=0)
print("loss per epoch", [f"{v:.5f}" for v in history.history["loss"]])
for w in model.trainable_weights:
    print(w.path, f"{float(np.abs(w.numpy()).sum()):.5f}")
