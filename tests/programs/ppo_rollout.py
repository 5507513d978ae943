"""Proximal policy optimization in the style of Keras's PPO example: the tapes are only inside
@tf.function train steps (the policy's clipped objective, the value function's squared
error), and between them long eager rollouts run many small ops outside any tape (the
policy's sampling, a NumPy point mass to push towards the origin, reward-to-go). Prints each
epoch's return and losses."""
import numpy as np
import tensorflow as tf
import keras

SEED, EPOCHS, STEPS, TRAIN_ITERATIONS, CLIP, GAMMA = 0, 3, 700, 2, 0.2, 0.99
tf.random.set_seed(SEED)
keras.utils.set_random_seed(SEED)
rng = np.random.default_rng(SEED)

actor = keras.Sequential([keras.Input((2,)), keras.layers.Dense(16, activation="tanh"),
                          keras.layers.Dense(4)])
critic = keras.Sequential([keras.Input((2,)), keras.layers.Dense(16, activation="tanh"),
                           keras.layers.Dense(1)])
policy_optimizer = keras.optimizers.Adam(3e-3)
value_optimizer = keras.optimizers.Adam(1e-2)
MOVES = np.array([[0.1, 0.0], [-0.1, 0.0], [0.0, 0.1], [0.0, -0.1]], dtype=np.float32)


def log_probability(logits, action):
    return tf.reduce_sum(tf.one_hot(action, 4) * tf.nn.log_softmax(logits), axis=-1)


@tf.function
def train_policy(observations, actions, old_log_probs, advantages):
    with tf.GradientTape() as tape:
        ratio = tf.exp(log_probability(actor(observations), actions) - old_log_probs)
        clipped = tf.clip_by_value(ratio, 1 - CLIP, 1 + CLIP) * advantages
        loss = -tf.reduce_mean(tf.minimum(ratio * advantages, clipped))
    grads = tape.gradient(loss, actor.trainable_variables)
    policy_optimizer.apply_gradients(zip(grads, actor.trainable_variables))
    return loss


@tf.function
def train_value(observations, returns):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((returns - tf.squeeze(critic(observations), -1)) ** 2)
    grads = tape.gradient(loss, critic.trainable_variables)
    value_optimizer.apply_gradients(zip(grads, critic.trainable_variables))
    return loss


for epoch in range(EPOCHS):
    observations, actions, log_probs, rewards = [], [], [], []
    position = rng.uniform(-1, 1, size=2).astype(np.float32)
    for step in range(STEPS):               # the rollout: eager, outside any tape
        observation = tf.constant(position[None])
        logits = actor(observation)
        action = int(tf.random.categorical(logits, 1, seed=step)[0, 0])
        observations.append(position)
        actions.append(action)
        log_probs.append(float(log_probability(logits, tf.constant([action]))[0]))
        position = np.clip(position + MOVES[action], -1, 1)
        rewards.append(-float(np.linalg.norm(position)))
    returns, running = np.zeros(STEPS, np.float32), 0.0
    for t in reversed(range(STEPS)):
        running = rewards[t] + GAMMA * running
        returns[t] = running
    observations = tf.constant(np.array(observations))
    returns = tf.constant(returns)
    advantages = returns - tf.squeeze(critic(observations), -1)
    advantages = (advantages - tf.reduce_mean(advantages)) / (tf.math.reduce_std(advantages) + 1e-8)
    for _ in range(TRAIN_ITERATIONS):
        policy_loss = train_policy(observations, tf.constant(actions), tf.constant(log_probs),
                                   advantages)
        value_loss = train_value(observations, returns)
    print(f"epoch {epoch}: return {sum(rewards):.3f} policy loss {float(policy_loss):.5f} "
          f"value loss {float(value_loss):.5f}")
