"""A tiny WGAN-GP in the style of Keras's examples: a keras.Model subclass whose overridden
train_step runs two optimizers, with a gradient-penalty tape nested in the critic's tape,
trained by fit() on small synthetic data. Prints the final weights' checksums, so a plain
run and a recorded one can be compared; with GAN_EAGER_REFERENCE=path it runs its
tf.functions eagerly itself and saves the first step's gradients as plain TensorFlow
computes them (the reference for `record --eager`)."""
import os
import sys

import numpy as np
import tensorflow as tf
import keras

keras.utils.set_random_seed(0)
LATENT = 3
DATA = np.random.default_rng(0).normal(size=(64, 4)).astype("float32")
GRADS = os.environ.get("GAN_EAGER_REFERENCE")
if GRADS:
    tf.config.run_functions_eagerly(True)


class GAN(keras.Model):
    def __init__(self):
        super().__init__()
        self.generator = keras.Sequential([keras.layers.Dense(5, activation="relu"),
                                           keras.layers.Dense(4)], name="generator")
        self.critic = keras.Sequential([keras.layers.Dense(5, activation="tanh"),
                                        keras.layers.Dense(1)], name="critic")
        self.saved = []

    def compile(self, c_optimizer, g_optimizer):
        super().compile()
        self.c_optimizer, self.g_optimizer = c_optimizer, g_optimizer

    def gradient_penalty(self, real, fake):
        alpha = tf.random.uniform([tf.shape(real)[0], 1], seed=1)
        mixed = real + alpha * (fake - real)
        with tf.GradientTape() as gp_tape:
            gp_tape.watch(mixed)
            score = self.critic(mixed, training=True)
        grads = gp_tape.gradient(score, [mixed])[0]
        norm = tf.sqrt(tf.reduce_sum(tf.square(grads), axis=1))
        return tf.reduce_mean((norm - 1.0) ** 2)

    def train_step(self, real):
        batch = tf.shape(real)[0]
        noise = tf.random.normal([batch, LATENT], seed=2)
        with tf.GradientTape() as tape:
            fake = self.generator(noise, training=True)
            c_loss = (tf.reduce_mean(self.critic(fake, training=True))
                      - tf.reduce_mean(self.critic(real, training=True))
                      + 10.0 * self.gradient_penalty(real, fake))
        c_grads = tape.gradient(c_loss, self.critic.trainable_variables)
        self.c_optimizer.apply_gradients(zip(c_grads, self.critic.trainable_variables))
        with tf.GradientTape() as tape:
            g_loss = -tf.reduce_mean(self.critic(self.generator(noise, training=True),
                                                 training=True))
        g_grads = tape.gradient(g_loss, self.generator.trainable_variables)
        self.g_optimizer.apply_gradients(zip(g_grads, self.generator.trainable_variables))
        if GRADS and not self.saved:
            self.saved = [g.numpy() for g in c_grads + g_grads]
        return {"c_loss": c_loss, "g_loss": g_loss}


gan = GAN()
gan.compile(keras.optimizers.Adam(1e-3), keras.optimizers.Adam(1e-3))
gan.fit(tf.data.Dataset.from_tensor_slices(DATA).batch(16), epochs=2, verbose=0)
for v in gan.trainable_variables:
    print(v.path, f"{float(np.abs(v.numpy()).sum()):.5f}")
if GRADS:
    np.savez(GRADS, *gan.saved)
sys.exit(3)
