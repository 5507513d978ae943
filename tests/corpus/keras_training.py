"""A custom training loop with a Keras model and optimizers (as in the walkthrough)."""
import numpy as np
import tensorflow as tf

tf.keras.utils.set_random_seed(3)
features = np.random.default_rng(0).normal(size=(32, 4)).astype("float32")
labels = (features.sum(axis=1) > 0).astype("int64")
dataset = tf.data.Dataset.from_tensor_slices((features, labels)).batch(8)

model = tf.keras.Sequential([
    tf.keras.Input(shape=(4,)),
    tf.keras.layers.Dense(8, activation="relu"),
    tf.keras.layers.Dense(2),
])
loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
optimizer = tf.keras.optimizers.SGD(learning_rate=0.1)


def grad(model, inputs, targets):
    with tf.GradientTape() as tape:
        loss_value = loss_object(y_true=targets, y_pred=model(inputs, training=True))
    return loss_value, tape.gradient(loss_value, model.trainable_variables)


x0, y0 = next(iter(dataset))
loss_value, grads = grad(model, x0, y0)
print("step 0 loss:", round(float(loss_value), 5))
print("grad bias:", grads[-1].numpy().tolist())
optimizer.apply_gradients(zip(grads, model.trainable_variables))
print("step 1 loss:", round(float(loss_object(y0, model(x0, training=True))), 5))

accuracy = tf.keras.metrics.SparseCategoricalAccuracy()
adam = tf.keras.optimizers.Adam(learning_rate=0.01)
for epoch in range(2):
    for x, y in dataset:
        loss_value, grads = grad(model, x, y)
        adam.apply_gradients(zip(grads, model.trainable_variables))
        accuracy.update_state(y, model(x, training=True))
    print(f"epoch {epoch}: loss {float(loss_value):.4f} accuracy {float(accuracy.result()):.3f}")

model.compile(optimizer="adam", loss=loss_object, metrics=["accuracy"])
history = model.fit(dataset, epochs=1, verbose=0)
print("fit keys:", sorted(history.history))
print("predictions:", model.predict(features[:2], verbose=0).shape)


@tf.function
def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = loss_object(y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    adam.apply_gradients(zip(grads, model.trainable_variables))
    return loss


for x, y in dataset:
    loss = train_step(x, y)
print("tf.function steps:", f"{float(loss):.4f}")
